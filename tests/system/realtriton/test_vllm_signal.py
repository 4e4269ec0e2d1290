"""A vLLM model's autoscaling signal, alerts, autoscalers' queries and dashboard, evaluated by a real Prometheus
scraping the real Triton serving the rendered vLLM repository with the real vLLM engine (the project's backend,
reporting NVIDIA's metric families).

The service is rendered under the mock engine for a Llama-family spec (its ServiceMonitor gives the scrape target's
labels; its PrometheusRule is the one :func:`vllm_prometheus_rule_spec` gives, checked); the rules Prometheus loads
are the same function's with a target this machine's CPU crosses under load (:data:`TARGET_S`) and every ``for:``
shortened to seconds. The HPA reads the queue signal (requests waiting inside vLLM) through the prometheus-adapter
rule the platform installs, KEDA through its trigger's query; time to first token is the SLO's alert. Tests
run in file order on one server: idle, under load, after, then refused requests.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime
from typing import Any

import pytest
import yaml

from components.common.triton import TTFT_P95_RECORD, WAITING_RECORD, waiting_adapter_rule
from components.serving.autoscaling import (
    DEFAULT_TTFT_P95_TARGET_S,
    DEFAULT_WAITING_TARGET,
    scaled_object_spec,
    signal_hpa_spec,
    waiting_signal,
)
from components.serving.monitoring import VLLM_METRICS, vllm_dashboard, vllm_prometheus_rule_spec
from tests.components.fixtures import serve
from tests.system.realtriton.prometheus import AdapterRule, LocalPrometheus, quantity, service_monitor_target_labels
from tests.system.realtriton.test_prometheus_signal import (
    GPU_METRIC_PREFIX,
    STARTUP_RECORD_PREFIX,
    firing,
    seconds,
    wait_for,
)
from tests.tritonft.engines.vllm.checkpoints import VARIANTS, write
from tests.tritonft.engines.vllm.test_engine import LLAMA_8B
from tritonft.engines.vllm import local
from tritonft.local_triton import LocalTriton
from tritonft.synth.engine import RecordingMocks, mock_engine, run_program

pytestmark = pytest.mark.slow

MODEL = "tiny-llama"
POD = "m-0"
TARGET_S = 0.25
"""Time-to-first-token p95 target of the test service: idle reads 0, and with :data:`LOAD_CONCURRENCY` requests
of :data:`LOAD_TOKENS` tokens on 16 sequences (``max_num_seqs``) most requests wait whole answers in vLLM."""
LOAD_CONCURRENCY = 48
LOAD_TOKENS = 64
WAITING_TARGET = DEFAULT_WAITING_TARGET
"""Requests waiting inside vLLM per pod the test service scales at (the default): idle reads 0; under the load 48
streams on 16 sequences keep about 32 waiting."""
ALERT_FOR = {"TritonInferenceFailures": "4s", "VllmTimeToFirstTokenHigh": "4s", "VllmEngineErrors": "4s"}


@pytest.fixture(scope="module")
def rendered() -> dict[str, Any]:
    """The service the program renders for a vLLM model, as manifests (``metadata`` + ``spec``) by kind."""
    recorder = RecordingMocks()
    with mock_engine(recorder, project="triton-ft", stack="test"):
        run_program(lambda: serve("m", LLAMA_8B))
    names = {
        "ServiceMonitor": "m-servicemonitor",
        "PrometheusRule": "m-rules",
        "Service": "m-service",
        "Deployment": "m-deployment",
    }
    out: dict[str, Any] = {}
    for kind, name in names.items():
        doc = recorder.named(name)
        out[kind] = {"metadata": doc.inputs["metadata"], "spec": doc.inputs["spec"]}
    return out


@pytest.fixture(scope="module")
def labels(rendered: dict[str, Any]) -> dict[str, str]:
    return service_monitor_target_labels(rendered["ServiceMonitor"], rendered["Service"], rendered["Deployment"], POD)


@pytest.fixture(scope="module")
def rules(labels: dict[str, str]) -> dict[str, Any]:
    return vllm_prometheus_rule_spec(labels["namespace"], labels["job"], TARGET_S, for_=ALERT_FOR)


@pytest.fixture(scope="module")
def triton(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalTriton]:
    work = tmp_path_factory.mktemp("vllm-signal")
    checkpoint = write(next(v for v in VARIANTS if v.name == MODEL), work / MODEL)
    repository = local.render({MODEL: checkpoint}, work / "repository", replace(local.CPU_OPTIONS, max_model_len=256))
    server = local.server(repository, work / "tritonserver.log")
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def prometheus(
    rules: dict[str, Any], labels: dict[str, str], triton: LocalTriton, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalPrometheus]:
    workdir = tmp_path_factory.mktemp("prometheus")
    path = workdir / "rules.yaml"
    path.write_text(yaml.safe_dump(rules, sort_keys=False))
    server = LocalPrometheus(workdir, [path], [(f"127.0.0.1:{triton.metrics_port}", "/metrics", labels)])
    server.start()
    try:
        yield server
    finally:
        server.stop()


def signal_of(prometheus: LocalPrometheus, labels: dict[str, str], record: str = TTFT_P95_RECORD) -> dict[str, float]:
    samples = prometheus.query(f'{record}{{namespace="{labels["namespace"]}",job="{labels["job"]}"}}')
    return {s["metric"]["pod"]: float(s["value"][1]) for s in samples}


def hpa_reading(prometheus: LocalPrometheus, labels: dict[str, str]) -> tuple[float | None, float]:
    """What prometheus-adapter serves the HPA for the pod (the platform's rule), and the HPA's target."""
    hpa = signal_hpa_spec(waiting_signal(WAITING_TARGET), "m", 1, 4, 600)
    (metric,) = hpa["metrics"]
    rule = AdapterRule(waiting_adapter_rule())
    served = rule.discover(prometheus)
    series = served.get(metric["pods"]["metric"]["name"])
    if series is None:
        return None, quantity(metric["pods"]["target"]["averageValue"])
    samples = prometheus.query(rule.pods_query(series, labels["namespace"], [POD]))
    value = float(samples[0]["value"][1]) if samples else None
    return value, quantity(metric["pods"]["target"]["averageValue"])


def keda_reading(prometheus: LocalPrometheus, labels: dict[str, str]) -> tuple[float | None, float]:
    spec = scaled_object_spec(
        deployment="m",
        namespace=labels["namespace"],
        job=labels["job"],
        prometheus_url=prometheus.url,
        ingresses=(),
        min_replicas=1,
        max_replicas=4,
        ratio_target=1.0,
        requests_per_replica=20,
        scale_down_window_seconds=600,
        signal=waiting_signal(WAITING_TARGET),
    )
    (trigger,) = spec["triggers"]
    samples = prometheus.query(trigger["metadata"]["query"])
    return (float(samples[0]["value"][1]) if samples else None), float(trigger["metadata"]["threshold"])


def generate(triton: LocalTriton, parameters: dict[str, Any], *, stream: bool) -> int:
    route = "generate_stream" if stream else "generate"
    body = {"text_input": "Once upon a time", "sampling_parameters": json.dumps(parameters), "stream": stream}
    request = urllib.request.Request(
        f"http://{triton.http_url}/v2/models/{MODEL}/{route}",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=300) as answer:
            answer.read()
            return int(answer.status)
    except urllib.error.HTTPError as error:
        error.read()
        return int(error.code)


def test_the_service_renders_the_vllm_rules_with_its_target(rendered: dict[str, Any], labels: dict[str, str]) -> None:
    assert rendered["PrometheusRule"]["spec"] == vllm_prometheus_rule_spec(
        labels["namespace"], labels["job"], DEFAULT_TTFT_P95_TARGET_S
    )


def test_every_vllm_metric_the_rules_dashboard_and_adapter_read_is_exported_by_the_backend(
    triton: LocalTriton,
) -> None:
    with urllib.request.urlopen(triton.metrics_url, timeout=30) as answer:
        text = answer.read().decode()
    exported = {line.split("{")[0].removesuffix("_count") for line in text.splitlines() if line.startswith("vllm:")}
    assert set(VLLM_METRICS) <= exported, set(VLLM_METRICS) - exported
    assert f'vllm:time_to_first_token_seconds_count{{model="{MODEL}",version="1"}} 0' in text


def test_idle_the_ttft_signal_is_recorded_for_the_pod_and_is_zero(
    prometheus: LocalPrometheus, labels: dict[str, str]
) -> None:
    assert wait_for("the TTFT p95 record", lambda: signal_of(prometheus, labels), 90) == {POD: 0.0}


def test_idle_the_queue_signal_is_recorded_for_the_pod_and_is_zero(
    prometheus: LocalPrometheus, labels: dict[str, str]
) -> None:
    assert wait_for("the waiting record", lambda: signal_of(prometheus, labels, WAITING_RECORD), 90) == {POD: 0.0}


def test_idle_the_hpa_and_keda_read_zero(prometheus: LocalPrometheus, labels: dict[str, str]) -> None:
    assert hpa_reading(prometheus, labels)[0] == 0.0
    assert keda_reading(prometheus, labels)[0] == 0.0


class Load:
    """Streamed requests of :data:`LOAD_TOKENS` tokens from :data:`LOAD_CONCURRENCY` threads until stopped."""

    def __init__(self, triton: LocalTriton) -> None:
        self.stop = threading.Event()
        self.statuses: list[int] = []
        parameters = {"max_tokens": LOAD_TOKENS, "ignore_eos": True, "temperature": 0}

        def loop() -> None:
            while not self.stop.is_set():
                self.statuses.append(generate(triton, parameters, stream=True))

        self.threads = [threading.Thread(target=loop, daemon=True) for _ in range(LOAD_CONCURRENCY)]
        for thread in self.threads:
            thread.start()

    def finish(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(300)


@pytest.fixture(scope="class")
def loaded(
    prometheus: LocalPrometheus, labels: dict[str, str], triton: LocalTriton
) -> Iterator[tuple[dict[str, float], Load]]:
    load = Load(triton)
    try:
        high = wait_for(
            f"the TTFT p95 record above {TARGET_S} s",
            lambda: {p: v for p, v in signal_of(prometheus, labels).items() if v > TARGET_S},
            180,
        )
        yield high, load
    finally:
        load.finish()


class TestUnderLoad:
    def test_the_ttft_signal_rises_above_its_target(self, loaded: tuple[dict[str, float], Load]) -> None:
        high, _ = loaded
        assert set(high) == {POD}

    def test_the_queue_signal_rises_above_its_target(
        self, loaded: tuple[dict[str, float], Load], prometheus: LocalPrometheus, labels: dict[str, str]
    ) -> None:
        high = wait_for(
            f"the waiting record above {WAITING_TARGET}",
            lambda: {p: v for p, v in signal_of(prometheus, labels, WAITING_RECORD).items() if v > WAITING_TARGET},
            120,
        )
        assert set(high) == {POD}

    def test_the_hpa_reads_it_above_its_target_through_prometheus_adapter(
        self, loaded: tuple[dict[str, float], Load], prometheus: LocalPrometheus, labels: dict[str, str]
    ) -> None:
        value, target = hpa_reading(prometheus, labels)
        assert value is not None and value > target, (value, target)

    def test_keda_reads_it_above_its_threshold(
        self, loaded: tuple[dict[str, float], Load], prometheus: LocalPrometheus, labels: dict[str, str]
    ) -> None:
        value, threshold = keda_reading(prometheus, labels)
        assert value is not None and value > threshold, (value, threshold)

    def test_the_ttft_alert_fires_after_its_for(
        self, loaded: tuple[dict[str, float], Load], prometheus: LocalPrometheus, labels: dict[str, str]
    ) -> None:
        fired = wait_for("VllmTimeToFirstTokenHigh firing", lambda: firing(prometheus, "VllmTimeToFirstTokenHigh"), 60)
        (instance,) = fired
        assert instance["labels"]["job"] == labels["job"] and instance["labels"]["service"] == labels["job"]
        assert float(instance["value"]) > TARGET_S
        active_at = datetime.fromisoformat(instance["activeAt"].replace("Z", "+00:00")).timestamp()
        assert time.time() - active_at >= seconds(ALERT_FOR["VllmTimeToFirstTokenHigh"])

    def test_every_dashboard_query_parses_and_returns_series(
        self, loaded: tuple[dict[str, float], Load], prometheus: LocalPrometheus, labels: dict[str, str]
    ) -> None:
        board = vllm_dashboard(labels["namespace"], labels["job"], "t", TARGET_S)
        exprs = [t["expr"] for panel in board["panels"] for t in panel["targets"]]
        empty = [
            e
            for e in exprs
            if GPU_METRIC_PREFIX not in e and STARTUP_RECORD_PREFIX not in e and not prometheus.query(e)
        ]
        assert empty == []


def test_every_load_request_was_answered_and_the_engine_errors_alert_stays_silent(
    prometheus: LocalPrometheus, labels: dict[str, str]
) -> None:
    sel = f'namespace="{labels["namespace"]}",job="{labels["job"]}"'
    handed = prometheus.query(f"sum(increase(nv_inference_request_success{{{sel}}}[5m]))")
    assert handed and float(handed[0]["value"][1]) > LOAD_CONCURRENCY
    time.sleep(5)  # longer than the alert's for: a pending instance would have fired
    assert firing(prometheus, "VllmEngineErrors") == []


def test_requests_vllm_refuses_make_the_engine_errors_alert_fire_for_the_model(
    prometheus: LocalPrometheus, labels: dict[str, str], triton: LocalTriton
) -> None:
    stop = threading.Event()
    statuses: list[int] = []

    def refused() -> None:  # an unknown sampling parameter: vLLM refuses it, Triton counts a success
        while not stop.is_set():
            statuses.append(generate(triton, {"max_tokens": 4, "no_such_parameter": 1}, stream=False))
            time.sleep(0.02)

    sender = threading.Thread(target=refused, daemon=True)
    sender.start()
    try:
        fired = wait_for("VllmEngineErrors firing", lambda: firing(prometheus, "VllmEngineErrors"), 180)
    finally:
        stop.set()
        sender.join(60)
    assert set(statuses) == {400}
    (instance,) = fired
    assert instance["labels"]["model"] == MODEL and instance["labels"]["severity"] == "critical"
    assert firing(prometheus, "TritonInferenceFailures") == [], "Triton counts the refused requests as successes"
    assert generate(triton, {"max_tokens": 4}, stream=False) == 200, "the server keeps serving"
