"""The weighted phase end to end under a steady client load: the real control plane, real Tritons, a real Prometheus.

The model's objects are on the real API server (``tests/system/controlplane/test_promotion_gate.py``'s stage: the
stable and candidate Deployments and Services, the model's real HTTPRoute and GRPCRoute). Each version's pods stand
for a real ``tritonserver`` on this machine serving ``local``'s t5-small as rendered, its FT step stood in for, run
with a canary stack's flags (the latency summary): the candidate's step is slower (0.15 s a batch). A real Prometheus
scrapes both with the labels the ServiceMonitor gives (``job``: the Service each is scraped through).

``EdgeRouter`` stands for Envoy's weighted split (no Envoy binary here): each new client connection goes to one of the
HTTPRoute's ``backendRefs`` as the route on the API server weighs them now (a smooth weighted round robin), and to the
server of the version that Service selects now. The gate is the real one (:func:`run_gate`), asking the real
Prometheus. What each server answered is counted by the server itself (``nv_inference_request_success``).
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from components.serving.promotion import VERSION_LABEL
from components.serving.promotion_gate import PromotionGateError, prometheus_query, run_gate
from components.serving.server_spec import LATENCY_SUMMARY_FLAG
from components.settings.model import CanarySettings
from tests.system.controlplane.test_promotion_gate import BASE, CANDIDATE, STABLE, Stage, stage  # noqa: F401
from tests.system.realtriton.conftest import ServeTriton, serve_triton, tokenizers, triton_runtime  # noqa: F401
from tests.system.realtriton.prometheus import LocalPrometheus
from tests.system.realtriton.repos import stack_specs
from tests.system.realtriton.test_canary_prometheus import CANDIDATE_JOB
from tests.system.test_promotion_under_load import _pipe
from tritonft.kube import Kube
from tritonft.local_triton import LocalTriton
from tritonft.repo.render import write_repository
from tritonft.spec import Family
from tritonft.standin import set_behaviour, standin_all

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
"""The first test's setup starts the control plane, two Tritons and the client load: 270 s in a fresh run beside
the other lanes, past the suite's 300 s limit at load 15 (a warm run beside helpers' tests lost the module)."""

MODEL = "t5-small"
SLOWER_S = 0.15
"""The candidate's FT step per batch: its p95 well above the stable's + 20%."""
PAUSE_S = 0.02
POLICY = CanarySettings(enabled=True, weight_percent=20, duration_s=20, max_latency_increase_percent=20, min_requests=5)


def _repository(out: Path, tokenizers: dict[Family, Path]) -> Path:  # noqa: F811
    """t5-small as ``local`` renders it, its FT step stood in for; returns the stand-in's folder."""
    (spec,) = [s for s in stack_specs("local") if s.name == MODEL]
    write_repository(spec, out, tokenizer_dir=tokenizers[spec.family], model_root=str(out))
    (step,) = standin_all(out)
    return out / step


@pytest.fixture(scope="module")
def steps(tokenizers: dict[Family, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:  # noqa: F811
    """Version -> its stand-in FT step's folder (its behaviour file is read per batch)."""
    return {v: _repository(tmp_path_factory.mktemp(f"repo-{v}"), tokenizers) for v in (STABLE, CANDIDATE)}


@pytest.fixture(scope="module")
def servers(serve_triton: ServeTriton, steps: dict[str, Path]) -> Iterator[dict[str, LocalTriton]]:  # noqa: F811
    """Version -> its server, run with a canary stack's flags."""
    made = {v: serve_triton(step.parent, extra_args=[LATENCY_SUMMARY_FLAG], shared=False) for v, step in steps.items()}
    try:
        yield made
    finally:
        for server in made.values():
            server.stop()


@pytest.fixture
def slower_candidate(steps: dict[str, Path]) -> Iterator[None]:
    set_behaviour(steps[CANDIDATE], sleep_s=SLOWER_S)
    try:
        yield
    finally:
        set_behaviour(steps[CANDIDATE])


def successes(server: LocalTriton) -> int:
    with urllib.request.urlopen(server.metrics_url, timeout=10) as answer:
        text = answer.read().decode()
    found = re.search(rf'^nv_inference_request_success{{model="{MODEL}",version="1"}} (\d+)', text, flags=re.M)
    return int(found.group(1)) if found else 0


class EdgeRouter:
    """Envoy's weighted split of the model's HTTPRoute, on loopback (see the module's docstring)."""

    def __init__(self, kube: Kube, namespace: str, servers: dict[str, LocalTriton]) -> None:
        self.kube, self.namespace, self.servers = kube, namespace, servers
        self.backends: list[tuple[str, int]] = []
        self.versions: dict[str, str] = {}
        """Service -> the version it selects now."""
        self.routed: Counter[str] = Counter()
        self.reads = 0
        """Reads of the routes so far (the edge applies a route change at its next read, as Envoy does at its next
        xDS update: never at the instant the API server took it)."""
        self._credit: Counter[str] = Counter()
        self._routing = threading.Lock()
        self._stop = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._threads = [threading.Thread(target=self._watch, daemon=True), threading.Thread(target=self._accept)]

    def _watch(self) -> None:
        while not self._stop.is_set():
            route = self.kube.get("gateway.networking.k8s.io/v1", "HTTPRoute", f"{BASE}-http", self.namespace)
            refs = route["spec"]["rules"][0]["backendRefs"]
            self.versions = {
                r["name"]: self.kube.get("v1", "Service", r["name"], self.namespace)["spec"]["selector"][VERSION_LABEL]
                for r in refs
            }
            self.backends = [(str(r["name"]), int(r.get("weight", 1))) for r in refs]
            self.reads += 1
            time.sleep(0.05)

    def applied(self, timeout: float = 10.0) -> None:
        """Wait until the routes as they are now are the ones the edge routes by (a read begun after this call)."""
        target = self.reads + 2
        deadline = time.monotonic() + timeout
        while self.reads < target:
            assert time.monotonic() < deadline, "the edge stopped reading its routes"
            time.sleep(0.01)
        with self._routing:  # a connection routed by the old routes is counted by now
            pass

    def _pick(self) -> str:
        """Smooth weighted round robin (nginx's): each backend gains its weight, the richest is picked and pays
        the total."""
        backends = list(self.backends)
        total = sum(w for _, w in backends)
        for name, weight in backends:
            self._credit[name] += weight
        chosen = max((name for name, w in backends if w > 0), key=lambda n: self._credit[n])
        self._credit[chosen] -= total
        return chosen

    def _accept(self) -> None:
        self._listener.settimeout(0.2)
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            with self._routing:
                version = self.versions[self._pick()]
                self.routed[version] += 1
            host, port = self.servers[version].http_url.rsplit(":", 1)
            upstream = socket.create_connection((host, int(port)))
            for a, b in ((conn, upstream), (upstream, conn)):
                threading.Thread(target=_pipe, args=(a, b), daemon=True).start()

    def __enter__(self) -> EdgeRouter:
        for t in self._threads:
            t.start()
        deadline = time.monotonic() + 10
        while not self.backends and time.monotonic() < deadline:
            time.sleep(0.05)
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        for t in self._threads:
            t.join()
        self._listener.close()


class Client:
    """One generation at a time through the edge, a new connection each; counts what succeeded."""

    def __init__(self, port: int) -> None:
        self.url = f"http://127.0.0.1:{port}/v2/models/{MODEL}/infer"
        self.ok = 0
        self.failed: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        body = json.dumps(
            {
                "inputs": [
                    {
                        "name": "text_input",
                        "shape": [1, 1],
                        "datatype": "BYTES",
                        "data": ["translate English to German: hi"],
                    }
                ]
            }
        ).encode()
        while not self._stop.is_set():
            request = urllib.request.Request(self.url, body, {"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(request, timeout=30) as answer:
                    outputs = json.loads(answer.read())["outputs"]
                    assert "text_output" in {o["name"] for o in outputs}, outputs
                    self.ok += 1
            except Exception as exc:  # every failure is counted, whatever it is
                self.failed.append(repr(exc))
            time.sleep(PAUSE_S)

    def __enter__(self) -> Client:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


@pytest.fixture
def prometheus(stage: Stage, servers: dict[str, LocalTriton], tmp_path: Path) -> Iterator[LocalPrometheus]:  # noqa: F811
    jobs = {STABLE: BASE, CANDIDATE: CANDIDATE_JOB}
    targets = [
        (server.metrics_url.split("/")[2], "/metrics", {"namespace": stage.namespace, "job": jobs[version]})
        for version, server in servers.items()
    ]
    running = LocalPrometheus(tmp_path, rule_files=[], targets=targets)
    running.start()
    try:
        yield running
    finally:
        running.stop()


def test_a_candidate_as_fast_as_the_stable_passes_the_phase_with_no_failed_request(
    stage: Stage,  # noqa: F811
    servers: dict[str, LocalTriton],
    prometheus: LocalPrometheus,
) -> None:
    # First in the file: Triton's summary is a sliding window, the slower candidate's answers would still be in it.
    # Two equal servers on a shared two-core machine: their p95s differ by chance; the bound here is generous so the
    # test asks only that an equal candidate passes, not how close two equal servers' p95s come.
    policy = replace(POLICY, max_latency_increase_percent=300)
    with EdgeRouter(stage.kube, stage.namespace, servers) as edge, Client(edge.port) as client:
        time.sleep(1.0)
        outcome = run_gate(stage.kube, stage.config(canary=policy), query=prometheus_query(prometheus.url))
        time.sleep(1.0)

    assert outcome["phase"] is not None and "FAIL" not in outcome["phase"]["verdict"], outcome
    assert outcome["phase"]["candidate"]["requests"] >= policy.min_requests
    assert client.failed == [], client.failed[:3]
    assert edge.routed[CANDIDATE] > 0
    assert stage.weights() == {kind: [(BASE, 1)] for kind in ("HTTPRoute", "GRPCRoute")}, (
        "as declared: the switch follows"
    )
    print(f"routed {dict(edge.routed)}; client ok {client.ok}; {outcome['phase']['verdict']}")


def test_a_slower_candidate_takes_its_weight_then_ends_at_weight_zero_and_no_client_request_fails(
    stage: Stage,  # noqa: F811
    servers: dict[str, LocalTriton],
    prometheus: LocalPrometheus,
    slower_candidate: None,
) -> None:
    before = {version: successes(server) for version, server in servers.items()}
    with EdgeRouter(stage.kube, stage.namespace, servers) as edge, Client(edge.port) as client:
        time.sleep(2.0)
        assert edge.routed[CANDIDATE] == 0, "before the phase the candidate takes no request"
        with pytest.raises(PromotionGateError) as failed:
            run_gate(stage.kube, stage.config(canary=POLICY), query=prometheus_query(prometheus.url))
        edge.applied()  # the restored routes reached the edge
        after_phase = edge.routed[CANDIDATE]
        time.sleep(2.0)

    message = str(failed.value)
    assert "FAIL: latency p95: candidate" in message, message
    assert "error ratio" in message and "FAIL: error ratio" not in message
    assert client.failed == [], client.failed[:3]
    assert after_phase > 0, "the candidate took its share during the phase"
    assert edge.routed[CANDIDATE] == after_phase, "after the phase the candidate takes no request"
    assert stage.weights() == {kind: [(BASE, 1)] for kind in ("HTTPRoute", "GRPCRoute")}
    answered = {version: successes(server) - before[version] for version, server in servers.items()}
    assert answered == {STABLE: edge.routed[STABLE], CANDIDATE: edge.routed[CANDIDATE]}, "each server's own count"
    assert sum(answered.values()) == client.ok
    print(f"routed {dict(edge.routed)}; client ok {client.ok}; {message}")  # the figures, for the log
