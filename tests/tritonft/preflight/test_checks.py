"""The preflight checks as pure functions over API objects (the real cluster runs are in tests/system/controlplane)."""

from __future__ import annotations

from typing import Any

import pytest

from tritonft.gpu_pool import GpuPool
from tritonft.preflight.checks import (
    RESOURCE_METRICS_API,
    Needs,
    free_gpus,
    gpu_nodes,
    metrics_apis,
    model_shapes_fit,
    selector_and_taints,
    storage,
    tolerated,
)
from tritonft.preflight.checks import gateway as gateway_check
from tritonft.preflight.checks import ingress as checks_ingress

GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def needs(**overrides: Any) -> Needs:
    base: dict[str, Any] = {
        "gpu_selector": {"pool": "gpu"},
        "tolerations": [GPU_TOLERATION],
        "models": [("t5-3b", 4), ("gpt-j-6b", 1)],
        "storage_class": "rwx",
        "stack_storage_class": False,
        "ingress_class": "nginx",
        "stack_ingress_class": False,
        "crds": [],
    }
    return Needs(**(base | overrides))


GPU_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
NOT_READY_TAINT = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
READY = {"type": "Ready", "status": "True", "reason": "KubeletReady"}


def node(
    name: str,
    gpus: int,
    labels: dict[str, str] | None = None,
    *,
    ready: dict[str, str] = READY,
    taints: tuple[dict[str, str], ...] = (GPU_TAINT,),
    unschedulable: bool = False,
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"pool": "gpu"} if labels is None else labels},
        "spec": {"taints": list(taints)} | ({"unschedulable": True} if unschedulable else {}),
        "status": {"allocatable": {"nvidia.com/gpu": str(gpus)}, "conditions": [ready]},
    }


def pod(node_name: str, gpus: int, phase: str = "Running") -> dict[str, Any]:
    container = {"resources": {"requests": {"nvidia.com/gpu": str(gpus)}}}
    return {"spec": {"nodeName": node_name, "containers": [container]}, "status": {"phase": phase}}


@pytest.mark.parametrize(
    ("toleration", "expected"),
    [
        (GPU_TOLERATION, True),
        ({"operator": "Exists"}, True),
        ({"key": "nvidia.com/gpu", "operator": "Equal", "value": "true"}, True),
        ({"key": "nvidia.com/gpu", "operator": "Equal", "value": "present"}, False),
        ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}, False),
    ],
)
def test_a_taint_is_tolerated_by_kubernetes_rules(toleration: dict[str, str], expected: bool) -> None:
    assert tolerated({"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}, [toleration]) is expected


def test_free_gpus_subtract_the_requests_of_pods_still_running_on_the_node() -> None:
    pods = [pod("a", 1), pod("a", 2, phase="Succeeded"), pod("b", 4)]
    assert free_gpus(node("a", 4), pods) == 3


def test_a_model_fits_only_where_one_usable_node_has_its_gpus_free() -> None:
    checks = model_shapes_fit([node("a", 4), node("b", 4, labels={})], [pod("a", 1)], needs())
    assert [c.ok for c in checks] == [False, True]
    assert "the most free on a usable GPU node is 3" in checks[0].detail


def test_a_ready_gpu_node_with_the_selector_and_tolerated_taints_takes_the_pods() -> None:
    check = selector_and_taints([node("a", 4)], needs())
    assert check.ok and check.detail == "1 GPU node(s) match the selector and tolerations"


def test_a_cordoned_gpu_node_is_named_as_cordoned_with_the_node_as_the_fix() -> None:
    cordoned = node(
        "a", 4, unschedulable=True, taints=(GPU_TAINT, {**NOT_READY_TAINT, "key": "node.kubernetes.io/unschedulable"})
    )
    check = selector_and_taints([cordoned], needs())
    assert not check.ok
    assert "a is cordoned;" in check.detail
    assert check.detail.endswith("the nodes must be Ready and schedulable (kubectl describe node; kubectl uncordon)")


def test_a_gpu_node_not_ready_is_named_with_its_kubelets_reason() -> None:
    lost = {"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown", "message": "Kubelet stopped posting"}
    check = selector_and_taints([node("a", 4, ready=lost, taints=(GPU_TAINT, NOT_READY_TAINT))], needs())
    assert not check.ok
    assert "a is not Ready (NodeStatusUnknown: Kubelet stopped posting);" in check.detail


def test_the_not_ready_taint_of_a_node_just_turned_ready_is_not_offered_as_a_toleration_to_add() -> None:
    # The API server taints every new node not-ready; the node lifecycle controller lifts it seconds after Ready.
    check = selector_and_taints([node("a", 4, taints=(GPU_TAINT, NOT_READY_TAINT))], needs())
    assert not check.ok
    assert "a has the node-state taint node.kubernetes.io/not-ready:NoSchedule;" in check.detail
    assert "is not tolerated" not in check.detail and "gpuTolerations" not in check.detail


def test_a_node_both_unready_and_unlabelled_names_both_and_the_stack_fix() -> None:
    check = selector_and_taints([node("a", 4, labels={}, unschedulable=True)], needs())
    assert "a is cordoned and lacks label pool=gpu;" in check.detail
    assert check.detail.endswith("fix gpuNodeSelector/gpuTolerations or the nodes")


def test_a_model_does_not_fit_on_a_node_that_takes_no_pods() -> None:
    checks = model_shapes_fit([node("a", 4, unschedulable=True)], [], needs())
    assert [c.ok for c in checks] == [False, False]
    assert "the most free on a usable GPU node is 0" in checks[0].detail


def aws_pool(nodes_min: int = 0, nodes_max: int = 2, gpus_per_node: int = 4) -> GpuPool:
    return GpuPool("g5.12xlarge", gpus_per_node, nodes_min, nodes_max, autoscaled=nodes_max > nodes_min)


def test_a_stack_node_group_at_zero_passes_the_gpu_checks_naming_what_cluster_autoscaler_adds() -> None:
    cpu_only = [node("system-0", 0, labels={})]
    scaled_down = needs(gpu_pool=aws_pool())
    checks = [gpu_nodes(cpu_only, scaled_down), selector_and_taints(cpu_only, scaled_down)]
    checks += model_shapes_fit(cpu_only, [], scaled_down)
    assert all(c.ok for c in checks), checks
    assert checks[0].detail == (
        "none running (the stack's GPU node group is at 0); cluster-autoscaler adds g5.12xlarge nodes (4 GPUs each) "
        "on demand, 0 of at most 2 running"
    )


def test_a_full_gpu_node_is_no_failure_while_the_stacks_node_group_can_grow() -> None:
    full = [node("a", 4)]
    (t5, gptj) = model_shapes_fit(full, [pod("a", 4)], needs(gpu_pool=aws_pool()))
    assert t5.ok and gptj.ok
    assert t5.detail == (
        "needs 4 GPU(s) on one node; none has them free now, cluster-autoscaler adds g5.12xlarge nodes (4 GPUs each) "
        "on demand, 1 of at most 2 running"
    )


def test_a_full_node_group_at_its_most_nodes_fails_as_a_fixed_cluster_does() -> None:
    full = [node("a", 4), node("b", 4)]
    (t5, _) = model_shapes_fit(full, [pod("a", 4), pod("b", 4)], needs(gpu_pool=aws_pool()))
    assert not t5.ok and "the most free on a usable GPU node is 0" in t5.detail


def test_a_fixed_size_node_group_without_gpu_nodes_names_the_nodes_it_should_have() -> None:
    check = gpu_nodes([node("system-0", 0, labels={})], needs(gpu_pool=aws_pool(nodes_min=2, nodes_max=2)))
    assert not check.ok
    assert "the stack's GPU node group runs at least 2 g5.12xlarge node(s)" in check.detail


def test_without_a_stack_node_group_no_gpu_node_is_a_failure() -> None:
    cpu_only = [node("system-0", 0, labels={})]
    assert not gpu_nodes(cpu_only, needs()).ok
    assert not selector_and_taints(cpu_only, needs()).ok
    assert [c.ok for c in model_shapes_fit(cpu_only, [], needs())] == [False, False]


def test_block_storage_is_refused_for_the_read_write_many_model_store() -> None:
    ebs = {"metadata": {"name": "rwx"}, "provisioner": "ebs.csi.aws.com"}
    check = storage([ebs], needs())
    assert not check.ok and "no ReadWriteMany" in check.detail


GATEWAY_HPA = (RESOURCE_METRICS_API, "the gateway's HPA scales on CPU through it")


def api_service(available: str, reason: str = "", message: str = "") -> dict[str, Any]:
    condition = {"type": "Available", "status": available, "reason": reason, "message": message}
    return {"metadata": {"name": RESOURCE_METRICS_API}, "status": {"conditions": [condition]}}


def test_no_autoscaler_needs_no_metrics_api() -> None:
    assert metrics_apis({}, needs()).line() == "PASS metrics-apis: none needed"


def test_a_needed_metrics_api_that_is_available_passes() -> None:
    check = metrics_apis({RESOURCE_METRICS_API: api_service("True", "Passed")}, needs(metrics_apis=[GATEWAY_HPA]))
    assert check.ok and check.detail == f"{RESOURCE_METRICS_API} available"


def test_a_needed_metrics_api_not_registered_fails_naming_what_reads_it() -> None:
    check = metrics_apis({}, needs(metrics_apis=[GATEWAY_HPA]))
    assert not check.ok
    assert check.detail == f"{RESOURCE_METRICS_API} is not registered (the gateway's HPA scales on CPU through it)"


def test_a_registered_but_unavailable_metrics_api_fails_with_the_api_servers_reason() -> None:
    down = api_service("False", "FailedDiscoveryCheck", "failing or missing response from https://10.0.0.7:443")
    check = metrics_apis({RESOURCE_METRICS_API: down}, needs(metrics_apis=[GATEWAY_HPA]))
    assert not check.ok
    assert "registered but not available (FailedDiscoveryCheck: failing or missing response" in check.detail


# -- the edge: an existing cluster's own Gateway ---------------------------------------------------------------------


def own_gateway(*hostnames: str | None, namespace: str = "edge", name: str = "shared") -> dict[str, Any]:
    listeners = [{"name": f"l{i}", **({"hostname": h} if h else {})} for i, h in enumerate(hostnames)]
    return {"metadata": {"name": name, "namespace": namespace}, "spec": {"listeners": listeners}}


def gateway_needs(*hosts: str) -> Needs:
    return needs(edge="gateway", gateway=("edge", "shared"), hosts=list(hosts))


def test_the_users_gateway_passes_when_a_listener_accepts_every_host() -> None:
    check = gateway_check(
        [own_gateway("*.triton.example.com", "triton.example.com")],
        gateway_needs("triton.example.com", "t5.triton.example.com"),
    )
    assert check.ok and check.detail == "edge/shared accepts 2 host(s)"


def test_a_missing_gateway_is_named_with_the_keys_to_fix() -> None:
    check = gateway_check([own_gateway(name="other")], gateway_needs("triton.example.com"))
    assert not check.ok
    assert check.detail == "Gateway edge/shared not found; set gatewayName/gatewayNamespace to the cluster's Gateway"


def test_a_host_no_listener_accepts_is_named() -> None:
    check = gateway_check(
        [own_gateway("*.triton.example.com")], gateway_needs("triton.example.com", "t5.triton.example.com")
    )
    assert not check.ok and check.detail.startswith("Gateway edge/shared has no listener for triton.example.com:")


def test_a_listener_without_a_hostname_accepts_every_host() -> None:
    assert gateway_check([own_gateway(None)], gateway_needs("a.example.com")).ok


def test_without_the_gateway_api_crds_the_gateway_check_fails() -> None:
    assert not gateway_check(None, gateway_needs("a.example.com")).ok


def test_the_ingress_class_is_not_asked_for_on_the_gateway_edge() -> None:
    assert checks_ingress([], needs(edge="gateway")).ok
    assert gateway_check(None, needs()).detail == "not used (edge: ingress)"
