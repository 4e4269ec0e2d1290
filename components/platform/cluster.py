"""An existing cluster as the stack's target: an explicit Kubernetes provider from a kubeconfig, and the namespace.

EKS built by the stack is :mod:`components.platform.aws`; both end in :class:`components.common.target.ClusterTarget`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.common.podsec import WORKLOAD_POD_SECURITY, PodSecurityLevel, namespace_labels
from components.common.target import ClusterTarget, GpuScheduling

__all__ = ["ExistingCluster", "ExistingClusterArgs", "namespace_labels"]


@dataclass(frozen=True)
class ExistingClusterArgs:
    """An existing cluster reached through a kubeconfig file and context."""

    kubeconfig: pulumi.Input[str] | None
    """Path to a kubeconfig file, or its content (a Pulumi secret); None = ``$KUBECONFIG`` / ``~/.kube/config``."""
    context: str | None
    namespace: str
    gpu: GpuScheduling
    cpu_node_selector: dict[str, str]
    storage_class: str | None
    ingress_class: str = "nginx"
    addons: frozenset[str] = frozenset()
    pod_security: PodSecurityLevel = WORKLOAD_POD_SECURITY
    """Pod Security Admission level enforced on the workload namespace."""


class ExistingCluster(pulumi.ComponentResource):
    """Targets an existing cluster: an explicit Kubernetes provider and the workload namespace."""

    namespace: pulumi.Output[str]
    """The namespace every workload of this stack lives in."""
    target: ClusterTarget

    def __init__(self, name: str, args: ExistingClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("triton-ft:cluster:ExistingCluster", name, {}, opts)
        provider_args: dict[str, Any] = {"enable_server_side_apply": True}
        if args.kubeconfig is not None:
            provider_args["kubeconfig"] = args.kubeconfig
        if args.context:
            provider_args["context"] = args.context
        provider = k8s.Provider(f"{name}-k8s", **provider_args, opts=pulumi.ResourceOptions(parent=self))
        ns = k8s.core.v1.Namespace(
            f"{name}-ns",
            metadata={"name": args.namespace, "labels": namespace_labels(args.pod_security)},
            opts=pulumi.ResourceOptions(parent=self, provider=provider),
        )
        self.namespace = ns.metadata.apply(lambda m: m["name"] if isinstance(m, dict) else m.name)
        self.target = ClusterTarget(
            provider=provider,
            namespace=self.namespace,
            gpu=args.gpu,
            cpu_node_selector=args.cpu_node_selector,
            storage_class=args.storage_class,
            ingress_class=args.ingress_class,
            addons=args.addons,
            kubeconfig=args.kubeconfig,
            context=args.context,
        )
        self.register_outputs({"namespace": self.namespace})
