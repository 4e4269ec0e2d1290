"""Pure mappings from validated :class:`Settings` to each component's typed ``*Args``.

``__main__`` stays a composition root: it calls these and passes the results on. Keeping the mapping here makes
it testable without running a program.
"""

from __future__ import annotations

import pulumi_aws as aws

from components.aws.addons import AddonFlags
from components.aws.decisions import AL2023_NVIDIA, BOTTLEROCKET_NVIDIA
from components.aws.network import ExistingVpc, NewVpc
from components.aws.nodegroups import GpuNodeGroup, SystemNodeGroup
from components.cluster import ExistingClusterArgs, GpuScheduling
from components.image import ImageBuild, TritonImageArgs
from components.platform_aws import AwsPlatformArgs
from components.settings.gpus import GIB
from components.settings.model import Settings

AMI_TYPES = {"al2023": AL2023_NVIDIA, "bottlerocket": BOTTLEROCKET_NVIDIA}
CAPACITY_TYPES = {"on-demand": "ON_DEMAND", "spot": "SPOT"}


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


def addon_flags(addons: frozenset[str]) -> AddonFlags:
    """Exactly the add-ons the stack lists (none implied)."""
    return AddonFlags(
        ingress_nginx="ingress-nginx" in addons,
        cert_manager="cert-manager" in addons,
        kube_prometheus_stack="kube-prometheus-stack" in addons,
        prometheus_adapter="prometheus-adapter" in addons,
        keda="keda" in addons,
    )


def aws_platform_args(settings: Settings) -> AwsPlatformArgs:
    cluster = settings.cluster
    aws_settings = cluster.aws
    assert aws_settings is not None, "aws_platform_args needs platform aws"
    vpc: NewVpc | ExistingVpc = (
        ExistingVpc(aws_settings.vpc_id, aws_settings.subnet_ids, aws_settings.public_subnet_ids)
        if aws_settings.vpc_id
        else NewVpc(cidr=aws_settings.vpc_cidr)
    )
    largest_model_gib = max((m.weight_bytes for m in settings.models), default=0) / GIB
    return AwsPlatformArgs(
        region=aws_settings.region,
        environment=settings.environment,
        namespace=settings.namespace,
        cluster_name=f"{settings.project}-{settings.stack}",
        kubernetes_version=aws_settings.kubernetes_version,
        vpc=vpc,
        system_nodes=SystemNodeGroup(
            instance_types=(aws_settings.system_instance_type,),
            min_size=aws_settings.system_nodes_min,
            desired_size=aws_settings.system_nodes_min,
            max_size=aws_settings.system_nodes_max,
        ),
        gpu_node_groups=(
            GpuNodeGroup(
                name="gpu",
                instance_types=(cluster.gpu_node.name,),
                ami_type=AMI_TYPES[aws_settings.gpu_ami],
                min_size=aws_settings.gpu_nodes_min,
                desired_size=aws_settings.gpu_nodes_desired,
                max_size=aws_settings.gpu_nodes_max,
                capacity_type=CAPACITY_TYPES[aws_settings.gpu_capacity_type],
                disk_gib=aws_settings.gpu_node_disk_gib,
            ),
        ),
        model_weights_gib=round(largest_model_gib, 1),
        addons=addon_flags(cluster.addons),
        ingress_class=cluster.ingress_class,
        storage_class_name=cluster.storage_class or "triton-ft-efs",
        protect_model_store=settings.storage.protect,
        tags={"triton-ft/stack": settings.stack, "triton-ft/environment": settings.environment},
    )


def triton_image_args(settings: Settings, aws_provider: aws.Provider | None) -> TritonImageArgs:
    image = settings.image
    registry = settings.cluster.kubernetes.image_registry if settings.cluster.kubernetes else None
    return TritonImageArgs(
        environment=settings.environment,
        aws_provider=aws_provider,
        registry=registry,
        repository_prefix=f"{settings.project}/{settings.stack}",
        build=ImageBuild(
            triton_version=image.triton_version,
            ft_backend_commit=image.ft_backend_commit,
            ft_commit=image.ft_commit,
            cuda_archs=image.cuda_archs,
        ),
        server_prebuilt=image.server_image,
        tools_prebuilt=image.tools_image,
    )
