"""Pod Security Admission ``restricted`` on the stack's namespace, enforced by the real kube-apiserver (its
PodSecurity admission plugin is on by default): every pod of prod's plan is admitted (the conversion Jobs' pods,
which ran to completion, the Triton pods with FasterTransformer's GEMM tuning init container, the CPU encoder's,
the gateway's), and a pod that does not meet ``restricted`` is refused, naming what it lacks."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest

from tests.system.controlplane.plan import Plan
from tests.system.controlplane.security import Deployed, deployed_prod, restricted_pod
from tests.system.controlplane.server import ControlPlane
from tritonft.kube import ApiError

ENFORCE = "pod-security.kubernetes.io/enforce"


@pytest.fixture(scope="module")
def deployed(control_plane: ControlPlane, prod_plan: Plan) -> Iterator[Deployed]:
    with deployed_prod(control_plane, prod_plan) as made:
        yield made


def _refusal(deployed: Deployed, pod: dict[str, Any]) -> str:
    try:
        deployed.cluster.kube.apply(pod, dry_run=True)
    except ApiError as exc:
        assert exc.status == 403
        return exc.message
    return ""


def test_the_stacks_namespace_enforces_restricted_as_the_api_server_stores_it(deployed: Deployed) -> None:
    assert deployed.namespaces[deployed.cluster.namespace][ENFORCE] == "restricted"


def test_every_pod_of_the_plan_was_admitted_under_restricted(deployed: Deployed, prod_plan: Plan) -> None:
    settings = prod_plan.settings
    pods = deployed.cluster.pods()
    by_component: dict[str, int] = {}
    for pod in pods:
        component = pod["metadata"]["labels"].get("app.kubernetes.io/component", "")
        by_component[component] = by_component.get(component, 0) + 1
    assert by_component["triton"] == settings.serving.replicas_min * len(settings.models)
    assert by_component["gateway"] == settings.serving.gateway.replicas_min
    generators = [m for m in settings.models if m.family.is_fastertransformer]
    # a conversion (or download) Job per model, and a judge reference Job per FasterTransformer generator
    assert by_component["conversion"] == len(settings.models) + len(generators)
    assert any(pod["spec"].get("initContainers") for pod in pods), "a Triton pod with the GEMM tuning step"


def test_a_privileged_pod_is_refused_in_the_stacks_namespace(deployed: Deployed) -> None:
    pod = restricted_pod("privileged", deployed.cluster.namespace, {"app": "x"})
    pod["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    message = _refusal(deployed, pod)
    assert 'violates PodSecurity "restricted:latest"' in message
    assert 'privileged (container "c" must not set securityContext.privileged=true)' in message


def test_a_pod_that_only_meets_baseline_is_refused_naming_what_restricted_asks(deployed: Deployed) -> None:
    pod = restricted_pod("baseline-only", deployed.cluster.namespace, {"app": "x"})
    del pod["spec"]["securityContext"]
    pod["spec"]["containers"][0]["securityContext"] = {}
    message = _refusal(deployed, pod)
    assert 'violates PodSecurity "restricted:latest"' in message
    for lacking in ("allowPrivilegeEscalation != false", "unrestricted capabilities", "runAsNonRoot != true"):
        assert lacking in message


def test_the_stacks_own_pod_shape_is_admitted(deployed: Deployed) -> None:
    pod = restricted_pod("ours", deployed.cluster.namespace, {"app": "x"})
    assert _refusal(deployed, copy.deepcopy(pod)) == ""
