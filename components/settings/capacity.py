"""The capacity checks of a stack's settings: its models at replicasMin/replicasMax against its GPU nodes.

Kept out of ``load.py`` (one call there): the rules live in :mod:`components.capacity`; this module only maps
validated settings onto them.
"""

from __future__ import annotations

from collections.abc import Sequence

from components.capacity import CapacityVerdict, GpuPool, ModelShape, check_capacity
from components.settings.model import ClusterSettings
from tritonft.spec import ModelSpec


def model_shapes(models: Sequence[ModelSpec]) -> tuple[ModelShape, ...]:
    return tuple(ModelShape(m.name, m.gpus) for m in models)


def gpu_pool(cluster: ClusterSettings) -> GpuPool | None:
    """The GPU nodes of an ``aws`` stack (its node group and cluster-autoscaler); None when the node count is
    not the stack's to say (an existing cluster: ``tritonft preflight`` checks that one)."""
    if cluster.aws is None:
        return None
    aws = cluster.aws
    return GpuPool(
        node_type=cluster.gpu_node.name,
        gpus_per_node=cluster.gpu_node.gpus,
        nodes_min=aws.gpu_nodes_min,
        nodes_max=aws.gpu_nodes_max,
        # cluster-autoscaler is installed on every aws stack; it can add nodes only when the group may grow.
        autoscaled=aws.gpu_nodes_max > aws.gpu_nodes_min,
    )


def capacity_verdict(
    cluster: ClusterSettings, models: Sequence[ModelSpec], replicas_min: int, replicas_max: int
) -> CapacityVerdict:
    pool = gpu_pool(cluster)
    if pool is None:
        return CapacityVerdict((), (), 0, 0)
    return check_capacity(model_shapes(models), replicas_min, replicas_max, pool)
