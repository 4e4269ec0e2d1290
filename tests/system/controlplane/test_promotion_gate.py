"""The promotion gate's runtime on the real control plane: the stable's ready pods pinned in the user-facing Services
(EndpointSlices beside the controller's), the handover after the switch growing the candidate to the stable's ready
count one pod at a time (kwok's pods, the real Deployment, ReplicaSet and EndpointSlice controllers and scheduler), the
weighted phase's weights
written to the model's real HTTPRoute and GRPCRoute (the Gateway API's own CRDs) and put back whatever the verdict,
the verdict from a real Prometheus.

The objects are those the program makes for a judged promotion, reduced to what the gate reads: the stable and the
candidate Deployment (labelled by version), the user-facing Services selecting the stable version, the candidate
Service, the model's two routes. The Prometheus series are written into a real Prometheus' storage (as in
``tests/system/realtriton/test_canary_prometheus.py``); they carry a case's namespace label, which the query given to
the gate asks for instead of the test's namespace.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from components.common.edge import EdgeArgs, GatewayRef, WeightedBackend, model_grpc_route_spec, model_http_route_spec
from components.serving.promotion import VERSION_LABEL
from components.serving.promotion_gate import (
    GateConfig,
    PromotionGateError,
    prometheus_query,
    run_gate,
    run_handover,
)
from components.settings.model import CanarySettings
from tests.system.controlplane.fixtures import Cluster
from tests.system.controlplane.plan import NodeShape, install_crds
from tests.system.realtriton.prometheus import LocalPrometheus
from tests.system.realtriton.test_canary_prometheus import CANDIDATE_JOB, CASES, DURATION_S, MODEL, openmetrics
from tritonft.kube import Kube, wait_for

pytestmark = pytest.mark.slow

STABLE, CANDIDATE = "aaaa1111", "abcd1234"
"""The candidate's Service is ``t5-small-abcd1234``: the name the written series carry (``CANDIDATE_JOB``)."""
BASE = MODEL
NODE_LABEL = {"tritonft-test": "promotion-gate"}
EDGE = EdgeArgs(gateway=GatewayRef("edge"), host="t5-small.example.com", listener="https-m-t5-small")
POLICY = CanarySettings(enabled=True, weight_percent=20, duration_s=DURATION_S, min_requests=50)


def _deployment(name: str, version: str, replicas: int, node_selector: dict[str, str]) -> dict[str, Any]:
    labels = {"app.kubernetes.io/instance": BASE, VERSION_LABEL: version}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "nodeSelector": node_selector,
                    "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}],
                    "containers": [
                        {"name": "triton", "image": "triton:test", "resources": {"requests": {"cpu": "100m"}}}
                    ],
                },
            },
        },
    }


def _service(name: str, version: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name},
        "spec": {
            "selector": {"app.kubernetes.io/instance": BASE, VERSION_LABEL: version},
            "ports": [{"name": "http", "port": 8000}, {"name": "grpc", "port": 8001}],
        },
    }


def _route(kind: str, name: str) -> dict[str, Any]:
    backends = [WeightedBackend(BASE)]
    spec = (
        model_http_route_spec(EDGE, MODEL, backends) if kind == "HTTPRoute" else model_grpc_route_spec(EDGE, backends)
    )
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": kind, "metadata": {"name": name}, "spec": spec}


def _in(namespace: str, obj: dict[str, Any]) -> dict[str, Any]:
    return {**obj, "metadata": {**obj["metadata"], "namespace": namespace}}


@dataclass
class Stage:
    kube: Kube
    namespace: str

    def config(self, **changes: Any) -> GateConfig:
        base = GateConfig(
            namespace=self.namespace,
            model=MODEL,
            version=CANDIDATE,
            stable_service=BASE,
            candidate_service=CANDIDATE_JOB,
            candidate_deployment=CANDIDATE_JOB,
            routes=(("HTTPRoute", f"{BASE}-http"), ("GRPCRoute", f"{BASE}-grpc")),
            min_replicas=1,
            max_replicas=5,
            replicas_deadline_s=60.0,
            canary=None,
        )
        return GateConfig(**{**base.__dict__, **changes})

    def weights(self) -> dict[str, list[tuple[str, int]]]:
        return {
            kind: [
                (b["name"], b["weight"])
                for b in self.kube.get("gateway.networking.k8s.io/v1", kind, f"{BASE}-{suffix}", self.namespace)[
                    "spec"
                ]["rules"][0]["backendRefs"]
            ]
            for kind, suffix in (("HTTPRoute", "http"), ("GRPCRoute", "grpc"))
        }

    def ready(self, deployment: str) -> int:
        return int(
            self.kube.get("apps/v1", "Deployment", deployment, self.namespace).get("status", {}).get("readyReplicas")
            or 0
        )


@pytest.fixture
def stage(cluster: Cluster) -> Stage:
    kube, ns = cluster.kube, cluster.namespace
    install_crds(kube, (), ("gateway.networking.k8s.io",))
    cluster.add_nodes(
        [NodeShape(f"{ns}-cpu-{i}", NODE_LABEL, [], {"cpu": "8", "memory": "32Gi", "pods": "110"}) for i in range(2)]
    )
    kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    node_selector = {**NODE_LABEL}
    for obj in (
        _deployment(f"{BASE}-{STABLE}", STABLE, 3, node_selector),
        _deployment(CANDIDATE_JOB, CANDIDATE, 1, node_selector),
        _service(BASE, STABLE),
        _service(f"{BASE}-pods", STABLE),
        _service(CANDIDATE_JOB, CANDIDATE),
        _route("HTTPRoute", f"{BASE}-http"),
        _route("GRPCRoute", f"{BASE}-grpc"),
    ):
        kube.apply(_in(ns, obj))
    made = Stage(kube, ns)
    wait_for("the stable version's 3 pods ready", lambda: made.ready(f"{BASE}-{STABLE}") >= 3, 60)
    wait_for("the candidate's pod ready", lambda: made.ready(CANDIDATE_JOB) >= 1, 60)
    return made


@dataclass(frozen=True)
class Figures:
    prometheus: LocalPrometheus
    phase_end: int

    def query(self, namespace: str, case: str) -> Callable[[str], float | None]:
        ask = prometheus_query(self.prometheus.url, at=self.phase_end)
        return lambda expr: ask(expr.replace(f'namespace="{namespace}"', f'namespace="{case}"'))


@pytest.fixture(scope="module")
def figures(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Figures]:
    promtool = shutil.which("promtool")
    assert promtool, "promtool is missing: run `bash scripts/setup/prometheus.sh` (Debian package prometheus)"
    workdir = tmp_path_factory.mktemp("gate-prometheus")
    end = int(time.time()) - 120
    (workdir / "phase.om").write_text(openmetrics(CASES, end - 2 * DURATION_S, end))
    subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", str(workdir / "phase.om"), str(workdir / "data")],
        check=True,
        capture_output=True,
    )
    prometheus = LocalPrometheus(workdir, rule_files=[], targets=[])
    prometheus.start()
    try:
        yield Figures(prometheus, end)
    finally:
        prometheus.stop()


def _switch(stage: Stage) -> None:
    """What the program does after the gate: the user-facing Services select the candidate."""
    for name in (BASE, f"{BASE}-pods"):
        stage.kube.apply(_in(stage.namespace, _service(name, CANDIDATE)))


def _serving(stage: Stage) -> set[str]:
    """The pods the user-facing Service routes to: every ready endpoint of its EndpointSlices, the controller's and
    the gate's."""
    slices = stage.kube.items(
        "discovery.k8s.io/v1", "EndpointSlice", stage.namespace, f"kubernetes.io/service-name={BASE}"
    )
    return {
        e["targetRef"]["name"]
        for s in slices
        for e in s.get("endpoints") or []
        if (e.get("conditions") or {}).get("ready") and e.get("targetRef")
    }


def _pods(stage: Stage, version: str) -> set[str]:
    pods = stage.kube.items("v1", "Pod", stage.namespace, f"{VERSION_LABEL}={version}")
    return {p["metadata"]["name"] for p in pods if not p["metadata"].get("deletionTimestamp")}


def test_the_gate_pins_the_stables_ready_pods_so_they_serve_beside_the_candidate_after_the_switch(
    stage: Stage,
) -> None:
    stable_pods = _pods(stage, STABLE)
    outcome = run_gate(stage.kube, stage.config())
    assert outcome["replicas"] == {"stable_ready": 3, "target": 3, "pinned": 3}
    assert stage.ready(CANDIDATE_JOB) == 1, "no second fleet before the switch"
    _switch(stage)
    wait_for("the Service's own slice to list the candidate", lambda: _pods(stage, CANDIDATE) <= _serving(stage), 30)
    assert stable_pods | _pods(stage, CANDIDATE) == _serving(stage)


def test_the_handover_grows_the_candidate_to_the_stables_count_one_pod_at_a_time(stage: Stage) -> None:
    run_gate(stage.kube, stage.config())
    _switch(stage)
    outcome = run_handover(stage.kube, stage.config(), step_deadline_s=60.0)
    assert outcome["handover"]["target"] == 3 and outcome["handover"]["steps"] == 2
    assert stage.ready(CANDIDATE_JOB) >= 3
    deployment = stage.kube.get("apps/v1", "Deployment", f"{BASE}-{STABLE}", stage.namespace)
    assert deployment["spec"]["replicas"] == 1, "the stable keeps one pod until it is deleted"
    assert _pods(stage, CANDIDATE) <= _serving(stage)


def test_the_handover_is_bounded_by_replicas_max(stage: Stage) -> None:
    outcome = run_gate(stage.kube, stage.config(max_replicas=2))
    assert outcome["replicas"]["target"] == 2
    _switch(stage)
    run_handover(stage.kube, stage.config(max_replicas=2), step_deadline_s=60.0)
    deployment = stage.kube.get("apps/v1", "Deployment", CANDIDATE_JOB, stage.namespace)
    assert deployment["spec"]["replicas"] == 2


def test_a_handover_step_that_cannot_complete_fails_naming_both_counts_and_the_stable_keeps_serving(
    stage: Stage,
) -> None:
    kube, ns = stage.kube, stage.namespace
    nowhere = {"tritonft-test": "no-such-node"}
    kube.apply(_in(ns, _deployment(CANDIDATE_JOB, CANDIDATE, 1, nowhere)))  # its next pods cannot be placed
    run_gate(kube, stage.config())
    _switch(stage)
    with pytest.raises(
        PromotionGateError, match=rf"{CANDIDATE_JOB}: \d of 2 replicas ready \(and endpoints\) after 3 s"
    ):
        run_handover(kube, stage.config(), step_deadline_s=3.0)
    assert len(_serving(stage) & _pods(stage, STABLE)) == 2, "the stable's pinned pods but the one that left serve"


def test_a_first_deploy_or_a_rerun_after_the_switch_has_nothing_to_gate(stage: Stage) -> None:
    kube, ns = stage.kube, stage.namespace
    kube.apply(_in(ns, _service(BASE, CANDIDATE)))  # the Services already switched (a re-run)
    assert run_gate(kube, stage.config()) == {"stable_version": None, "replicas": None, "phase": None}
    assert stage.ready(CANDIDATE_JOB) == 1, "nothing was scaled"


def test_a_candidate_worse_on_errors_took_its_weight_during_the_phase_and_ends_at_weight_zero(
    stage: Stage, figures: Figures
) -> None:
    during: list[dict[str, list[tuple[str, int]]]] = []
    config = stage.config(canary=POLICY)
    with pytest.raises(PromotionGateError) as failed:
        run_gate(
            stage.kube,
            config,
            query=figures.query(stage.namespace, "errors"),
            sleep=lambda _s: during.append(stage.weights()),
        )
    message = str(failed.value)
    assert message.startswith(f"canary phase of {MODEL} version {CANDIDATE} failed after {DURATION_S} s at 20%")
    assert "FAIL: error ratio: candidate 10.00%" in message and "threshold 1.50%" in message
    assert during == [{kind: [(BASE, 80), (CANDIDATE_JOB, 20)] for kind in ("HTTPRoute", "GRPCRoute")}]
    assert stage.weights() == {kind: [(BASE, 1)] for kind in ("HTTPRoute", "GRPCRoute")}, "the stable serves 100%"


def test_a_candidate_worse_on_p95_is_refused_and_the_routes_go_back_to_the_stable(
    stage: Stage, figures: Figures
) -> None:
    with pytest.raises(PromotionGateError, match=r"FAIL: latency p95: candidate 180\.0 ms, stable 100\.0 ms"):
        run_gate(
            stage.kube,
            stage.config(canary=POLICY),
            query=figures.query(stage.namespace, "latency"),
            sleep=lambda _s: None,
        )
    assert stage.weights() == {kind: [(BASE, 1)] for kind in ("HTTPRoute", "GRPCRoute")}


def test_a_candidate_equal_to_the_stable_passes_the_phase_and_the_routes_are_as_declared(
    stage: Stage, figures: Figures
) -> None:
    outcome = run_gate(
        stage.kube, stage.config(canary=POLICY), query=figures.query(stage.namespace, "equal"), sleep=lambda _s: None
    )
    assert outcome["phase"]["verdict"].startswith("pass: ")
    assert "FAIL" not in outcome["phase"]["verdict"]
    assert stage.weights() == {kind: [(BASE, 1)] for kind in ("HTTPRoute", "GRPCRoute")}


def test_an_error_while_measuring_still_puts_the_routes_back(stage: Stage) -> None:
    def broken(_expr: str) -> float | None:
        raise OSError("Prometheus unreachable")

    with pytest.raises(OSError, match="unreachable"):
        run_gate(stage.kube, stage.config(canary=POLICY), query=broken, sleep=lambda _s: None)
    assert stage.weights() == {kind: [(BASE, 1)] for kind in ("HTTPRoute", "GRPCRoute")}


def test_a_route_new_in_this_update_skips_the_phase_and_is_left_as_declared(stage: Stage, figures: Figures) -> None:
    stage.kube.delete("gateway.networking.k8s.io/v1", "GRPCRoute", f"{BASE}-grpc", stage.namespace)
    outcome = run_gate(
        stage.kube, stage.config(canary=POLICY), query=figures.query(stage.namespace, "errors"), sleep=lambda _s: None
    )
    assert outcome["phase"] == {
        "skipped": f"no weighted phase: GRPCRoute/{BASE}-grpc not on the cluster yet (new in this update)"
    }
    route = stage.kube.get("gateway.networking.k8s.io/v1", "HTTPRoute", f"{BASE}-http", stage.namespace)
    assert [(b["name"], b["weight"]) for b in route["spec"]["rules"][0]["backendRefs"]] == [(BASE, 1)]
