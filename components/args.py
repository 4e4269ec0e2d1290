"""Pure mappings from validated :class:`Settings` to each component's typed ``*Args``.

``__main__`` stays a composition root: it calls these and passes the results on. Keeping the mapping here makes
it testable without running a program.
"""

from __future__ import annotations

from components.cluster import ExistingClusterArgs, GpuScheduling
from components.settings.model import Settings


def gpu_scheduling(settings: Settings) -> GpuScheduling:
    cluster = settings.cluster
    return GpuScheduling(node_selector=dict(cluster.gpu_node_selector), tolerations=cluster.gpu_tolerations)


def existing_cluster_args(settings: Settings) -> ExistingClusterArgs:
    cluster = settings.cluster
    assert cluster.kubernetes is not None, "existing_cluster_args needs platform kubernetes"
    return ExistingClusterArgs(
        kubeconfig=cluster.kubernetes.kubeconfig,
        context=cluster.kubernetes.context,
        namespace=settings.namespace,
        gpu=gpu_scheduling(settings),
        cpu_node_selector=dict(cluster.cpu_node_selector),
        storage_class=cluster.storage_class,
        ingress_class=cluster.ingress_class,
        addons=cluster.available_addons,
    )
