"""The autoscaling signal, the alerts and the dashboard evaluated by a real Prometheus scraping a real Triton.

The staging stack is synthesized; its ``t5-3b`` service's PrometheusRule is loaded as rendered, its ServiceMonitor
gives the scrape target's labels (:func:`service_monitor_target_labels`), its model is rendered into a repository
whose FT step is the stand-in, and ``tritonft bench`` loads it. Tests run in file order on one server: idle first.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.autoscaling import RATIO_RECORD
from tests.realtriton.conftest import ServeTriton
from tests.realtriton.prometheus import LocalPrometheus, service_monitor_target_labels
from tests.realtriton.repos import ROOT, stack_specs
from tritonft.local_triton import LocalTriton
from tritonft.repo.render import write_repository
from tritonft.spec import Family
from tritonft.standin import set_behaviour, standin_all
from tritonft.synth.run import synthesize

pytestmark = pytest.mark.slow

STACK, MODEL = "staging", "t5-3b"
POD = f"{STACK}-{MODEL}-0"
FT_STEP_NAME_FILE = "ft-step-name.txt"
"""Beside the models in the served repository (Triton ignores plain files there)."""
GPU_METRIC_PREFIX = "nv_gpu_"
"""Dashboard queries on GPU metrics parse but return nothing here: the CPU server exports no GPU metrics."""


@dataclass
class Plan:
    """The staging stack's objects for the service serving :data:`MODEL`."""

    monitor: dict[str, Any]
    service: dict[str, Any]
    deployment: dict[str, Any]
    rule: dict[str, Any]
    dashboard: dict[str, Any]
    target_ratio: float


def _quantity(value: str) -> float:
    return float(value[:-1]) / 1000 if value.endswith("m") else float(value)


def synthesized_plan(out: Path) -> Plan:
    synthesize(STACK, out=out, project_dir=ROOT, extras=())
    docs: list[dict[str, Any]] = [
        d for p in sorted((out / "manifests").rglob("*.yaml")) for d in yaml.safe_load_all(p.read_text()) if d
    ]
    mine = [d for d in docs if d["metadata"].get("labels", {}).get("triton-ft/model") == MODEL]

    def one(kind: str) -> dict[str, Any]:
        (doc,) = [d for d in mine if d["kind"] == kind and not d["metadata"]["name"].endswith("-dashboard")]
        return doc

    service = one("Service")
    (board,) = [d for d in mine if d["metadata"]["name"] == f"{service['metadata']['name']}-dashboard"]
    (board_json,) = board["data"].values()
    (metric,) = one("HorizontalPodAutoscaler")["spec"]["metrics"]
    return Plan(
        monitor=one("ServiceMonitor"),
        service=service,
        deployment=one("Deployment"),
        rule=one("PrometheusRule"),
        dashboard=json.loads(board_json),
        target_ratio=_quantity(metric["pods"]["target"]["averageValue"]),
    )


@pytest.fixture(scope="module")
def plan(tmp_path_factory: pytest.TempPathFactory) -> Plan:
    return synthesized_plan(tmp_path_factory.mktemp("synth"))


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
def prometheus(
    plan: Plan, triton: LocalTriton, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[LocalPrometheus]:
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


def ratio_of(prometheus: LocalPrometheus, plan: Plan) -> dict[str, float]:
    namespace, job = plan.service["metadata"]["namespace"], plan.service["metadata"]["name"]
    samples = prometheus.query(f'{RATIO_RECORD}{{namespace="{namespace}",job="{job}"}}')
    return {s["metric"]["pod"]: float(s["value"][1]) for s in samples}


def alert_states(prometheus: LocalPrometheus, alert: str) -> set[str]:
    return {s["metric"]["alertstate"] for s in prometheus.query(f'ALERTS{{alertname="{alert}"}}')}


class Bench:
    """``tritonft bench`` in its own process group against the server's HTTP port, stopped by PID."""

    def __init__(self, triton: LocalTriton, log: Path, concurrency: int, duration: float) -> None:
        argv = [sys.executable, "-m", "tritonft", "bench", "--url", f"http://{triton.http_url}", "--model", MODEL]
        argv += ["--concurrency", str(concurrency), "--duration", str(duration), "--warmup", "0"]
        self.log = log
        with log.open("wb") as out:
            self.process = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
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


def test_idle_the_ratio_is_recorded_for_the_pod_and_is_zero(prometheus: LocalPrometheus, plan: Plan) -> None:
    """Triton exports its duration counters at 0 from model load, so the ratio exists before the first request:
    0 (queue 0 / clamp_min(compute 0, 1)), which the HPA averages in as "no pressure"."""
    ratios = wait_for("the recorded ratio", lambda: ratio_of(prometheus, plan), timeout=60)
    assert ratios == {POD: 0.0}


def test_under_load_the_ratio_rises_above_the_target_and_the_saturation_alert_pends(
    prometheus: LocalPrometheus, plan: Plan, triton: LocalTriton, repository: Path, tmp_path: Path
) -> None:
    set_behaviour(ft_step(repository), sleep_s=0.2)
    bench = Bench(triton, tmp_path / "bench.log", concurrency=160, duration=90)
    try:
        ratios = wait_for(
            f"ratio above {3 * plan.target_ratio:g} (3 x autoscaleTargetRatio)",
            lambda: {p: r for p, r in ratio_of(prometheus, plan).items() if r > 3 * plan.target_ratio},
            timeout=60,
            context=lambda: f"ratios {ratio_of(prometheus, plan)}\n{duration_counters(triton)}",
        )
        assert set(ratios) == {POD} and ratios[POD] > plan.target_ratio
        states = wait_for("TritonQueueSaturated pending", lambda: alert_states(prometheus, "TritonQueueSaturated"), 30)
        assert states == {"pending"}, "for: 15m has not passed: pending, not firing"
    finally:
        log = bench.stop()
        set_behaviour(ft_step(repository))
    assert "Traceback" not in log, log


def test_every_dashboard_query_parses_and_returns_series(prometheus: LocalPrometheus, plan: Plan) -> None:
    exprs = [t["expr"] for panel in plan.dashboard["panels"] for t in panel["targets"]]
    answered = {expr: prometheus.query(expr) for expr in exprs}
    empty = [e for e, samples in answered.items() if not samples and GPU_METRIC_PREFIX not in e]
    assert empty == []
    assert len(answered) == len(exprs)


def test_a_failing_model_makes_the_failure_alert_pend(
    prometheus: LocalPrometheus, triton: LocalTriton, repository: Path, tmp_path: Path
) -> None:
    set_behaviour(ft_step(repository), fail="injected by the test")
    bench = Bench(triton, tmp_path / "bench.log", concurrency=4, duration=60)
    try:
        states = wait_for("TritonInferenceFailures", lambda: alert_states(prometheus, "TritonInferenceFailures"), 45)
    finally:
        bench.stop()
        set_behaviour(ft_step(repository))
    assert states == {"pending"}, "for: 10m has not passed: pending, not firing"
