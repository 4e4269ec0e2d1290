"""The simulated nodes a test adds are usable when ``add_nodes`` returns, as a real node is once its kubelet
reports Ready and the node lifecycle controller has lifted the not-ready taint."""

from __future__ import annotations

from tests.system.controlplane.fixtures import Cluster
from tests.system.controlplane.plan import NOT_READY_TAINTS, NodeShape


def test_an_added_node_is_ready_with_its_capacity_and_without_the_not_ready_taint(cluster: Cluster) -> None:
    allocatable = {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "4", "pods": "110"}
    dedicated = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
    cluster.add_nodes([NodeShape(f"{cluster.namespace}-gpu-0", {}, [dedicated], allocatable)])

    node = cluster.kube.get("v1", "Node", f"{cluster.namespace}-gpu-0")
    conditions = {c["type"]: c["status"] for c in node["status"]["conditions"]}
    assert conditions["Ready"] == "True"
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "4"
    assert node["spec"]["taints"] == [dedicated], f"not-ready taints {NOT_READY_TAINTS} must be gone"
