"""Judged promotion of ``local``'s t5-small on the real control plane: a new revision comes up beside the serving
one, the user-facing Services never send it a pod address before its judge passed, a failed judgement fails ``up``
with the stable version still selected, a re-run converges, and ``destroy`` from every state leaves nothing.

The plans are ``tritonft synth``'s (the program under the mock engine); ``pulumi_engine`` applies them with the
CLI's rules (dependency order, in-place updates, no deletes after a failure, deletes last, destroy in reverse
order). The rollout watch is the real provider against this API server; the judge's verdict is the test's (the
real judge's verdict on a real Triton serving wrong answers: ``tests/system/realtriton/test_judge.py``). The pods
are kwok's, their addresses and readiness the API server's: "receives a request through the Service" is judged
here by what a Service can route to, its EndpointSlices, read continuously while ``up`` runs.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from components.probe import ProbeFailedError
from components.rollout_watch import RolloutWatchProvider
from components.serving.promotion import VERSION_LABEL
from components.settings.stack_file import settings_from_stack_file
from tests.system.controlplane.conftest import Cluster
from tests.system.controlplane.plan import cpu_node_shape, gpu_node_shape
from tests.system.controlplane.prod import copy_project
from tests.system.controlplane.pulumi_engine import Engine, InterruptedUpError, Resource, named, program
from tests.system.controlplane.server import ControlPlane
from tritonft.kube import Kube
from tritonft.synth.run import synthesize

STACK = "local"
PLAN_NAMESPACE = "triton-local"
INSTANCE = "local-t5-small"
WATCH = "pulumi-python:dynamic/tritonft:RolloutWatch"
PROBE = "pulumi-python:dynamic/tritonft:IntegrationProbe"
NEW_REVISION = "0123456789abcdef" * 2 + "01234567"


@dataclass(frozen=True)
class Plans:
    stable: list[Resource]
    """``local`` as it is."""
    changed: list[Resource]
    """``local`` with t5-small at another revision."""

    @staticmethod
    def version(resources: list[Resource]) -> str:
        (deployment,) = named(resources, "Deployment", INSTANCE)
        return str(deployment.inputs["metadata"]["labels"][VERSION_LABEL])


@pytest.fixture(scope="module")
def plans(tmp_path_factory: pytest.TempPathFactory) -> Plans:
    tmp = tmp_path_factory.mktemp("judged")
    project = copy_project(tmp)
    synthesize(STACK, out=tmp / "stable", project_dir=project, extras=())
    stack = project / f"stacks/Pulumi.{STACK}.yaml"
    text = stack.read_text()
    old = "revision: df1b051c49625cf57a3d0d8d3863ed4d13564fe4"
    assert text.count(old) == 1
    stack.write_text(text.replace(old, f"revision: {NEW_REVISION}"))
    synthesize(STACK, out=tmp / "changed", project_dir=project, extras=())
    return Plans(program(tmp / "stable"), program(tmp / "changed"))


class Judge:
    """The judges' verdicts: a version listed in ``wrong`` answers wrong."""

    def __init__(self) -> None:
        self.wrong: set[str] = set()
        self.judged: list[str] = []

    def __call__(self, res: Resource, _old: Resource | None) -> None:
        if "-judge-" not in res.name:
            return  # the model's probe after the switch, through the user-facing endpoint
        version = res.name.rsplit("-", 1)[1]
        self.judged.append(version)
        if version in self.wrong:
            raise ProbeFailedError(f"integration probe of {res.inputs['endpoint']} failed:\n  wrong answer")


@dataclass
class Stack:
    engine: Engine
    judge: Judge
    cluster: Cluster


@pytest.fixture
def stack(control_plane: ControlPlane, cluster: Cluster) -> Stack:
    settings = settings_from_stack_file(Path(__file__).resolve().parents[3], STACK)
    ns = cluster.namespace
    # Room for a candidate beside the serving version: local's two GPU models on a one-GPU node each and one for the
    # candidate, and CPU nodes for the encoder.
    cluster.add_nodes(
        [gpu_node_shape(settings, f"{ns}-gpu-{i}") for i in range(3)]
        + [cpu_node_shape(settings, f"{ns}-cpu-{i}") for i in range(2)]
    )
    cluster.kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    kubeconfig = str(control_plane.workdir / "kubeconfig")

    def watch(res: Resource, old: Resource | None) -> None:
        props = {**res.inputs, "namespace": ns, "kubeconfig": kubeconfig, "context": None, "grace_s": 5.0}
        provider = RolloutWatchProvider()
        if old is None:
            provider.create(dict(props))
        else:
            provider.update(res.urn, dict(old.inputs), dict(props))

    judge = Judge()
    engine = Engine(cluster.kube, ns, PLAN_NAMESPACE, {WATCH: watch, PROBE: judge})
    return Stack(engine, judge, cluster)


class Endpoints:
    """The pods the user-facing Services of t5-small can route to, read from their EndpointSlices while it runs."""

    def __init__(self, kube: Kube, namespace: str) -> None:
        self.kube, self.namespace = kube, namespace
        self.seen: set[str] = set()
        self.reads = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for service in (INSTANCE, f"{INSTANCE}-pods"):
                slices = self.kube.items(
                    "discovery.k8s.io/v1", "EndpointSlice", self.namespace, f"kubernetes.io/service-name={service}"
                )
                for s in slices:
                    for e in s.get("endpoints") or []:
                        if (e.get("conditions") or {}).get("ready") and e.get("targetRef"):
                            self.seen.add(str(e["targetRef"]["name"]))
            self.reads += 1
            time.sleep(0.1)

    def __enter__(self) -> Endpoints:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        time.sleep(1.0)  # the endpoint controller's last word on the final state
        self._stop.set()
        self._thread.join()


@pytest.fixture
def endpoints(stack: Stack) -> Iterator[Endpoints]:
    with Endpoints(stack.cluster.kube, stack.cluster.namespace) as watching:
        yield watching
    assert watching.reads > 10, "the EndpointSlices were read throughout"


def deployment_name(resources: list[Resource]) -> str:
    (deployment,) = named(resources, "Deployment", INSTANCE)
    return str(deployment.inputs["metadata"]["name"])


def pods_of(kube: Kube, namespace: str, version: str) -> dict[str, str]:
    """Pod name -> uid of t5-small's pods of ``version``."""
    pods = kube.items("v1", "Pod", namespace, f"app.kubernetes.io/instance={INSTANCE},{VERSION_LABEL}={version}")
    return {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods if not p["metadata"].get("deletionTimestamp")}


def selector_version(kube: Kube, namespace: str) -> set[str]:
    return {
        kube.get("v1", "Service", name, namespace)["spec"]["selector"][VERSION_LABEL]
        for name in (INSTANCE, f"{INSTANCE}-pods")
    }


def live_objects(kube: Kube, namespace: str, plans: Plans) -> set[str]:
    """``Kind/name`` of every object of the kinds the plans hold, left in the namespace."""
    kinds = {
        (str(r.inputs["apiVersion"]), str(r.inputs["kind"]))
        for r in (*plans.stable, *plans.changed)
        if r.applied and r.inputs["metadata"].get("namespace") == PLAN_NAMESPACE
    }
    return {
        f"{kind}/{o['metadata']['name']}"
        for api, kind in sorted(kinds)
        for o in kube.items(api, kind, namespace)
        if kind != "ConfigMap" or o["metadata"]["name"] != "kube-root-ca.crt"
    }


def expected_objects(resources: list[Resource]) -> set[str]:
    return {
        f"{r.inputs['kind']}/{r.inputs['metadata']['name']}"
        for r in resources
        if r.applied and r.inputs["metadata"].get("namespace") == PLAN_NAMESPACE
    }


def test_a_version_judged_wrong_never_gets_an_address_in_the_services_and_up_fails_with_the_stable_selected(
    plans: Plans, stack: Stack, endpoints: Endpoints
) -> None:
    kube, ns = stack.cluster.kube, stack.cluster.namespace
    stable, candidate = Plans.version(plans.stable), Plans.version(plans.changed)
    stack.engine.up(plans.stable)
    serving = pods_of(kube, ns, stable)
    assert serving, "the stable version serves"

    stack.judge.wrong.add(candidate)
    with pytest.raises(ProbeFailedError, match="wrong answer"):
        stack.engine.up(plans.changed)

    assert stack.judge.judged[-1] == candidate
    assert selector_version(kube, ns) == {stable}, "the Services still select the stable version"
    assert pods_of(kube, ns, stable) == serving, "the stable pods were not touched"
    assert pods_of(kube, ns, candidate), "the candidate is up beside it, taking no traffic"
    deleted = [line for line in stack.engine.log if line.startswith("delete ")]
    assert not any(stable in line or candidate in line for line in deleted), f"no version was deleted: {deleted}"
    candidate_pods = {p for p in endpoints.seen if p.startswith(f"{deployment_name(plans.changed)}-")}
    assert candidate_pods == set(), "no candidate pod was ever an endpoint of the user-facing Services"
    assert set(serving) <= endpoints.seen


def test_a_rerun_after_reverting_the_change_converges_on_the_stable_version(plans: Plans, stack: Stack) -> None:
    kube, ns = stack.cluster.kube, stack.cluster.namespace
    stable, candidate = Plans.version(plans.stable), Plans.version(plans.changed)
    stack.engine.up(plans.stable)
    serving = pods_of(kube, ns, stable)
    stack.judge.wrong.add(candidate)
    with pytest.raises(ProbeFailedError):
        stack.engine.up(plans.changed)

    stack.engine.up(plans.stable)  # the fix: the revision set back

    assert selector_version(kube, ns) == {stable}
    assert pods_of(kube, ns, stable) == serving
    assert pods_of(kube, ns, candidate) == {}
    assert live_objects(kube, ns, plans) == expected_objects(plans.stable)


def test_a_version_judged_right_is_promoted_and_the_old_one_removed_last(
    plans: Plans, stack: Stack, endpoints: Endpoints
) -> None:
    kube, ns = stack.cluster.kube, stack.cluster.namespace
    stable, candidate = Plans.version(plans.stable), Plans.version(plans.changed)
    stack.engine.up(plans.stable)
    serving = pods_of(kube, ns, stable)

    stack.engine.up(plans.changed)

    assert selector_version(kube, ns) == {candidate}
    assert pods_of(kube, ns, stable) == {}
    assert live_objects(kube, ns, plans) == expected_objects(plans.changed)
    log = stack.engine.log
    judged = log.index(f"create {INSTANCE}-judge-{candidate}")
    assert judged < log.index(f"update {INSTANCE}-service") < log.index(f"delete {INSTANCE}-deployment-{stable}")
    promoted = pods_of(kube, ns, candidate)
    assert set(serving) | set(promoted) <= endpoints.seen


def test_an_up_interrupted_before_the_judgement_then_rerun_converges(plans: Plans, stack: Stack) -> None:
    kube, ns = stack.cluster.kube, stack.cluster.namespace
    stable, candidate = Plans.version(plans.stable), Plans.version(plans.changed)
    stack.engine.up(plans.stable)
    with pytest.raises(InterruptedUpError):
        stack.engine.up(plans.changed, stop_after=lambda step: step == f"create {INSTANCE}-deployment-{candidate}")
    assert selector_version(kube, ns) == {stable}

    stack.engine.up(plans.changed)

    assert selector_version(kube, ns) == {candidate}
    assert live_objects(kube, ns, plans) == expected_objects(plans.changed)


@pytest.mark.parametrize("state", ["stable", "judged-wrong", "interrupted", "promoted"])
def test_destroy_from_every_state_leaves_nothing(plans: Plans, stack: Stack, state: str) -> None:
    kube, ns = stack.cluster.kube, stack.cluster.namespace
    candidate = Plans.version(plans.changed)
    stack.engine.up(plans.stable)
    if state == "judged-wrong":
        stack.judge.wrong.add(candidate)
        with pytest.raises(ProbeFailedError):
            stack.engine.up(plans.changed)
    elif state == "interrupted":
        with pytest.raises(InterruptedUpError):
            stack.engine.up(plans.changed, stop_after=lambda step: step == f"create {INSTANCE}-candidate-{candidate}")
    elif state == "promoted":
        stack.engine.up(plans.changed)
    assert live_objects(kube, ns, plans)

    stack.engine.destroy()

    assert stack.engine.state == {}
    assert live_objects(kube, ns, plans) == set()
