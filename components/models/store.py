"""ModelStore: the ReadWriteMany claim that holds every model's FT checkpoint and rendered Triton repository.

Conversion Jobs (CPU nodes) write it, every Triton replica (GPU nodes) reads it, so it must be RWX: EFS on AWS
(the NVIDIA autoscaling tutorial and the DoEKS NIM path use an EFS PVC), any RWX class on an existing cluster.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.common.layout import STORE_MOUNT, dns_label, labels, object_meta
from components.common.sizing import STORE_HEADROOM, store_size_gi
from components.common.target import ClusterTarget
from tritonft.errors import UserError
from tritonft.spec import ModelSpec


@dataclass(frozen=True)
class ModelStoreArgs:
    """What the store must hold and how carefully it is kept."""

    target: ClusterTarget
    models: tuple[ModelSpec, ...]
    """Every model the stack serves; the claim is sized from their converted bytes."""
    size_gi: int | None = None
    """Explicit claim size in GiB; None = converted bytes x ``headroom``, rounded up to GiB."""
    headroom: float = STORE_HEADROOM
    """Multiplier on the converted bytes (room for a new revision next to the serving one)."""
    protect: bool = False
    """Protect the claim and retain it on ``pulumi destroy`` (prod: the models survive a teardown)."""


def claim_name(component_name: str) -> str:
    """The claim's Kubernetes name, derived from the component name."""
    return dns_label(f"{component_name}-models")


class ModelStore(pulumi.ComponentResource):
    """A ReadWriteMany PersistentVolumeClaim for the Triton model repository."""

    claim_name: pulumi.Output[str]
    """Name of the PersistentVolumeClaim (same namespace as the workloads)."""
    size: pulumi.Output[str]
    """Requested capacity, e.g. ``60Gi``."""

    mount_path: str = STORE_MOUNT
    """Where pods mount the claim."""
    k8s_name: str
    """The claim's Kubernetes name (plain, for pod specs that are built before any output resolves)."""
    claim: k8s.core.v1.PersistentVolumeClaim
    """The claim itself (for ``depends_on``)."""

    def __init__(self, name: str, args: ModelStoreArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        if args.size_gi is not None and args.size_gi < 1:
            raise UserError(f"ModelStore {name!r}: size_gi must be at least 1 (got {args.size_gi}), or None to size it")
        if not args.models and args.size_gi is None:
            raise UserError(f"ModelStore {name!r}: models is empty: give the models to size the store, or size_gi")
        if args.headroom < 1.0:
            raise UserError(f"ModelStore {name!r}: headroom must be >= 1.0 (got {args.headroom})")
        super().__init__("triton-ft:storage:ModelStore", name, {}, opts)
        size = f"{args.size_gi or store_size_gi(args.models, args.headroom)}Gi"
        self.k8s_name = claim_name(name)
        spec: Any = {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": size}}}
        if args.target.storage_class:
            spec["storageClassName"] = args.target.storage_class
        meta: Any = object_meta(
            self.k8s_name, args.target.namespace, labels("model-store", name), {"pulumi.com/skipAwait": "true"}
        )
        # A claim whose volume is still binding (WaitForFirstConsumer) must not block the deploy: skipAwait.
        self.claim = k8s.core.v1.PersistentVolumeClaim(
            f"{name}-claim",
            metadata=meta,
            spec=spec,
            opts=pulumi.ResourceOptions(
                parent=self,
                provider=args.target.provider,
                # The class this stack creates (EFS on aws) must exist first, or the claim sits Pending.
                depends_on=list(args.target.storage_ready),
                protect=args.protect,
                retain_on_delete=args.protect,
            ),
        )
        self.claim_name = self.claim.metadata.apply(lambda m: str(m["name"] if isinstance(m, dict) else m.name))
        self.size = pulumi.Output.from_input(size)
        self.register_outputs({"claim_name": self.claim_name, "size": self.size})
