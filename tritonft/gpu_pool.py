"""The GPU nodes a stack can use: the settings decide it (``components.settings.capacity.gpu_pool``), preflight checks
a cluster against it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GpuPool:
    """The GPU nodes a stack can use: GPUs per node, nodes at the start, nodes the autoscaler may reach."""

    node_type: str
    gpus_per_node: int
    nodes_min: int
    nodes_max: int
    autoscaled: bool
    """A node autoscaler can add nodes up to ``nodes_max`` (otherwise ``nodes_min`` is all there is)."""

    @property
    def reachable_nodes(self) -> int:
        return self.nodes_max if self.autoscaled else self.nodes_min
