"""Preflight for ``device: cpu`` models: a schedulable non-GPU node on ``cpuNodeSelector`` with one replica's CPU
and memory unrequested; the GPU checks count only the GPU models."""

from __future__ import annotations

from typing import Any

from tests.tritonft.preflight.test_checks import GPU_TAINT, NOT_READY_TAINT, needs, node
from tritonft.preflight.checks import CpuModel, cpu_models_fit, gpu_nodes, is_gpu_node, selector_and_taints

MINILM = CpuModel("minilm", cpu="2", memory="2Gi")
CPU_LABELS = {"pool": "cpu"}


def cpu_needs(**overrides: Any) -> Any:
    return needs(**({"cpu_selector": CPU_LABELS, "cpu_models": [MINILM]} | overrides))


def cpu_node(
    name: str, cpu: str = "4", memory: str = "8Gi", labels: dict[str, str] | None = None, **kwargs: Any
) -> dict[str, Any]:
    made = node(name, 0, CPU_LABELS if labels is None else labels, taints=kwargs.pop("taints", ()), **kwargs)
    made["status"]["allocatable"] = {"cpu": cpu, "memory": memory}
    return made


def running(node_name: str, cpu: str, memory: str, phase: str = "Running") -> dict[str, Any]:
    return {
        "spec": {"nodeName": node_name, "containers": [{"resources": {"requests": {"cpu": cpu, "memory": memory}}}]},
        "status": {"phase": phase},
    }


def test_a_cpu_model_fits_a_cpu_node_with_room() -> None:
    (check,) = cpu_models_fit([cpu_node("c1")], [], cpu_needs())
    assert check.ok and check.name == "cpu-shape minilm" and "c1" in check.detail


def test_what_running_pods_request_is_not_free() -> None:
    (check,) = cpu_models_fit([cpu_node("c1")], [running("c1", "3", "1Gi")], cpu_needs())
    assert not check.ok
    assert "c1 1 CPU" in check.detail and "add CPU nodes" in check.detail


def test_finished_pods_free_their_requests() -> None:
    (check,) = cpu_models_fit([cpu_node("c1")], [running("c1", "3", "7Gi", phase="Succeeded")], cpu_needs())
    assert check.ok


def test_memory_short_by_a_little_fails() -> None:
    (check,) = cpu_models_fit([cpu_node("c1", memory="2047Mi")], [], cpu_needs())
    assert not check.ok and "2Gi memory" in check.detail


def test_a_gpu_node_is_never_a_place_for_a_cpu_model() -> None:
    gpu = node("g1", 8, CPU_LABELS | {"nvidia.com/gpu.present": "true"})
    gpu["status"]["allocatable"] |= {"cpu": "96", "memory": "1Ti"}
    (check,) = cpu_models_fit([gpu], [], cpu_needs())
    assert not check.ok and "no schedulable non-GPU node matches cpuNodeSelector pool=cpu" in check.detail


def test_a_node_in_the_gpu_pool_counts_as_a_gpu_node_even_before_its_device_plugin_runs() -> None:
    assert is_gpu_node(cpu_node("g0", labels={"pool": "gpu"}), cpu_needs())
    assert not is_gpu_node(cpu_node("c1"), cpu_needs())


def test_a_node_off_the_cpu_selector_is_not_used() -> None:
    (check,) = cpu_models_fit([cpu_node("other", labels={"pool": "batch"})], [], cpu_needs())
    assert not check.ok and "cpuNodeSelector" in check.detail


def test_a_cordoned_or_tainted_cpu_node_is_named_with_its_reason() -> None:
    nodes = [cpu_node("c1", unschedulable=True), cpu_node("c2", taints=(NOT_READY_TAINT,))]
    (check,) = cpu_models_fit(nodes, [], cpu_needs())
    assert not check.ok
    assert "c1 is cordoned" in check.detail
    assert "c2 has the node-state taint node.kubernetes.io/not-ready:NoSchedule" in check.detail


def test_a_cpu_pod_tolerates_no_taint_not_even_the_gpu_one() -> None:
    (check,) = cpu_models_fit([cpu_node("c1", taints=(GPU_TAINT,))], [], cpu_needs())
    assert not check.ok


def test_each_cpu_model_gets_its_own_line() -> None:
    big = CpuModel("big", cpu="8", memory="2Gi")
    checks = cpu_models_fit([cpu_node("c1")], [], cpu_needs(cpu_models=[MINILM, big]))
    assert [(c.name, c.ok) for c in checks] == [("cpu-shape minilm", True), ("cpu-shape big", False)]


def test_without_cpu_models_there_is_no_cpu_line() -> None:
    assert cpu_models_fit([cpu_node("c1")], [], cpu_needs(cpu_models=[])) == []


def test_a_stack_of_cpu_models_only_needs_no_gpu_node() -> None:
    only_cpu = cpu_needs(models=[])
    assert gpu_nodes([cpu_node("c1")], only_cpu).ok
    assert selector_and_taints([cpu_node("c1")], only_cpu).ok
