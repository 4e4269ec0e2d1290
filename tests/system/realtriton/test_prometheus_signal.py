"""The autoscaling signal, the alerts, the autoscalers' queries and the dashboard, evaluated by a real Prometheus
scraping a real Triton.

The staging stack is synthesized with one change, ``alertFor`` (every alert's ``for:`` shortened to
:data:`ALERT_FOR`, so the alerts reach *firing* within a test); its ``t5-3b`` service's PrometheusRule is loaded as
rendered, its ServiceMonitor gives the scrape target's labels (:func:`service_monitor_target_labels`), its model is
rendered into a repository whose FT step is the stand-in, and ``tritonft bench`` loads it. The HPA reads the ratio
through the prometheus-adapter rules the stack installs; a second variant (``scaleToZero``, KEDA) gives the
ScaledObject's queries. Tests run in file order on one server: idle first, then under load, then failing.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.common.triton import RATIO_RECORD
from components.serving.monitoring import failure_ratio_expr
from tests.system.realtriton.conftest import ServeTriton
from tests.system.realtriton.prometheus import (
    AdapterRule,
    LocalPrometheus,
    quantity,
    service_monitor_target_labels,
)
from tests.system.realtriton.repos import ROOT, stack_specs
from tests.system.realtriton.signal_plan import MODEL, POD, STACK, Plan, synthesized_plan
from tritonft.local_triton import LocalTriton
from tritonft.repo.render import write_repository
from tritonft.spec import Family
from tritonft.standin import set_behaviour, standin_all

pytestmark = pytest.mark.slow

ALERT_FOR = {"TritonInferenceFailures": "4s", "TritonQueueSaturated": "4s", "TritonRequestsPiling": "4s"}
"""The test stack's ``alertFor``: seconds instead of the default 5-15 minutes."""
FT_STEP_NAME_FILE = "ft-step-name.txt"
"""Beside the models in the served repository (Triton ignores plain files there)."""
GPU_METRIC_PREFIX = "nv_gpu_"
"""Dashboard queries on GPU metrics parse but return nothing here: the CPU server exports no GPU metrics."""
LOAD_CONCURRENCY = 320
"""Well above what the stand-in step takes at once (max batch 32), and enough that more than the rule's
4 x max batch (128) requests wait in the pod with a margin: the requests in flight that are not queued in the FT step
(its batch, the pre- and post-processing, the client's turnaround) grow with the machine's load, and at 200 a fresh run
beside five other lanes measured a mean of 135 queued, too close to 128 to hold the alert above it."""


@pytest.fixture(scope="module")
def plan(tmp_path_factory: pytest.TempPathFactory) -> Plan:
    return synthesized_plan(tmp_path_factory.mktemp("synth"), {"alertFor": ALERT_FOR})


@pytest.fixture(scope="module")
def keda_plan(tmp_path_factory: pytest.TempPathFactory) -> Plan:
    """Staging turned to KEDA (scale to zero): its ScaledObject."""
    addons = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{STACK}.yaml").read_text())["config"]["triton-ft:addons"]
    extra = {"alertFor": ALERT_FOR, "scaleToZero": True, "addons": [*addons, "keda"]}
    return synthesized_plan(tmp_path_factory.mktemp("synth-keda"), extra)


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory, tokenizers: dict[Family, Path]) -> Path:
    (spec,) = [s for s in stack_specs(STACK) if s.name == MODEL]
    out = tmp_path_factory.mktemp("signal-repo")
    write_repository(spec, out, tokenizer_dir=tokenizers[spec.family], model_root=str(out))
    (ft_step,) = standin_all(out)
    (out / FT_STEP_NAME_FILE).write_text(ft_step)
    return out


def ft_step(repository: Path) -> Path:
    """The stand-in's model folder (its behaviour file is read per batch)."""
    return repository / (repository / FT_STEP_NAME_FILE).read_text()


@pytest.fixture(scope="module")
def triton(serve_triton: ServeTriton, repository: Path) -> LocalTriton:
    return serve_triton(repository, shared=False)


@pytest.fixture(scope="module")
def prometheus(plan: Plan, triton: LocalTriton, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalPrometheus]:
    workdir = tmp_path_factory.mktemp("prometheus")
    rules = workdir / "rules.yaml"
    rules.write_text(yaml.safe_dump(plan.rule["spec"], sort_keys=False))
    labels = service_monitor_target_labels(plan.monitor, plan.service, plan.deployment, POD)
    (endpoint,) = plan.monitor["spec"]["endpoints"]
    server = LocalPrometheus(workdir, [rules], [(f"127.0.0.1:{triton.metrics_port}", endpoint["path"], labels)])
    server.start()
    try:
        yield server
    finally:
        server.stop()


def wait_for(what: str, probe: Callable[[], Any], timeout: float, context: Callable[[], str] = str) -> Any:
    """Poll ``probe`` once a second until it returns something truthy; fail naming ``what`` (and ``context()``)
    after ``timeout``."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(1)
    pytest.fail(f"{what}: not within {timeout:.0f} s (last answer: {last!r})\n{context()}", pytrace=False)


def duration_counters(triton: LocalTriton) -> str:
    """Triton's own queue/compute/pending lines, for failure messages."""
    with urllib.request.urlopen(triton.metrics_url, timeout=10) as answer:
        text: str = answer.read().decode()
    wanted = ("nv_inference_queue_duration_us", "nv_inference_compute_infer_duration_us", "nv_inference_pending")
    return "\n".join(line for line in text.splitlines() if line.startswith(wanted))


def ratio_of(prometheus: LocalPrometheus, plan: Plan, at: float | None = None) -> dict[str, float]:
    samples = prometheus.query(f'{RATIO_RECORD}{{namespace="{plan.namespace}",job="{plan.job}"}}', at)
    return {s["metric"]["pod"]: float(s["value"][1]) for s in samples}


def alert_states(prometheus: LocalPrometheus, alert: str) -> set[str]:
    return {s["metric"]["alertstate"] for s in prometheus.query(f'ALERTS{{alertname="{alert}"}}')}


def firing(prometheus: LocalPrometheus, alert: str) -> list[dict[str, Any]]:
    """The alert's firing instances (``/api/v1/alerts``: labels, annotations, activeAt ...)."""
    return [
        a for a in prometheus.api("alerts")["alerts"] if a["labels"]["alertname"] == alert and a["state"] == "firing"
    ]


def seconds(duration: str) -> float:
    """A Prometheus duration in seconds (the forms :data:`ALERT_FOR` uses)."""
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    number = duration.rstrip("mshd")
    return float(number) * units[duration[len(number) :]]


def assert_fired_after_its_for(prometheus: LocalPrometheus, plan: Plan, alert: str, timeout: float) -> dict[str, Any]:
    """Wait until ``alert`` fires; it must have been active (pending) for at least its rendered ``for:``."""
    (rendered,) = [r for g in plan.rule["spec"]["groups"] for r in g["rules"] if r.get("alert") == alert]
    measured = rendered["expr"].rsplit(" > ", 1)[0]  # what the threshold compares, to say where it stood
    fired = wait_for(
        f"{alert} firing",
        lambda: firing(prometheus, alert),
        timeout,
        context=lambda: f"its measure {measured!r} then: {prometheus.query(measured)}",
    )
    now = time.time()
    for instance in fired:
        active_at = datetime.fromisoformat(instance["activeAt"].replace("Z", "+00:00")).timestamp()
        assert now - active_at >= seconds(rendered["for"]), instance
    return dict(fired[0])


class Bench:
    """Load on the server's HTTP port by ``tritonft bench`` (so perf_analyzer) in its own process group, stopped by
    PID. (A failing model is loaded by :func:`_send_until` instead: perf_analyzer, and ``tritonft bench`` with it,
    stops at the first failed request, and the failure alert needs failures to go on.)"""

    def __init__(self, triton: LocalTriton, log: Path, concurrency: int, duration: float) -> None:
        env = dict(os.environ)
        argv = [sys.executable, "-m", "tritonft", "bench", "--triton", f"http://{triton.http_url}"]
        argv += ["--kserve", MODEL, "--concurrency", str(concurrency), "--duration", str(duration)]
        argv += ["--out", str(log.parent / "bench-results")]
        self.log = log
        with log.open("wb") as out:
            self.process = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True, env=env
            )

    def stop(self) -> str:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        return self.log.read_text(errors="replace")


def hpa_value(prometheus: LocalPrometheus, plan: Plan, at: float | None = None) -> dict[str, float]:
    """Per pod, the value prometheus-adapter serves the HPA for the metric its Pods target names."""
    (metric,) = plan.autoscaler["spec"]["metrics"]
    name = metric["pods"]["metric"]["name"]
    served = {
        served_name: (rule, series)
        for rule in map(AdapterRule, plan.adapter_rules)
        for served_name, series in rule.discover(prometheus).items()
    }
    assert name in served, f"prometheus-adapter serves no metric {name!r} (it serves {sorted(served)})"
    rule, series = served[name]
    samples = prometheus.query(rule.pods_query(series, plan.namespace, [POD]), at)
    return {s["metric"]["pod"]: float(s["value"][1]) for s in samples}


def keda_values(prometheus: LocalPrometheus, plan: Plan) -> list[float | None]:
    """Each prometheus trigger's value as KEDA reads it: the first sample of its query, None when empty."""
    values: list[float | None] = []
    for trigger in plan.autoscaler["spec"]["triggers"]:
        samples = prometheus.query(trigger["metadata"]["query"])
        values.append(float(samples[0]["value"][1]) if samples else None)
    return values


def test_every_triton_metric_the_rules_dashboard_and_adapter_read_is_exported_by_the_ft_images_server(
    plan: Plan, triton: LocalTriton
) -> None:
    """tritonserver 2.33.0 (NGC 23.04, the FT image's) exports no ``nv_inference_pending_request_count``: a rule on
    it can never fire. GPU metrics are left out (this CPU server exports none)."""
    with urllib.request.urlopen(f"http://{triton.http_url}/v2", timeout=10) as answer:
        assert json.loads(answer.read())["version"] == "2.33.0"
    with urllib.request.urlopen(triton.metrics_url, timeout=10) as answer:
        exported = set(re.findall(r"^(nv_[a-z_]+)", answer.read().decode(), flags=re.M))
    read = json.dumps([plan.rule["spec"], plan.dashboard, plan.adapter_rules])
    # whole names only (an adapter rule's ``nv_inference_(a|b)`` regex leaves a stem ending in "_")
    wanted = {n for n in re.findall(r"nv_[a-z_]+", read) if not n.startswith(GPU_METRIC_PREFIX) and n[-1] != "_"}
    assert "nv_inference_queue_duration_us" in wanted
    assert sorted(wanted - exported) == []


def test_the_test_stack_differs_from_staging_only_in_the_alert_durations(plan: Plan, tmp_path: Path) -> None:
    staging = synthesized_plan(tmp_path, {}).rule["spec"]
    tuned = plan.rule["spec"]

    def without_for(spec: dict[str, Any]) -> list[dict[str, Any]]:
        rules = [r for g in spec["groups"] for r in g["rules"]]
        return [{k: v for k, v in r.items() if k not in ("for", "annotations")} for r in rules]

    assert without_for(tuned) == without_for(staging)
    assert {r["alert"]: r["for"] for g in tuned["groups"] for r in g["rules"] if "alert" in r} == ALERT_FOR


def test_idle_the_ratio_is_recorded_for_the_pod_and_is_zero(prometheus: LocalPrometheus, plan: Plan) -> None:
    """Triton exports its duration counters at 0 from model load, so the ratio exists before the first request:
    0 (queue 0 / clamp_min(compute 0, 1)), which the HPA averages in as "no pressure"."""
    ratios = wait_for("the recorded ratio", lambda: ratio_of(prometheus, plan), timeout=60)
    assert ratios == {POD: 0.0}


def test_idle_the_hpa_reads_zero_through_prometheus_adapter(prometheus: LocalPrometheus, plan: Plan) -> None:
    assert plan.autoscaler["kind"] == "HorizontalPodAutoscaler"
    assert wait_for("the adapter's value", lambda: hpa_value(prometheus, plan), timeout=30) == {POD: 0.0}


def test_idle_keda_reads_a_zero_ratio_and_no_request_traffic(prometheus: LocalPrometheus, keda_plan: Plan) -> None:
    """The ratio trigger reads 0 (below its threshold); the request-rate trigger's query (the gateway's request
    counter: on the Gateway API edge no ingress controller counts requests) parses and reads 0 with its source not
    scraped here, so the service is not woken. (The gateway's part, scraped for real: test_scale_to_zero_wake.py.)"""
    ratio_trigger, demand_trigger = keda_plan.autoscaler["spec"]["triggers"]
    assert "tritonft_gateway_model_requests_total" in demand_trigger["metadata"]["query"]
    assert float(ratio_trigger["metadata"]["threshold"]) > 0
    assert wait_for("the KEDA ratio", lambda: keda_values(prometheus, keda_plan)[0] is not None, 30)
    assert keda_values(prometheus, keda_plan) == [0.0, 0.0]


@pytest.fixture(scope="class")
def loaded(
    prometheus: LocalPrometheus,
    plan: Plan,
    triton: LocalTriton,
    repository: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, float]]:
    """``tritonft bench`` (perf_analyzer) at :data:`LOAD_CONCURRENCY` while the stand-in step sleeps 0.2 s per batch,
    for the tests of one class (they share it); yields once the ratio passes 3 x autoscaleTargetRatio (the ratios
    then)."""
    set_behaviour(ft_step(repository), sleep_s=0.2)
    bench = Bench(triton, tmp_path_factory.mktemp("bench") / "bench.log", LOAD_CONCURRENCY, duration=120)
    target = 3 * quantity(plan.autoscaler["spec"]["metrics"][0]["pods"]["target"]["averageValue"])
    try:
        yield wait_for(
            f"ratio above {target:g} (3 x autoscaleTargetRatio)",
            lambda: {p: r for p, r in ratio_of(prometheus, plan).items() if r > target},
            timeout=75,
            context=lambda: f"ratios {ratio_of(prometheus, plan)}\n{duration_counters(triton)}",
        )
    finally:
        log = bench.stop()
        set_behaviour(ft_step(repository))
    assert "Traceback" not in log, log


class TestUnderLoad:
    """Under one load (:func:`loaded`)."""

    def test_the_ratio_rises_above_three_times_the_target(self, loaded: dict[str, float], plan: Plan) -> None:
        target = quantity(plan.autoscaler["spec"]["metrics"][0]["pods"]["target"]["averageValue"])
        assert set(loaded) == {POD} and loaded[POD] > 3 * target

    def test_the_queue_saturation_alert_fires_after_its_for(
        self, loaded: dict[str, float], prometheus: LocalPrometheus, plan: Plan
    ) -> None:
        fired = assert_fired_after_its_for(prometheus, plan, "TritonQueueSaturated", timeout=45)
        assert fired["labels"] == {
            "alertname": "TritonQueueSaturated",
            "namespace": plan.namespace,
            "job": plan.job,
            "service": plan.job,
            "severity": "warning",
        }

    def test_the_piling_alert_fires_for_the_pod_and_the_ft_step(
        self, loaded: dict[str, float], prometheus: LocalPrometheus, plan: Plan, repository: Path
    ) -> None:
        fired = assert_fired_after_its_for(prometheus, plan, "TritonRequestsPiling", timeout=45)
        assert (fired["labels"]["pod"], fired["labels"]["model"]) == (POD, ft_step(repository).name)

    def test_the_hpa_reads_the_recorded_ratio_through_prometheus_adapter_above_its_target(
        self, loaded: dict[str, float], prometheus: LocalPrometheus, plan: Plan
    ) -> None:
        (metric,) = plan.autoscaler["spec"]["metrics"]
        at = time.time()
        served = hpa_value(prometheus, plan, at)
        assert set(served) == {POD}
        assert served[POD] > quantity(metric["pods"]["target"]["averageValue"])
        assert served[POD] == ratio_of(prometheus, plan, at)[POD]

    def test_every_adapter_rule_serves_the_pod(
        self, loaded: dict[str, float], prometheus: LocalPrometheus, plan: Plan
    ) -> None:
        """Each custom metric the stack's prometheus-adapter rules expose answers for the pod (finite values)."""
        answers = {
            name: prometheus.query(rule.pods_query(series, plan.namespace, [POD]))
            for rule in map(AdapterRule, plan.adapter_rules)
            for name, series in rule.discover(prometheus).items()
        }
        assert len(answers) >= len(plan.adapter_rules)
        for name, samples in answers.items():
            assert [s["metric"]["pod"] for s in samples] == [POD], name
            assert all(math.isfinite(float(s["value"][1])) for s in samples), (name, samples)

    def test_keda_reads_the_ratio_above_its_threshold(
        self, loaded: dict[str, float], prometheus: LocalPrometheus, keda_plan: Plan
    ) -> None:
        ratio_trigger = keda_plan.autoscaler["spec"]["triggers"][0]
        value = keda_values(prometheus, keda_plan)[0]
        assert value is not None and value > float(ratio_trigger["metadata"]["threshold"])


STARTUP_RECORD_PREFIX = "triton_ft:pod_startup_"


def test_every_dashboard_query_parses_and_returns_series(prometheus: LocalPrometheus, plan: Plan) -> None:
    exprs = [t["expr"] for panel in plan.dashboard["panels"] for t in panel["targets"]]
    answered = {expr: prometheus.query(expr) for expr in exprs}
    # No GPU here, and no kube-state-metrics (the start-up records' source: promtool's unit tests check them).
    empty = [
        e
        for e, samples in answered.items()
        if not samples and GPU_METRIC_PREFIX not in e and STARTUP_RECORD_PREFIX not in e
    ]
    assert empty == []
    assert len(answered) == len(exprs)


def _send_until(stop: threading.Event, triton: LocalTriton, deadline_s: float) -> int:
    """One request after another to :data:`MODEL` until ``stop`` is set or ``deadline_s`` passes (failures
    expected: perf_analyzer, so ``tritonft bench``, stops at the first failed request); returns how many were sent."""
    import numpy as np
    import tritonclient.http as httpclient

    client = httpclient.InferenceServerClient(triton.http_url)
    text = httpclient.InferInput("text_input", [1, 1], "BYTES")
    text.set_data_from_numpy(np.array([[b"translate English to German: hello"]], dtype=object))
    sent, ends = 0, time.monotonic() + deadline_s
    while not stop.is_set() and time.monotonic() < ends:
        with contextlib.suppress(Exception):
            client.infer(MODEL, [text])
        sent += 1
    client.close()
    return sent


def test_a_failing_model_makes_the_failure_alert_fire_after_its_for(
    prometheus: LocalPrometheus, plan: Plan, triton: LocalTriton, repository: Path
) -> None:
    """It fires for the ensemble, the model clients call: that is why the alert, unlike the ratio, keeps it. On
    tritonserver 2.33.0 (the FT image's) the failing step counts its failures too (``nv_inference_request_failure``
    of the ensemble and of the step, once each, no ``reason`` label), so it fires for the step as well."""
    set_behaviour(ft_step(repository), fail="injected by the test")
    stop = threading.Event()
    senders = [threading.Thread(target=_send_until, args=(stop, triton, 180.0)) for _ in range(4)]
    ratio = failure_ratio_expr(plan.namespace, plan.job)
    try:
        for sender in senders:
            sender.start()
        fired = wait_for(
            "TritonInferenceFailures firing",
            lambda: firing(prometheus, "TritonInferenceFailures"),
            timeout=150,
            context=lambda: f"failure ratio {prometheus.query(ratio)}",
        )
        assert_fired_after_its_for(prometheus, plan, "TritonInferenceFailures", timeout=5)
        models = {a["labels"]["model"] for a in fired}
    finally:
        stop.set()
        for sender in senders:
            sender.join()
        set_behaviour(ft_step(repository))
    assert MODEL in models and models <= {MODEL, ft_step(repository).name}
