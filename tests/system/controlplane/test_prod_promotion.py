"""prod's t5-3b (a whole 4-GPU node per replica) promoted at ``replicasMax`` within ``gpuNodesMax`` on the real
control plane: the candidate is judged at one pod (the one surge pod per model the capacity rules count), the gate
pins the stable's five ready pods in the user-facing Services, the Services switch, and the handover grows the
candidate to five while the stable shrinks, one node at a time. A second fleet of five beside the stable (what the
gate did before) needs 13 nodes: prod may have 10.

The plans are ``tritonft synth``'s for prod as it is and with t5-3b at another revision; ``pulumi_engine`` applies
them with the CLI's rules. The rollout watches, the gate and the handover are their real code against this API
server (the judge passes: its verdicts are ``test_judged_promotion.py``'s and the real Triton's). The GPU nodes are
prod's ``gpuNodesMax`` (what cluster-autoscaler may reach), all there from the start; every GPU model runs at
``replicasMax`` (what the autoscalers do at peak). What users reach is read every 0.2 s from the Services'
EndpointSlices (the controller's and the gate's) while ``up`` runs.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from components.serving.promotion import VERSION_LABEL
from components.serving.promotion_gate import GateConfig, run_gate, run_handover
from components.settings.stack_file import settings_from_stack_file
from tests.system.controlplane.fixtures import Cluster
from tests.system.controlplane.prod import add_prod_nodes, copy_project
from tests.system.controlplane.pulumi_engine import Engine, Resource, named, program, rollout_watch
from tests.system.controlplane.server import ControlPlane
from tritonft.kube import Kube, wait_for
from tritonft.synth.run import synthesize

pytestmark = pytest.mark.slow

STACK = "prod"
INSTANCE = "prod-t5-3b"
GPU_MODELS = ("prod-t5-3b", "prod-gpt-j-6b", "prod-llama-3-1-8b")
WATCH = "pulumi-python:dynamic/tritonft:RolloutWatch"
PROBE = "pulumi-python:dynamic/tritonft:IntegrationProbe"
GATE = "pulumi-python:dynamic/tritonft:PromotionGate"
HANDOVER = "pulumi-python:dynamic/tritonft:PromotionHandover"
STABLE_REVISION = "bed96aab9ee46012a5046386105ee5fd0ac572f0"
NEW_REVISION = "0123456789abcdef" * 2 + "01234567"


@dataclass(frozen=True)
class Plans:
    stable: list[Resource]
    changed: list[Resource]


@pytest.fixture(scope="module")
def plans(tmp_path_factory: pytest.TempPathFactory) -> Plans:
    tmp = tmp_path_factory.mktemp("prod-promotion")
    project = copy_project(tmp)
    synthesize(STACK, out=tmp / "stable", project_dir=project, extras=())
    stack = project / f"stacks/Pulumi.{STACK}.yaml"
    text = stack.read_text()
    assert text.count(f"revision: {STABLE_REVISION}") == 1
    stack.write_text(text.replace(f"revision: {STABLE_REVISION}", f"revision: {NEW_REVISION}"))
    synthesize(STACK, out=tmp / "changed", project_dir=project, extras=())
    return Plans(program(tmp / "stable"), program(tmp / "changed"))


def version_of(resources: list[Resource]) -> str:
    (deployment,) = named(resources, "Deployment", INSTANCE)
    return str(deployment.inputs["metadata"]["labels"][VERSION_LABEL])


def gate_step(kube: Kube, namespace: str) -> Any:
    def run(res: Resource, _old: Resource | None) -> None:
        run_gate(kube, GateConfig.of({**res.inputs, "namespace": namespace}))

    return run


def handover_step(kube: Kube, namespace: str) -> Any:
    def run(res: Resource, _old: Resource | None) -> None:
        config = GateConfig.of({**res.inputs, "namespace": namespace, "routes": [], "canary": None})
        run_handover(kube, config, step_deadline_s=120.0)

    return run


@dataclass
class Serving:
    """t5-3b's pods that the user-facing Services route to (every ready endpoint of their EndpointSlices, read
    first), with the version the Services selected (read after), and every t5-3b pod that exists."""

    kube: Kube
    namespace: str
    samples: list[tuple[dict[str, frozenset[str]], str]] = field(default_factory=list)
    pods_seen: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)

    def endpoints(self, service: str) -> frozenset[str]:
        slices = self.kube.items(
            "discovery.k8s.io/v1", "EndpointSlice", self.namespace, f"kubernetes.io/service-name={service}"
        )
        return frozenset(
            str(e["targetRef"]["name"])
            for s in slices
            for e in s.get("endpoints") or []
            if (e.get("conditions") or {}).get("ready") and e.get("targetRef")
        )

    def run(self) -> None:
        while not self._stop.is_set():
            seen = {s: self.endpoints(s) for s in (INSTANCE, f"{INSTANCE}-pods")}
            selected = self.kube.get("v1", "Service", INSTANCE, self.namespace)["spec"]["selector"][VERSION_LABEL]
            self.samples.append((seen, str(selected)))
            time.sleep(0.2)


@pytest.fixture
def engine(control_plane: ControlPlane, cluster: Cluster) -> Engine:
    settings = settings_from_stack_file(Path(__file__).resolve().parents[3], STACK)
    assert settings.cluster.aws is not None
    add_prod_nodes(cluster, settings, gpu_nodes=settings.cluster.aws.gpu_nodes_max)
    kube, ns = cluster.kube, cluster.namespace
    kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    watch = rollout_watch(ns, str(control_plane.workdir / "kubeconfig"))
    hooks = {
        WATCH: watch,
        PROBE: lambda _res, _old: None,  # the judge passes
        GATE: gate_step(kube, ns),
        HANDOVER: handover_step(kube, ns),
    }
    return Engine(kube, ns, settings.namespace, hooks)


def ready(kube: Kube, namespace: str, deployment: str) -> int:
    return int(kube.get("apps/v1", "Deployment", deployment, namespace).get("status", {}).get("readyReplicas") or 0)


def deployments(resources: list[Resource]) -> dict[str, str]:
    """Instance -> Deployment name of the GPU models."""
    return {i: str(named(resources, "Deployment", i)[0].inputs["metadata"]["name"]) for i in GPU_MODELS}


@pytest.fixture
def at_peak(plans: Plans, engine: Engine, cluster: Cluster) -> dict[str, str]:
    """prod deployed, every GPU model scaled to replicasMax (as its autoscaler would at peak) and ready."""
    kube, ns = cluster.kube, cluster.namespace
    engine.up(plans.stable)
    peak = settings_from_stack_file(Path(__file__).resolve().parents[3], STACK).serving.replicas_max
    names = deployments(plans.stable)
    for name in names.values():
        kube.request(
            "PATCH",
            kube.path("apps/v1", "Deployment", ns, name),
            body={"spec": {"replicas": peak}},
            content_type="application/merge-patch+json",
        )
    wait_for(
        f"every GPU model at {peak} ready pods",
        lambda: all(ready(kube, ns, n) >= peak for n in names.values()),
        180,
    )
    listed = Serving(kube, ns)
    wait_for(
        f"{INSTANCE}'s {peak} pods endpoints of its Services",
        lambda: all(len(listed.endpoints(s)) >= peak for s in (INSTANCE, f"{INSTANCE}-pods")),
        60,
    )
    return names


@pytest.fixture
def serving(cluster: Cluster) -> Iterator[Serving]:
    watching = Serving(cluster.kube, cluster.namespace)
    thread = threading.Thread(target=watching.run, daemon=True)
    thread.start()
    yield watching
    watching._stop.set()
    thread.join()


def test_prods_t5_3b_is_promoted_at_replicas_max_within_gpu_nodes_max_never_serving_fewer_pods(
    plans: Plans, engine: Engine, cluster: Cluster, at_peak: dict[str, str], serving: Serving
) -> None:
    kube, ns = cluster.kube, cluster.namespace
    stable, candidate = version_of(plans.stable), version_of(plans.changed)
    stable_pods = {p["metadata"]["name"] for p in kube.items("v1", "Pod", ns, f"{VERSION_LABEL}={stable}")}
    assert len(stable_pods) == 5

    engine.up(plans.changed)

    candidate_deployment = deployments(plans.changed)[INSTANCE]
    assert ready(kube, ns, candidate_deployment) >= 5, "the candidate serves with the stable's count"
    assert kube.items("apps/v1", "Deployment", ns, f"{VERSION_LABEL}={stable}") == [], "the stable removed last"
    log = engine.log
    assert log.index(f"update {INSTANCE}-service") < log.index(f"create {INSTANCE}-handover-{candidate}")
    assert log.index(f"create {INSTANCE}-handover-{candidate}") < log.index(f"delete {INSTANCE}-deployment-{stable}")
    samples = serving.samples
    assert len(samples) > 10, "the Services were read throughout"
    for seen, selected in samples:
        for service, pods in seen.items():
            assert len(pods) >= 5, f"{service} routed to {len(pods)} pods: {sorted(pods)}"
            if any(p.startswith(f"{candidate_deployment}-") for p in pods):
                assert selected == candidate, "a candidate pod is an endpoint only after the switch"
    switched = [seen for seen, selected in samples if selected == candidate]
    assert switched, "the switch was seen"
    mixed = [s for s in switched if s[INSTANCE] & stable_pods and any(p not in stable_pods for p in s[INSTANCE])]
    assert mixed, "after the switch the stable's pinned pods served beside the candidate's"
