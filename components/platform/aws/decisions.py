"""Pure decisions for the AWS platform: sizing, validation, naming, tags. No Pulumi resources here."""

from __future__ import annotations

import ipaddress
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from components.settings.eks import NAT_MODES
from tritonft.errors import UserError

AL2023_NVIDIA = "AL2023_x86_64_NVIDIA"
BOTTLEROCKET_NVIDIA = "BOTTLEROCKET_x86_64_NVIDIA"
GPU_AMI_TYPES = (AL2023_NVIDIA, BOTTLEROCKET_NVIDIA)
"""EKS AMI types with the NVIDIA driver. AL2023 needs the device plugin installed; Bottlerocket bundles it."""

CPU_AMI_TYPE = "AL2023_x86_64_STANDARD"

NVIDIA_X86_FAMILIES = ("g4dn", "g5", "g6", "g6e", "gr6", "p3", "p3dn", "p4d", "p4de", "p5", "p5e", "p5en", "p6")
"""x86_64 EC2 families with NVIDIA GPUs. ARM GPU families (g5g) have no AL2023 NVIDIA AMI (pulumi-eks#1526)."""

OS_RESERVE_GIB = 20
"""Root filesystem, kubelet, logs and system images on a node."""

EBS_MAX_GIB = 16384


def default_tags(project: str, stack: str, environment: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Tags put on every AWS resource through the provider's ``default_tags`` (cost allocation + ownership)."""
    tags = {
        "app.kubernetes.io/part-of": "triton-ft",
        "pulumi:project": project,
        "pulumi:stack": stack,
        "environment": environment,
        "managed-by": "pulumi",
    }
    return tags | dict(extra or {})


def is_prod(environment: str) -> bool:
    """Production stacks protect data and refuse force-deletes."""
    return environment.lower() in {"prod", "production"}


def storage_protected(environment: str, override: bool | None) -> bool:
    """Whether the model store survives ``pulumi destroy``: prod by default, ``override`` wins when set."""
    return is_prod(environment) if override is None else override


def efs_reclaim_policy(protected: bool) -> str:
    """StorageClass reclaim policy: keep the access point (and its data) when the store is protected."""
    return "Retain" if protected else "Delete"


def instance_family(instance_type: str) -> str:
    return instance_type.split(".", 1)[0]


def validate_gpu_instance_types(group: str, instance_types: Iterable[str]) -> list[str]:
    """Problems with a GPU node group's instance types (empty list = fine)."""
    types = list(instance_types)
    if not types:
        return [f"gpuNodeGroups.{group}.instanceTypes: empty; give at least one NVIDIA type such as g5.xlarge"]
    problems = []
    for t in types:
        if not re.fullmatch(r"[a-z0-9]+\.[a-z0-9]+", t):
            problems.append(f"gpuNodeGroups.{group}.instanceTypes: '{t}' is not an EC2 instance type (e.g. g5.xlarge)")
        elif instance_family(t) not in NVIDIA_X86_FAMILIES:
            problems.append(
                f"gpuNodeGroups.{group}.instanceTypes: '{t}' is not an x86_64 NVIDIA GPU type; "
                f"use one of the families {', '.join(NVIDIA_X86_FAMILIES)}"
            )
    return problems


def validate_scaling(where: str, min_size: int, desired_size: int, max_size: int) -> list[str]:
    """Problems with a node group's scaling limits: 0 <= min <= desired <= max, max >= 1."""
    if max_size < 1:
        return [f"{where}.maxSize: {max_size}; must be at least 1"]
    if not 0 <= min_size <= desired_size <= max_size:
        return [
            f"{where}: need 0 <= minSize ({min_size}) <= desiredSize ({desired_size}) <= maxSize ({max_size}); "
            "adjust the limits"
        ]
    return []


def validate_ami_type(group: str, ami_type: str) -> list[str]:
    if ami_type not in GPU_AMI_TYPES:
        allowed = ", ".join(GPU_AMI_TYPES)
        return [f"gpuNodeGroups.{group}.amiType: '{ami_type}' has no NVIDIA driver; use one of {allowed}"]
    return []


def needs_device_plugin(ami_type: str) -> bool:
    """AL2023 NVIDIA AMIs need the NVIDIA device plugin installed; Bottlerocket NVIDIA ships it (EKS user guide)."""
    return ami_type == AL2023_NVIDIA


def node_disk_gib(image_gib: float, local_weights_gib: float) -> int:
    """Root volume for a node: OS reserve + every image twice (compressed layers + unpacked snapshot) + weights
    staged locally with 25 % headroom, rounded up to 10 GiB."""
    if image_gib < 0 or local_weights_gib < 0:
        raise UserError(f"disk sizing: image_gib={image_gib} and local_weights_gib={local_weights_gib} must be >= 0")
    raw = OS_RESERVE_GIB + 2 * image_gib + 1.25 * local_weights_gib
    size = int(math.ceil(raw / 10.0) * 10)
    if size > EBS_MAX_GIB:
        raise UserError(
            f"disk sizing: {size} GiB exceeds the EBS limit of {EBS_MAX_GIB} GiB; "
            "keep weights on the EFS model store instead of staging them on the node"
        )
    return size


def subnet_cidrs(vpc_cidr: str, az_count: int) -> tuple[list[str], list[str]]:
    """(private, public) subnet CIDRs: the VPC is cut into 8 equal blocks; private get the first ``az_count``
    (large, where nodes and pods live), public the blocks from the 5th on (load balancers, NAT)."""
    try:
        network = ipaddress.ip_network(vpc_cidr)
    except ValueError as exc:
        raise UserError(f"network.vpcCidr: '{vpc_cidr}' is not a CIDR block ({exc}); e.g. 10.0.0.0/16") from exc
    if not 2 <= az_count <= 4:
        raise UserError(f"network.azCount: {az_count}; EKS needs at least 2 availability zones, at most 4 are used")
    if network.prefixlen > 21:
        raise UserError(f"network.vpcCidr: /{network.prefixlen} is too small for node + pod IPs; use /16 to /21")
    blocks = [str(b) for b in network.subnets(prefixlen_diff=3)]
    return blocks[:az_count], blocks[4 : 4 + az_count]


def cluster_physical_name(project: str, stack: str) -> str:
    """EKS cluster name (unique per account + region; 1-100 chars of [A-Za-z0-9_-], starting alphanumeric)."""
    raw = re.sub(r"[^A-Za-z0-9_-]+", "-", f"{project}-{stack}").strip("-_")
    return raw[:100] or "triton-ft"


# -- GPU quota ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GpuQuota:
    """The Service Quotas entry that bounds a GPU node group's vCPUs."""

    code: str
    name: str


_GPU_QUOTAS = {
    ("G", "ON_DEMAND"): GpuQuota("L-DB2E81BA", "Running On-Demand G and VT instances"),
    ("P", "ON_DEMAND"): GpuQuota("L-417A185B", "Running On-Demand P instances"),
    ("G", "SPOT"): GpuQuota("L-3819A6DF", "All G and VT Spot Instance Requests"),
    ("P", "SPOT"): GpuQuota("L-7212CCBC", "All P Spot Instance Requests"),
}
_SIZE = re.compile(r"^(\d*)xlarge$")
_METAL_VCPUS = {"g4dn.metal": 96, "g5.metal": 192}


def gpu_quota(instance_type: str, capacity_type: str) -> GpuQuota:
    """Which EC2 vCPU quota a GPU instance type counts against (g* families: G and VT; p*: P)."""
    group = "P" if instance_family(instance_type).startswith("p") else "G"
    return _GPU_QUOTAS[(group, capacity_type)]


def instance_vcpus(instance_type: str) -> int:
    """vCPUs of an x86 EC2 type from its size (``xlarge`` 4, ``Nxlarge`` 4N): true for every NVIDIA family here."""
    if instance_type in _METAL_VCPUS:
        return _METAL_VCPUS[instance_type]
    size = instance_type.split(".", 1)[1] if "." in instance_type else ""
    match = _SIZE.match(size)
    if match is None:
        raise UserError(f"gpuInstanceType: cannot tell the vCPUs of {instance_type!r} (an `Nxlarge` size is expected)")
    return 4 * int(match.group(1) or 1)


@dataclass(frozen=True)
class QuotaGroup:
    """What a GPU node group can run at once, for the quota check."""

    name: str
    instance_types: tuple[str, ...]
    capacity_type: str
    desired_size: int
    max_size: int
    zones: int
    """Availability zones its subnets span."""
    max_unavailable: int = 1
    """Its ``updateConfig.maxUnavailable``."""

    @property
    def vcpus(self) -> int:
        """vCPUs of its first instance type: on-demand groups launch it first, the others only when a zone is out
        of it (a fallback node with more vCPUs takes more of the quota, and fails to launch past it: the fallback
        then helps less, nothing fails that would not have failed without it)."""
        return instance_vcpus(self.instance_types[0])

    @property
    def surge(self) -> int:
        """Nodes a managed node group update (an AMI release, a version bump) adds before it drains any: EKS raises
        the Auto Scaling group's maximum and desired size by the larger of twice its zones and ``maxUnavailable``."""
        return max(2 * self.zones, self.max_unavailable)

    @property
    def peak_nodes(self) -> int:
        """The most nodes it runs at once on day two: at ``maxSize`` while an update surges, or while a change that
        replaces the group (instance types, capacity type, AMI type) creates the new one at ``desiredSize`` beside
        the old one, before deleting it."""
        return self.max_size + max(self.surge, self.desired_size)


def quota_problems(groups: Iterable[QuotaGroup], quota_values: Mapping[str, float | None], region: str) -> list[str]:
    """Refusals for GPU node groups whose day-two peak (:attr:`QuotaGroup.peak_nodes`) does not fit the account's
    vCPU quota in ``region``.

    ``quota_values``: quota code -> the value Service Quotas returned (None = not readable). Every group counting
    against one quota is summed.
    """
    needed: dict[str, int] = {}
    at_max: dict[str, int] = {}
    parts: dict[str, list[str]] = {}
    for g in groups:
        quota = gpu_quota(g.instance_types[0], g.capacity_type)
        needed[quota.code] = needed.get(quota.code, 0) + g.peak_nodes * g.vcpus
        at_max[quota.code] = at_max.get(quota.code, 0) + g.max_size * g.vcpus
        parts.setdefault(quota.code, []).append(
            f"{g.name}: {g.peak_nodes} x {'/'.join(g.instance_types)} ({g.vcpus} vCPUs each) = maxSize {g.max_size} "
            f"+ {max(g.surge, g.desired_size)}"
        )
    problems = []
    for code, need in sorted(needed.items()):
        value = quota_values.get(code)
        if value is None or value >= need:
            continue
        quota = next(q for q in _GPU_QUOTAS.values() if q.code == code)
        problems.append(
            f"gpuNodesMax: the GPU node groups need {need} vCPUs of the EC2 quota '{quota.name}' ({code}) in "
            f"{region} ({'; '.join(parts[code])}), the account has {value:g}. gpuNodesMax alone takes {at_max[code]}; "
            "the rest is day two: a node group update (each AMI release, a version bump) first adds up to twice its "
            "zones' count of nodes, and a change of instance type creates the new group at gpuNodesDesired beside "
            "the old one, and either fails when the quota cannot hold it. Ask for "
            f"{need} in Service Quotas (aws service-quotas request-service-quota-increase --service-code ec2 "
            f"--quota-code {code} --desired-value {need} --region {region}), or lower gpuNodesMax; other running "
            "instances of these families count against the same quota"
        )
    return problems


# -- network --------------------------------------------------------------------------------------------------------


def nat_gateway_count(mode: str, zones: int) -> int:
    """``per-zone``: one NAT gateway per zone (a zone's loss stops no other zone's egress); ``single``: one."""
    if mode not in NAT_MODES:
        raise UserError(f"natGateways: {mode!r}; use one of {', '.join(NAT_MODES)}")
    return zones if mode == "per-zone" else 1


def default_nat_mode(environment: str) -> str:
    """prod: a NAT gateway per zone; elsewhere one (a zone outage there is tolerable, ~$33 a month saved each)."""
    return "per-zone" if is_prod(environment) else "single"


def zone_filters() -> list[tuple[str, list[str]]]:
    """(filter, values): only the region's standard zones, so an opted-in Local or Wavelength Zone never shifts the
    zone list (and with it every subnet, node group and mount target indexed by it)."""
    return [("opt-in-status", ["opt-in-not-required"]), ("zone-type", ["availability-zone"])]


def vpc_cni_configuration() -> dict[str, object]:
    """The VPC CNI add-on's configuration: its network-policy agent on. EKS's network-policy controller (on the
    control plane) turns each NetworkPolicy into PolicyEndpoints; the agent in every ``aws-node`` pod enforces them
    with eBPF programs on the pods' interfaces. Off, NetworkPolicies are stored and ignored."""
    return {"enableNetworkPolicy": "true"}


# -- cluster access -------------------------------------------------------------------------------------------------

_ASSUMED_ROLE = re.compile(r"^arn:(?P<partition>[^:]+):sts::(?P<account>\d+):assumed-role/(?P<role>[^/]+)/[^/]+$")


def principal_of(caller_arn: str) -> str:
    """The IAM principal an access entry names for ``sts get-caller-identity``'s ARN: an assumed role's session
    ARN (``arn:aws:sts::ACCOUNT:assumed-role/ROLE/SESSION``) is the role ``arn:aws:iam::ACCOUNT:role/ROLE``; a
    user's ARN is itself. (A role with a path is named without it in the session ARN: matched on its name.)"""
    match = _ASSUMED_ROLE.match(caller_arn)
    if match is None:
        return caller_arn
    return f"arn:{match['partition']}:iam::{match['account']}:role/{match['role']}"


def creator_admin_problems(caller_arn: str, admin_principal_arns: Iterable[str]) -> list[str]:
    """Refusals for ``adminPrincipalArns`` listing the identity that runs ``up``: EKS already gives the cluster's
    creator an admin access entry, so creating a second one fails with ``ResourceInUseException`` after the
    cluster's 10-15 minutes."""
    creator = principal_of(caller_arn)
    creator_role = creator.rsplit("/", 1)[-1] if ":role/" in creator else None
    problems = []
    for i, arn in enumerate(admin_principal_arns):
        same_role = creator_role is not None and ":role/" in arn and arn.rsplit("/", 1)[-1] == creator_role
        if arn == creator or (same_role and arn.split(":")[4] == creator.split(":")[4]):
            problems.append(
                f"adminPrincipalArns[{i}]: {arn!r} is the identity running this `up` ({caller_arn}), which EKS makes "
                "the cluster's admin itself (the creator's access entry): a second entry for it fails with "
                "ResourceInUseException once the cluster exists; remove it from adminPrincipalArns (list CI's deploy "
                "role when an operator creates the cluster, and the operators when CI does)"
            )
    return problems
