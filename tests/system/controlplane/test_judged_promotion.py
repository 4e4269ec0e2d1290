"""Judged promotion of ``local``'s t5-small on the real control plane: a new revision comes up beside the serving
one, the user-facing Services never send it a pod address before its judge passed, a failed judgement fails ``up``
with the stable version still selected, a re-run converges, and ``destroy`` from every state leaves nothing.

The plans are ``tritonft synth``'s (the program under the mock engine); ``pulumi_engine`` applies them with the
CLI's rules (dependency order, in-place updates, no deletes after a failure, deletes last, destroy in reverse
order). The rollout watch and the in-cluster judge are the real providers against this API server (the judge's Job
created, scheduled and completed here); the candidate's answers are the test's, kwok's pods running no container
(the real judge's command on a real Triton serving wrong answers: ``tests/system/realtriton/test_judge.py``). The pods
are kwok's, their addresses and readiness the API server's: "receives a request through the Service" is judged
here by what a Service can route to, its EndpointSlices, read continuously while ``up`` runs.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

import components.probe.in_cluster as judge_module
from components.probe import ProbeFailedError
from components.probe.in_cluster import InClusterJudgeProvider
from components.serving.promotion import VERSION_LABEL
from components.settings.stack_file import settings_from_stack_file
from tests.system.controlplane.fixtures import Cluster
from tests.system.controlplane.plan import cpu_node_shape, gpu_node_shape
from tests.system.controlplane.prod import copy_project
from tests.system.controlplane.pulumi_engine import (
    Engine,
    InterruptedUpError,
    Resource,
    named,
    program,
    rollout_watch,
)
from tests.system.controlplane.server import ControlPlane
from tritonft.kube import Kube
from tritonft.probe.report import CheckOutcome, ModelReport, ModelStatus, ProbeReport
from tritonft.rollout.watch import RolloutFailedError
from tritonft.synth.run import synthesize

STACK = "local"
PLAN_NAMESPACE = "triton-local"
INSTANCE = "local-t5-small"
WATCH = "pulumi-python:dynamic/tritonft:RolloutWatch"
JUDGE = "pulumi-python:dynamic/tritonft:InClusterJudge"
NEW_REVISION = "0123456789abcdef" * 2 + "01234567"
FIXED_REVISION = "fedcba9876543210" * 2 + "76543210"
GATEWAY = "local-gateway"
STABLE_REVISION = "df1b051c49625cf57a3d0d8d3863ed4d13564fe4"
CHAT_INSTANCE = "local-qwen-0-5b"
QWEN_REVISION = "7ae557604adf67be50417f59c2c2f167def9a775"
NEW_QWEN_REVISION = "abcdef0123456789" * 2 + "abcdef01"


@dataclass(frozen=True)
class Plans:
    stable: list[Resource]
    """``local`` as it is."""
    changed: list[Resource]
    """``local`` with t5-small at another revision."""
    fixed: list[Resource]
    """``local`` with t5-small at a third revision (the fix after a failed one)."""
    chat_changed: list[Resource]
    """``local`` with its vLLM chat model (qwen-0-5b) at another revision: a new chat template."""

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
    old = f"revision: {STABLE_REVISION}"
    assert text.count(old) == 1
    stack.write_text(text.replace(old, f"revision: {NEW_REVISION}"))
    synthesize(STACK, out=tmp / "changed", project_dir=project, extras=())
    stack.write_text(text.replace(old, f"revision: {FIXED_REVISION}"))
    synthesize(STACK, out=tmp / "fixed", project_dir=project, extras=())
    assert text.count(f"revision: {QWEN_REVISION}") == 1
    stack.write_text(text.replace(f"revision: {QWEN_REVISION}", f"revision: {NEW_QWEN_REVISION}"))
    synthesize(STACK, out=tmp / "chat", project_dir=project, extras=())
    return Plans(program(tmp / "stable"), program(tmp / "changed"), program(tmp / "fixed"), program(tmp / "chat"))


def wrong_answer(props: Mapping[str, Any]) -> ProbeReport:
    """The probe's report on a version that answers wrong."""
    return ProbeReport(
        endpoint=f"http://{props['candidate_service']}:8000",
        protocol="http",
        ok=False,
        elapsed_s=1.0,
        checks=(CheckOutcome("inference", False, "wrong answer", 1.0, model="t5-small"),),
        models=(ModelReport("t5-small", "t5", ModelStatus.WRONG_ANSWER),),
    )


class Judge:
    """The judges, as the real provider runs them on this API server: each creates its judge Job (owned by the
    candidate's Deployment, its pod placed by the scheduler and admitted by the API server) and reads its verdict.
    kwok's pods run no container, so a Job completes without having asked anything; the candidate's answers are the
    test's: a version listed in ``wrong`` answers wrong, and its judge fails as it would (the real judge's verdict on
    a real Triton serving wrong answers, through the same command: ``tests/system/realtriton/test_judge.py``)."""

    def __init__(self, namespace: str, kubeconfig: str) -> None:
        self.namespace, self.kubeconfig = namespace, kubeconfig
        self.wrong: set[str] = set()
        self.judged: list[str] = []

    def __call__(self, res: Resource, _old: Resource | None) -> None:
        version = res.name.rsplit("-", 1)[1]
        self.judged.append(version)
        props = {
            **res.inputs,
            "namespace": self.namespace,
            "kubeconfig": self.kubeconfig,
            "context": None,
            "poll_s": 0.2,
        }
        real = judge_module._outcome

        def answers_wrong(kube: Any, namespace: str, name: str, deadline_s: float, poll_s: float) -> Any:
            ran = real(kube, namespace, name, deadline_s, poll_s)
            assert ran.passed, ran.message
            return judge_module.JudgeOutcome(False, wrong_answer(props).failure_message())

        if version in self.wrong:
            with mock.patch.object(judge_module, "_outcome", answers_wrong):
                InClusterJudgeProvider().create(props)
        else:
            InClusterJudgeProvider().create(props)


@dataclass
class Stack:
    engine: Engine
    judge: Judge
    cluster: Cluster


def local_stack(control_plane: ControlPlane, cluster: Cluster, gpu_nodes: int) -> Stack:
    """The local stack's engine on ``gpu_nodes`` one-GPU nodes and two CPU nodes (the encoder, the Jobs), its rollout
    watches and judges run by their real providers."""
    settings = settings_from_stack_file(Path(__file__).resolve().parents[3], STACK)
    ns = cluster.namespace
    cluster.add_nodes(
        [gpu_node_shape(settings, f"{ns}-gpu-{i}") for i in range(gpu_nodes)]
        + [cpu_node_shape(settings, f"{ns}-cpu-{i}") for i in range(2)]
    )
    cluster.kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    kubeconfig = str(control_plane.workdir / "kubeconfig")
    judge = Judge(ns, kubeconfig)
    engine = Engine(cluster.kube, ns, PLAN_NAMESPACE, {WATCH: rollout_watch(ns, kubeconfig), JUDGE: judge})
    return Stack(engine, judge, cluster)


@pytest.fixture
def stack(control_plane: ControlPlane, cluster: Cluster) -> Stack:
    # Room for a candidate beside the serving version: local's two GPU models on a node each, one for the candidate.
    return local_stack(control_plane, cluster, gpu_nodes=3)


class Endpoints:
    """The pods the user-facing Services of t5-small and qwen-0-5b can route to (what the edge and the gateway reach
    them through), read from their EndpointSlices while it runs."""

    def __init__(self, kube: Kube, namespace: str) -> None:
        self.kube, self.namespace = kube, namespace
        self.seen: set[str] = set()
        self.reads = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for service in (INSTANCE, f"{INSTANCE}-pods", CHAT_INSTANCE, f"{CHAT_INSTANCE}-pods"):
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


def deployment_name(resources: list[Resource], instance: str = INSTANCE) -> str:
    (deployment,) = named(resources, "Deployment", instance)
    return str(deployment.inputs["metadata"]["name"])


@dataclass(frozen=True)
class GatewaySeen:
    """One read of what the gateway says of the models: the spec it was given of t5-small (read first), the
    revision of qwen-0-5b's checkpoint (its chat template) mounted by every gateway pod and by its template, then
    which version the user-facing Services of each model selected (read after)."""

    t5_revision: str
    chat_checkpoints: frozenset[str]
    """Of the Deployment's template and of every gateway pod (terminating ones included: they may still serve)."""
    template_checkpoints: frozenset[str]
    t5_selected: str
    chat_selected: str


def _chat_checkpoints(pod_spec: Mapping[str, Any]) -> set[str]:
    return {
        m["subPath"]
        for c in pod_spec.get("containers") or []
        for m in c.get("volumeMounts") or []
        if str(m.get("subPath", "")).startswith("hf/qwen-0-5b/")
    }


class GatewayView:
    """What the gateway renders and where it sends requests, read every 0.1 s while ``up`` runs: the specs ConfigMap,
    the checkpoint directories its Deployment's template and every one of its pods mount, and (read after those) the
    user-facing Services' selected versions."""

    def __init__(self, kube: Kube, namespace: str) -> None:
        self.kube, self.namespace = kube, namespace
        self.seen: list[GatewaySeen] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _selected(self, instance: str) -> str:
        service = self.kube.get("v1", "Service", f"{instance}-pods", self.namespace)
        return str(service["spec"]["selector"][VERSION_LABEL])

    def read(self) -> GatewaySeen:
        specs = self.kube.get("v1", "ConfigMap", f"{GATEWAY}-specs", self.namespace)["data"]
        (t5,) = [json.loads(v) for v in specs.values() if json.loads(v)["name"] == "t5-small"]
        template = _chat_checkpoints(
            self.kube.get("apps/v1", "Deployment", GATEWAY, self.namespace)["spec"]["template"]["spec"]
        )
        mounted = set(template)
        for pod in self.kube.items("v1", "Pod", self.namespace, f"app.kubernetes.io/instance={GATEWAY}"):
            mounted |= _chat_checkpoints(pod["spec"])
        return GatewaySeen(
            str(t5["revision"]),
            frozenset(m.rsplit("/", 1)[1] for m in mounted),
            frozenset(m.rsplit("/", 1)[1] for m in template),
            self._selected(INSTANCE),
            self._selected(CHAT_INSTANCE),
        )

    def _run(self) -> None:
        while not self._stop.is_set():
            self.seen.append(self.read())
            time.sleep(0.1)

    def __enter__(self) -> GatewayView:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        time.sleep(1.0)
        self._stop.set()
        self._thread.join()
        # A read takes several API calls: on a loaded machine the last one may have begun before `up`'s last step.
        self.seen.append(self.read())


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
        for r in (*plans.stable, *plans.changed, *plans.fixed)
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
    assert kube.items("batch/v1", "Job", ns, "app.kubernetes.io/component=judge") == [], "a passed judge's Job goes"
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


def add_gpu_node(stack: Stack, suffix: str) -> None:
    settings = settings_from_stack_file(Path(__file__).resolve().parents[3], STACK)
    stack.cluster.add_nodes([gpu_node_shape(settings, f"{stack.cluster.namespace}-{suffix}")])


def labelled(kube: Kube, namespace: str, version: str) -> set[str]:
    """``Kind/name`` of the Deployments, Pods and Services labelled with ``version`` (what the failure message's
    ``kubectl get deployment,pods,service -l`` lists)."""
    found = set()
    for api, kind in (("apps/v1", "Deployment"), ("v1", "Pod"), ("v1", "Service")):
        for o in kube.items(api, kind, namespace, f"{VERSION_LABEL}={version}"):
            if not o["metadata"].get("deletionTimestamp"):
                found.add(f"{kind}/{o['metadata']['name']}")
    return found


def test_a_failed_judgement_says_the_candidate_is_kept_how_to_see_it_and_that_the_next_up_removes_it(
    plans: Plans, stack: Stack
) -> None:
    kube, ns = stack.cluster.kube, stack.cluster.namespace
    candidate = Plans.version(plans.changed)
    stack.engine.up(plans.stable)
    stack.judge.wrong.add(candidate)

    with pytest.raises(ProbeFailedError) as failed:
        stack.engine.up(plans.changed)

    message = str(failed.value)
    deployment = deployment_name(plans.changed)
    assert "inference[t5-small]: wrong answer" in message
    assert f"The candidate version {candidate} of t5-small is left running beside the serving version" in message
    assert f"kubectl -n {PLAN_NAMESPACE} get deployment,pods,service -l {VERSION_LABEL}={candidate}" in message
    assert f"kubectl -n {PLAN_NAMESPACE} logs deployment/{deployment} -c triton" in message
    assert "the next `pulumi up` removes it" in message
    shown = labelled(kube, ns, candidate)
    assert {f"Deployment/{deployment}", f"Service/{deployment}"} <= shown, "the message's selector shows it"
    assert any(o.startswith(f"Pod/{deployment}-") for o in shown)
    # The judge ran in the cluster: its Job is kept beside the candidate (its log holds the report), owned by it.
    job = f"{deployment}-judge"
    assert f"kubectl -n {PLAN_NAMESPACE} logs job/{job}" in message
    (owner,) = kube.get("batch/v1", "Job", job, ns)["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"]) == ("Deployment", deployment)
    (judge_pod,) = kube.items("v1", "Pod", ns, f"job-name={job}")
    assert judge_pod["metadata"]["labels"]["app.kubernetes.io/component"] == "judge"
    assert judge_pod["spec"]["nodeName"] in stack.cluster.nodes and "-cpu-" in judge_pod["spec"]["nodeName"]


def test_after_a_failed_judgement_an_up_with_a_fix_promotes_it_and_leaves_nothing_of_the_failed_candidate(
    plans: Plans, stack: Stack, endpoints: Endpoints
) -> None:
    kube, ns = stack.cluster.kube, stack.cluster.namespace
    stable, failed, fixed = (Plans.version(p) for p in (plans.stable, plans.changed, plans.fixed))
    add_gpu_node(stack, "gpu-extra")  # room for the fix's candidate beside the failed one, which holds its GPU
    stack.engine.up(plans.stable)
    serving = pods_of(kube, ns, stable)
    stack.judge.wrong.add(failed)
    with pytest.raises(ProbeFailedError):
        stack.engine.up(plans.changed)
    assert labelled(kube, ns, failed), "kept for debugging until the next up"

    stack.engine.up(plans.fixed)

    assert selector_version(kube, ns) == {fixed}
    assert labelled(kube, ns, failed) == set()
    assert labelled(kube, ns, stable) == set()
    assert not [urn for urn in stack.engine.state if failed in urn], "nothing of the failed version in the state"
    assert live_objects(kube, ns, plans) == expected_objects(plans.fixed)
    log = stack.engine.log
    assert log.index(f"update {INSTANCE}-service") < log.index(f"delete {INSTANCE}-deployment-{failed}")
    assert set(serving) <= endpoints.seen, "the stable version served until the switch"
    assert not {p for p in endpoints.seen if p.startswith(f"{deployment_name(plans.changed)}-")}


def test_after_a_failed_judgement_a_revert_leaves_nothing_of_the_candidate_and_the_stable_keeps_serving(
    plans: Plans, stack: Stack, endpoints: Endpoints
) -> None:
    kube, ns = stack.cluster.kube, stack.cluster.namespace
    stable, failed = Plans.version(plans.stable), Plans.version(plans.changed)
    stack.engine.up(plans.stable)
    serving = pods_of(kube, ns, stable)
    stack.judge.wrong.add(failed)
    with pytest.raises(ProbeFailedError):
        stack.engine.up(plans.changed)

    stack.engine.up(plans.stable)

    assert labelled(kube, ns, failed) == set()
    assert not [urn for urn in stack.engine.state if failed in urn]
    assert pods_of(kube, ns, stable) == serving, "the stable pods were never touched"
    assert selector_version(kube, ns) == {stable}
    assert set(serving) <= endpoints.seen
    assert not {p for p in endpoints.seen if p.startswith(f"{deployment_name(plans.changed)}-")}


def test_with_room_for_one_candidate_the_fix_cannot_be_placed_until_a_revert_removed_the_failed_one(
    plans: Plans, stack: Stack
) -> None:
    kube, ns = stack.cluster.kube, stack.cluster.namespace
    stable, failed, fixed = (Plans.version(p) for p in (plans.stable, plans.changed, plans.fixed))
    stack.engine.up(plans.stable)
    serving = pods_of(kube, ns, stable)
    stack.judge.wrong.add(failed)
    with pytest.raises(ProbeFailedError):
        stack.engine.up(plans.changed)

    with pytest.raises(RolloutFailedError, match="cannot be scheduled"):
        stack.engine.up(plans.fixed)  # the failed candidate still holds the one GPU a candidate can have
    assert selector_version(kube, ns) == {stable} and pods_of(kube, ns, stable) == serving
    stack.engine.up(plans.stable)  # the revert removes the failed candidate (and the fix's, not judged)
    assert labelled(kube, ns, failed) == set() and labelled(kube, ns, fixed) == set()
    stack.engine.up(plans.fixed)

    assert selector_version(kube, ns) == {fixed}
    assert live_objects(kube, ns, plans) == expected_objects(plans.fixed)


# -- the gateway: what users' chats and completions are rendered with follows the Services ---------------------------


@pytest.mark.parametrize("change", ["spec", "chat template"])
def test_a_candidate_judged_wrong_never_reaches_the_gateway_also_on_later_ups(
    plans: Plans, stack: Stack, endpoints: Endpoints, change: str
) -> None:
    kube, ns = stack.cluster.kube, stack.cluster.namespace
    stack.engine.up(plans.stable)
    stable_steps = len(stack.engine.log)
    changed = plans.changed if change == "spec" else plans.chat_changed
    instance = INSTANCE if change == "spec" else CHAT_INSTANCE
    (candidate_deployment,) = named(changed, "Deployment", instance)
    candidate = str(candidate_deployment.inputs["metadata"]["labels"][VERSION_LABEL])
    stack.judge.wrong.add(candidate)

    with GatewayView(kube, ns) as gateway:
        for _ in range(2):  # the failed judgement, then a later `up` of the same change
            with pytest.raises(ProbeFailedError):
                stack.engine.up(changed)

    assert stack.judge.judged.count(candidate) == 2
    assert len(gateway.seen) > 10, "the gateway was read throughout"
    assert {s.t5_revision for s in gateway.seen} == {STABLE_REVISION}
    assert {s.chat_checkpoints for s in gateway.seen} == {frozenset({QWEN_REVISION})}, "the stable's chat template"
    assert not {p for p in endpoints.seen if p.startswith(f"{deployment_name(changed, instance)}-")}
    assert not [line for line in stack.engine.log[stable_steps:] if f" {GATEWAY}-" in line], "the gateway unchanged"


@pytest.mark.parametrize("change", ["spec", "chat template"])
def test_a_promoted_version_reaches_the_gateway_only_once_the_services_selected_it(
    plans: Plans, stack: Stack, change: str
) -> None:
    kube, ns = stack.cluster.kube, stack.cluster.namespace
    stack.engine.up(plans.stable)
    changed = plans.chat_changed if change == "chat template" else plans.changed
    instance = CHAT_INSTANCE if change == "chat template" else INSTANCE
    (candidate_deployment,) = named(changed, "Deployment", instance)
    candidate = str(candidate_deployment.inputs["metadata"]["labels"][VERSION_LABEL])

    with GatewayView(kube, ns) as gateway:
        stack.engine.up(changed)

    if change == "spec":
        new = [s for s in gateway.seen if s.t5_revision == NEW_REVISION]
        assert new and all(s.t5_selected == candidate for s in new)
    else:
        new = [s for s in gateway.seen if NEW_QWEN_REVISION in s.chat_checkpoints]
        assert new and all(s.chat_selected == candidate for s in new)
    assert gateway.seen[0] != new[0], "the stable's configuration was seen first"
    log = stack.engine.log
    switched = log.index(f"update {instance}-pods-service")
    changed_step = next(  # a ConfigMap's new data is a replacement, a Deployment's new template an update
        i
        for i, line in enumerate(log)
        if line.split(" ", 1)[0] in ("update", "replace")
        and line.split(" ", 1)[1] == ("local-gateway-specs" if change == "spec" else "local-gateway-deployment")
    )
    assert switched < changed_step
    final = gateway.read()
    assert (final.t5_revision, final.template_checkpoints) == (
        (NEW_REVISION, frozenset({QWEN_REVISION}))
        if change == "spec"
        else (STABLE_REVISION, frozenset({NEW_QWEN_REVISION}))
    )
