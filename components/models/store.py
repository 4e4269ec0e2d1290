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

ELASTIC_NOMINAL_GI = 100
"""What an elastic store's claim requests when no size is set. EFS ignores the number (a file system grows and is
billed by the bytes stored), but a claim must request something."""
DEFAULT_CAPACITY_GI = 100
"""The claim's size on a capacity-bound class when no size is set; the models must fit in it (checked)."""


@dataclass(frozen=True)
class ModelStoreArgs:
    """What the store must hold and how carefully it is kept."""

    target: ClusterTarget
    models: tuple[ModelSpec, ...]
    """Every model the stack serves; on a capacity-bound class they must fit in the claim (checked, never sized
    from: a new model must not change the claim, see :func:`claim_size_gi`)."""
    size_gi: int | None = None
    """Explicit claim size in GiB; None = :data:`ELASTIC_NOMINAL_GI` / :data:`DEFAULT_CAPACITY_GI`."""
    headroom: float = STORE_HEADROOM
    """Multiplier on the converted bytes (room for a new revision next to the serving one)."""
    protect: bool = False
    """Protect the claim and retain it on ``pulumi destroy`` (prod: the models survive a teardown)."""
    elastic: bool = False
    """The class ignores the requested size (EFS): the size is nominal, never checked, never patched."""
    owned_subpaths: bool = False
    """Every directory the volume gets is owned by the workloads' user, one the kubelet creates for a missing
    ``subPath`` too (the stack's EFS class: its access points fix uid/gid). Then each conversion Job mounts only its
    own model's directories writable (:func:`components.models.conversion_spec.writable_dirs`)."""


def claim_size_gi(size_gi: int | None, *, elastic: bool) -> int:
    """The claim's requested size: the stack's setting, else a fixed default; never a function of the models.

    The Kubernetes provider patches a claim whose ``spec.resources.requests`` changes (it replaces one only for
    access modes, selector, class or volume name), and the API server refuses to grow a claim whose class does not
    set ``allowVolumeExpansion``: a size computed from the models would turn every new or larger model into a
    failed ``up``. A resize is a deliberate change of ``storageSizeGiB`` (docs/day2.md).
    """
    if size_gi is not None:
        return size_gi
    return ELASTIC_NOMINAL_GI if elastic else DEFAULT_CAPACITY_GI


def capacity_problem(models: tuple[ModelSpec, ...], headroom: float, size_gi: int, *, elastic: bool) -> str | None:
    """Why the models do not fit a capacity-bound claim of ``size_gi`` GiB (None: they fit, or the store is
    elastic). The need is the converted bytes x ``headroom`` (room for a new revision next to the serving one)."""
    if elastic or not models:
        return None
    need = store_size_gi(models, headroom)
    if need <= size_gi:
        return None
    return (
        f"storageSizeGiB: the models need {need} GiB (converted bytes x {headroom:g} headroom) but the model store "
        f"holds {size_gi} GiB; set storageSizeGiB to at least {need} (growing an existing claim needs a storage "
        f"class with allowVolumeExpansion: see docs/day2.md), or lower storageHeadroomPercent"
    )


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
    owned_subpaths: bool
    """:attr:`ModelStoreArgs.owned_subpaths`."""

    def __init__(self, name: str, args: ModelStoreArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        if args.size_gi is not None and args.size_gi < 1:
            raise UserError(f"ModelStore {name!r}: size_gi must be at least 1 (got {args.size_gi}), or None to size it")
        if args.headroom < 1.0:
            raise UserError(f"ModelStore {name!r}: headroom must be >= 1.0 (got {args.headroom})")
        size_gi = claim_size_gi(args.size_gi, elastic=args.elastic)
        if problem := capacity_problem(args.models, args.headroom, size_gi, elastic=args.elastic):
            raise UserError(f"ModelStore {name!r}: {problem}")
        super().__init__("triton-ft:storage:ModelStore", name, {}, opts)
        size = f"{size_gi}Gi"
        self.k8s_name = claim_name(name)
        self.owned_subpaths = args.owned_subpaths
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
                # An elastic store's size means nothing, so it is never patched: a claim an older version sized
                # from the models keeps its number instead of failing the next `up` on a non-expandable class.
                ignore_changes=["spec.resources.requests.storage"] if args.elastic else None,
            ),
        )
        self.claim_name = self.claim.metadata.apply(lambda m: str(m["name"] if isinstance(m, dict) else m.name))
        self.size = pulumi.Output.from_input(size)
        self.register_outputs({"claim_name": self.claim_name, "size": self.size})
