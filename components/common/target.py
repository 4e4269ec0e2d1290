"""The cluster target: a Kubernetes provider plus the scheduling facts every stage needs to place its workloads.

Both platforms (an existing cluster from a kubeconfig, or EKS built by :mod:`components.platform.aws`) end in the
same :class:`ClusterTarget`, so the model store, the conversion Jobs, the Triton service and the gateway never
know which one they got.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s

GPU_RESOURCE = "nvidia.com/gpu"


@dataclass(frozen=True)
class GpuScheduling:
    """How a pod lands on a GPU node: the node selector, the tolerations for the GPU taint, the resource name."""

    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: tuple[dict[str, str], ...] = ({"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"},)
    resource_name: str = GPU_RESOURCE


@dataclass(frozen=True)
class PriorityClassNames:
    """The stack's PriorityClasses (``components.common.priority``), as the pods' ``priorityClassName`` names them."""

    serving: str
    """Triton pods (with their GEMM tuning init container) and the gateway."""
    batch: str
    """The tools Jobs (download, convert, render)."""


@dataclass
class ClusterTarget:
    """Everything downstream components need to place workloads on the cluster."""

    provider: k8s.Provider
    namespace: pulumi.Output[str]
    gpu: GpuScheduling
    cpu_node_selector: dict[str, str]
    """Where CPU work (conversion Jobs, controllers) runs; never the GPU nodes."""
    storage_class: str | None
    """ReadWriteMany storage class for the model store (None = the cluster default)."""
    ingress_class: str = "nginx"
    crd_installers: list[pulumi.Resource] = field(default_factory=list)
    """Resources (Helm charts) that install CRDs; custom resources of those CRDs depend on them."""
    addons: frozenset[str] = frozenset()
    """Add-ons present in the cluster: ``prometheus-operator``, ``cert-manager``, ``keda``, ``ingress-nginx`` ..."""
    storage_ready: list[pulumi.Resource] = field(default_factory=list)
    """What a claim on ``storage_class`` needs first (the StorageClass this stack creates, and through it its CSI
    driver); empty when the class is the cluster's own."""
    kubeconfig: pulumi.Input[str] | None = None
    """What the provider was given (path or content; None = ``$KUBECONFIG``), for waits that read the cluster."""
    context: str | None = None
    priority: PriorityClassNames | None = None
    """The stack's PriorityClasses, once made (``components.common.priority.priority_classes``); None: pods carry
    no ``priorityClassName``."""
