"""A model without room for a candidate on the real control plane (issue 49): ``local`` on a lab of only its two serving
GPUs (``gpuNodes: 2``) rolls t5-small's new revision in place, and its judge Job (the real provider: the Job created,
scheduled and read on this API server) runs right after the rollout watch, asking the model's user-facing Service.
Judged wrong, ``up`` fails with the new version serving, says so and how to roll back, and the gateway's
configuration keeps the previous revision; the revert rolls the previous version back in place.

The engine, the judge and the answers are ``test_judged_promotion.py``'s (kwok's pods run no container: a version the
test lists as wrong is judged wrong; the real judge's command on a real Triton serving a wrong gpt2:
``tests/system/realtriton/test_judge_reference.py``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

from components.probe import ProbeFailedError
from tests.system.controlplane.fixtures import Cluster
from tests.system.controlplane.prod import copy_project
from tests.system.controlplane.pulumi_engine import Resource, named, program
from tests.system.controlplane.server import ControlPlane
from tests.system.controlplane.test_judged_promotion import (
    GATEWAY,
    INSTANCE,
    JUDGE,
    NEW_REVISION,
    PLAN_NAMESPACE,
    STABLE_REVISION,
    STACK,
    Stack,
    local_stack,
)
from tritonft.synth.run import synthesize

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class Plans:
    stable: list[Resource]
    """``local`` on two GPU nodes: every GPU model rolls in place."""
    changed: list[Resource]
    """The same, with t5-small at another revision."""

    @staticmethod
    def judge_version(resources: list[Resource]) -> str:
        (judge,) = [r for r in resources if r.type == JUDGE and r.name.startswith(f"{INSTANCE}-judge-")]
        return judge.name.rsplit("-", 1)[1]


@pytest.fixture(scope="module")
def plans(tmp_path_factory: pytest.TempPathFactory) -> Plans:
    tmp = tmp_path_factory.mktemp("in-place")
    project = copy_project(tmp)
    stack = project / f"stacks/Pulumi.{STACK}.yaml"
    text = stack.read_text()
    assert text.count("triton-ft:gpuNodes: 4") == 1 and text.count(f"revision: {STABLE_REVISION}") == 1
    text = text.replace("triton-ft:gpuNodes: 4", "triton-ft:gpuNodes: 2")
    stack.write_text(text)
    synthesize(STACK, out=tmp / "stable", project_dir=project, extras=())
    stack.write_text(text.replace(f"revision: {STABLE_REVISION}", f"revision: {NEW_REVISION}"))
    synthesize(STACK, out=tmp / "changed", project_dir=project, extras=())
    return Plans(program(tmp / "stable"), program(tmp / "changed"))


@pytest.fixture
def stack(control_plane: ControlPlane, cluster: Cluster) -> Stack:
    # No room for a candidate: one GPU node per serving GPU model.
    return local_stack(control_plane, cluster, gpu_nodes=2)


def t5_revision_the_gateway_is_given(stack: Stack) -> str:
    specs = stack.cluster.kube.get("v1", "ConfigMap", f"{GATEWAY}-specs", stack.cluster.namespace)["data"]
    (t5,) = [json.loads(v) for v in specs.values() if json.loads(v)["name"] == "t5-small"]
    return str(t5["revision"])


def commands(containers: list[dict[str, Any]]) -> list[list[str]]:
    """The containers' commands (Triton's names the repository directory it serves)."""
    return [list(c["command"]) for c in containers]


def served(stack: Stack) -> list[list[str]]:
    """What t5-small's one Deployment serves now."""
    deployment = stack.cluster.kube.get("apps/v1", "Deployment", INSTANCE, stack.cluster.namespace)
    return commands(deployment["spec"]["template"]["spec"]["containers"])


def declared(resources: list[Resource]) -> list[list[str]]:
    (deployment,) = named(resources, "Deployment", INSTANCE)
    return commands(deployment.inputs["spec"]["template"]["spec"]["containers"])


def test_a_version_rolled_in_place_and_judged_wrong_fails_up_serving_and_the_gateway_keeps_the_previous_revision(
    plans: Plans, stack: Stack
) -> None:
    kube, ns = stack.cluster.kube, stack.cluster.namespace
    stable, new = Plans.judge_version(plans.stable), Plans.judge_version(plans.changed)
    stack.engine.up(plans.stable)
    assert stable in stack.judge.judged, "the first version is judged in place too"
    steps = len(stack.engine.log)
    stack.judge.wrong.add(new)

    with pytest.raises(ProbeFailedError) as failed:
        stack.engine.up(plans.changed)

    log = stack.engine.log[steps:]
    assert log.index(f"update {INSTANCE}-deployment") < log.index(f"update {INSTANCE}-rollout")
    assert stack.judge.judged[-1] == new, "its judge ran after the rollout watch (the step that failed)"
    message = str(failed.value)
    assert message.startswith(f"judge of {INSTANCE} (Job {ns}/{INSTANCE}-judge) failed:")
    assert "inference[t5-small]: wrong answer" in message
    assert f"Version {new} of t5-small rolled in place" in message and "SERVES NOW" in message
    assert "revert the change in the stack's settings" in message
    assert f"`kubectl -n {PLAN_NAMESPACE} logs job/{INSTANCE}-judge`" in message
    (owner,) = kube.get("batch/v1", "Job", f"{INSTANCE}-judge", ns)["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"]) == ("Deployment", INSTANCE)
    # The version serves: the one Deployment rolled to it; the gateway was not moved.
    assert declared(plans.changed) != declared(plans.stable)
    assert served(stack) == declared(plans.changed)
    assert t5_revision_the_gateway_is_given(stack) == STABLE_REVISION
    assert not [line for line in log if f" {GATEWAY}-" in line], "the gateway unchanged"


def test_a_revert_after_a_failed_in_place_judgement_rolls_the_previous_version_back(plans: Plans, stack: Stack) -> None:
    stack.engine.up(plans.stable)
    stack.judge.wrong.add(Plans.judge_version(plans.changed))
    with pytest.raises(ProbeFailedError):
        stack.engine.up(plans.changed)

    stack.engine.up(plans.stable)

    assert served(stack) == declared(plans.stable)
    assert t5_revision_the_gateway_is_given(stack) == STABLE_REVISION
