"""EKS managed node groups: one CPU system group and one or more tainted NVIDIA GPU groups.

Raw ``aws.eks.NodeGroup`` (a custom resource) rather than pulumi-eks ``ManagedNodeGroup`` (a remote component):
the AMI type, taints, labels and the launch template (disk, IMDS, security groups) are then visible to unit tests
and policy packs, which only see the inputs of remote components, never the node group they create
(pulumi-practice.md §1.5).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from components.common.target import GPU_RESOURCE
from components.platform.aws.decisions import AL2023_NVIDIA, BOTTLEROCKET_NVIDIA, CPU_AMI_TYPE, needs_device_plugin

POOL_LABEL = "triton-ft.io/node-pool"
"""Every node carries its group's name under this label."""
ACCELERATOR_LABEL = "triton-ft.io/accelerator"
"""GPU nodes carry ``nvidia`` here: the selector downstream GPU workloads use."""
DEVICE_PLUGIN_LABEL = "triton-ft.io/device-plugin"
"""``helm`` on GPU nodes whose AMI needs the chart-installed device plugin (AL2023); Bottlerocket bundles it."""
SYSTEM_POOL = "system"


@dataclass(frozen=True)
class SystemNodeGroup:
    """CPU nodes for controllers, add-ons and model conversion Jobs."""

    instance_types: tuple[str, ...] = ("m6i.2xlarge",)
    """Conversion of a 6B model holds a few GiB in RAM; 8 vCPU / 32 GiB leaves room for the add-ons."""
    min_size: int = 2
    desired_size: int = 2
    max_size: int = 4
    disk_gib: int | None = None
    """Root volume; None = sized from the tools image and staged checkpoints (``node_disk_gib``)."""


@dataclass(frozen=True)
class GpuNodeGroup:
    """NVIDIA GPU nodes, tainted ``nvidia.com/gpu=true:NoSchedule`` so only GPU workloads land there."""

    name: str = "gpu"
    """Group name: a label value and part of resource names ([a-z0-9-])."""
    instance_types: tuple[str, ...] = ("g5.xlarge",)
    """x86_64 NVIDIA types; several types of the same GPU model widen the capacity pool."""
    ami_type: str = AL2023_NVIDIA
    """``AL2023_x86_64_NVIDIA`` (device plugin installed by Helm) or ``BOTTLEROCKET_x86_64_NVIDIA`` (bundled)."""
    min_size: int = 1
    desired_size: int = 1
    max_size: int = 2
    capacity_type: str = "ON_DEMAND"
    """``ON_DEMAND`` or ``SPOT``."""
    disk_gib: int | None = None
    """Root volume; None = sized from the server image and locally staged weights (``node_disk_gib``)."""
    labels: dict[str, str] = field(default_factory=dict)
    """Extra node labels."""


def gpu_labels(group: GpuNodeGroup) -> dict[str, str]:
    """Labels of a GPU group's nodes: pool, accelerator, device-plugin source, ``nvidia.com/gpu.present``."""
    labels = {
        POOL_LABEL: group.name,
        ACCELERATOR_LABEL: "nvidia",
        DEVICE_PLUGIN_LABEL: "helm" if needs_device_plugin(group.ami_type) else "bundled",
        "nvidia.com/gpu.present": "true",
        # cluster-autoscaler's GPU label on AWS: with it, a new node counts as unready until its GPUs are
        # advertised, so a slow device plugin does not trigger a second scale-up.
        "k8s.amazonaws.com/accelerator": "nvidia",
    }
    return labels | group.labels


def gpu_taints() -> list[aws.eks.NodeGroupTaintArgs]:
    return [aws.eks.NodeGroupTaintArgs(key=GPU_RESOURCE, value="true", effect="NO_SCHEDULE")]


IMDS_HOP_LIMIT = 1
"""IMDSv2 responses travel one hop: the node itself and host-network pods (the VPC CNI, the CSI drivers) reach
instance metadata, a pod on the pod network does not, so no pod can take the node role's credentials (AL2023's
default is 2, which lets every pod reach them)."""


def data_volume_device(ami_type: str) -> str:
    """The volume images and kubelet data live on: Bottlerocket keeps them on its second volume, AL2023 on root."""
    return "/dev/xvdb" if ami_type == BOTTLEROCKET_NVIDIA else "/dev/xvda"


def metadata_options() -> aws.ec2.LaunchTemplateMetadataOptionsArgs:
    """IMDSv2 only (session tokens), answered one hop away: the node and host-network pods, no other pod."""
    return aws.ec2.LaunchTemplateMetadataOptionsArgs(
        http_endpoint="enabled", http_tokens="required", http_put_response_hop_limit=IMDS_HOP_LIMIT
    )


def data_volume(ami_type: str, disk_gib: int) -> aws.ec2.LaunchTemplateBlockDeviceMappingArgs:
    """The encrypted gp3 volume images and kubelet data live on, of ``disk_gib``."""
    return aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
        device_name=data_volume_device(ami_type),
        ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(
            volume_size=disk_gib, volume_type="gp3", encrypted="true", delete_on_termination="true"
        ),
    )


def current_scaling(cluster_name: str, provider: aws.Provider, parent: pulumi.Resource) -> dict[str, CurrentScaling]:
    """The scaling EKS reports now for each node group of the cluster, by the ``Name`` tag every group here carries
    (its resource name; the group's own name has Pulumi's random suffix). Empty when the cluster does not exist yet
    (the first ``up``) or cannot be read."""
    opts = pulumi.InvokeOptions(provider=provider, parent=parent)
    try:
        names = aws.eks.get_node_groups(cluster_name=cluster_name, opts=opts).names or []
    except Exception:  # the first up: no cluster yet (ResourceNotFoundException)
        return {}
    found: dict[str, CurrentScaling] = {}
    for group_name in names:
        group = aws.eks.get_node_group(cluster_name=cluster_name, node_group_name=group_name, opts=opts)
        tag = (group.tags or {}).get("Name")
        if tag and group.scaling_configs:
            c = group.scaling_configs[0]
            found[tag] = CurrentScaling(c.min_size, c.desired_size, c.max_size)
    return found


def ami_release_parameter(ami_type: str, kubernetes_version: str) -> str:
    """The SSM public parameter holding the newest release of ``ami_type``'s AMI for a Kubernetes minor (the
    ``releaseVersion`` a managed node group takes): AWS updates it with each AMI release (kernel, containerd and
    NVIDIA driver patches, every one to three weeks)."""
    if ami_type == BOTTLEROCKET_NVIDIA:
        return f"/aws/service/bottlerocket/aws-k8s-{kubernetes_version}-nvidia/x86_64/latest/image_version"
    variant = {CPU_AMI_TYPE: "standard", AL2023_NVIDIA: "nvidia"}.get(ami_type)
    if variant is None:
        raise ValueError(f"no AMI release parameter known for ami type {ami_type!r}")
    base = f"/aws/service/eks/optimized-ami/{kubernetes_version}/amazon-linux-2023/x86_64/{variant}"
    return f"{base}/recommended/release_version"


def node_group_ignore_changes() -> list[str]:
    """An autoscaler owns ``desiredSize`` once the group exists; Pulumi must not reset it on every ``up``."""
    return ["scalingConfig.desiredSize"]


@dataclass(frozen=True)
class CurrentScaling:
    """A node group's scaling as EKS reports it now (``desiredSize`` as the autoscaler left it)."""

    min_size: int
    desired_size: int
    max_size: int


def desired_size_on_up(sizes: tuple[int, int, int], current: CurrentScaling | None) -> tuple[int, bool]:
    """(``desiredSize`` to give, whether Pulumi ignores it) for a group of ``sizes`` = (min, desired, max).

    * a new group starts at the stack's desired size; the autoscaler owns it afterwards (ignored);
    * an existing group whose limits do not change keeps the autoscaler's size (ignored);
    * when ``gpuNodesMin``/``gpuNodesMax`` change, EKS takes the new limits only with a desired size inside them
      (min <= desired <= max, else ``InvalidParameterException``), and the update sends one: the current size, moved
      into the new limits (raising min above it adds nodes; lowering max below it removes them), not the stale
      size Pulumi's state holds from the group's creation.
    """
    min_size, desired_size, max_size = sizes
    if current is None:
        return desired_size, True
    if (current.min_size, current.max_size) == (min_size, max_size) and min_size <= current.desired_size <= max_size:
        return current.desired_size, True
    return min(max(current.desired_size, min_size), max_size), False


@dataclass(frozen=True)
class NodeGroupWiring:
    """What every node group of the cluster shares: its cluster, role, subnets, security groups and parents."""

    cluster_name: pulumi.Input[str]
    node_role_arn: pulumi.Input[str]
    subnet_ids: pulumi.Input[list[str]]
    provider: aws.Provider
    parent: pulumi.Resource
    depends_on: list[pulumi.Resource]
    security_group_ids: pulumi.Input[list[str]] | None = None
    kubernetes_version: str | None = None
    """The cluster's Kubernetes minor, carried by every group: a bump of ``kubernetesVersion`` upgrades the control
    plane, then rolls each group (after the cluster, which it depends on) to the AMI of the new minor. With it, each
    group also takes the newest AMI release of that minor (:func:`ami_release_parameter`, read at every ``up``): an
    ``up`` after AWS published one rolls the group to it, one node at a time."""


def _node_group(
    resource_name: str,
    wiring: NodeGroupWiring,
    *,
    ami_type: str,
    instance_types: tuple[str, ...],
    capacity_type: str,
    disk_gib: int,
    labels: dict[str, str],
    sizes: tuple[int, int, int],
    timeouts: pulumi.CustomTimeouts,
    taints: list[aws.eks.NodeGroupTaintArgs] | None = None,
    current: CurrentScaling | None = None,
) -> aws.eks.NodeGroup:
    """One managed node group; ``sizes`` = (min, desired, max). Its launch template sets the disk, IMDS and, when
    given, the security groups (the EKS cluster security group must then be among them)."""
    min_size, _, max_size = sizes
    desired_size, keep_autoscalers_size = desired_size_on_up(sizes, current)
    release_version = None
    if wiring.kubernetes_version is not None:
        release_version = aws.ssm.get_parameter_output(
            name=ami_release_parameter(ami_type, wiring.kubernetes_version),
            opts=pulumi.InvokeOutputOptions(provider=wiring.provider, parent=wiring.parent),
        ).value
    template = aws.ec2.LaunchTemplate(
        f"{resource_name}-lt",
        update_default_version=True,
        vpc_security_group_ids=wiring.security_group_ids,
        metadata_options=metadata_options(),
        block_device_mappings=[data_volume(ami_type, disk_gib)],
        tag_specifications=[
            aws.ec2.LaunchTemplateTagSpecificationArgs(resource_type="instance", tags={"Name": resource_name})
        ],
        opts=pulumi.ResourceOptions(parent=wiring.parent, provider=wiring.provider),
    )
    return aws.eks.NodeGroup(
        resource_name,
        cluster_name=wiring.cluster_name,
        node_role_arn=wiring.node_role_arn,
        subnet_ids=wiring.subnet_ids,
        ami_type=ami_type,
        version=wiring.kubernetes_version,
        release_version=release_version,
        instance_types=list(instance_types),
        capacity_type=capacity_type,
        launch_template=aws.eks.NodeGroupLaunchTemplateArgs(id=template.id, version=template.latest_version.apply(str)),
        labels=labels,
        taints=taints,
        scaling_config=aws.eks.NodeGroupScalingConfigArgs(
            min_size=min_size, desired_size=desired_size, max_size=max_size
        ),
        # Replace one node at a time: GPU capacity is scarce, so serving never drops to zero during an AMI update.
        update_config=aws.eks.NodeGroupUpdateConfigArgs(max_unavailable=1),
        tags={"Name": resource_name},
        opts=pulumi.ResourceOptions(
            parent=wiring.parent,
            provider=wiring.provider,
            depends_on=wiring.depends_on,
            ignore_changes=node_group_ignore_changes() if keep_autoscalers_size else [],
            custom_timeouts=timeouts,
        ),
    )


def system_node_group(
    name: str,
    spec: SystemNodeGroup,
    disk_gib: int,
    wiring: NodeGroupWiring,
    current: CurrentScaling | None = None,
) -> aws.eks.NodeGroup:
    return _node_group(
        f"{name}-{SYSTEM_POOL}",
        wiring,
        ami_type=CPU_AMI_TYPE,
        instance_types=spec.instance_types,
        capacity_type="ON_DEMAND",
        disk_gib=disk_gib,
        labels={POOL_LABEL: SYSTEM_POOL},
        sizes=(spec.min_size, spec.desired_size, spec.max_size),
        timeouts=pulumi.CustomTimeouts(create="30m", update="60m", delete="30m"),
        current=current,
    )


def gpu_node_group(
    name: str, spec: GpuNodeGroup, disk_gib: int, wiring: NodeGroupWiring, current: CurrentScaling | None = None
) -> aws.eks.NodeGroup:
    return _node_group(
        f"{name}-{spec.name}",
        wiring,
        ami_type=spec.ami_type,
        instance_types=spec.instance_types,
        capacity_type=spec.capacity_type,
        disk_gib=disk_gib,
        labels=gpu_labels(spec),
        taints=gpu_taints(),
        sizes=(spec.min_size, spec.desired_size, spec.max_size),
        timeouts=pulumi.CustomTimeouts(create="40m", update="90m", delete="40m"),
        current=current,
    )
