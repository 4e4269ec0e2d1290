"""What a stack asks of its cluster, as ``tritonft preflight`` checks it: selectors and tolerations exactly as the
program sets them, each model's shape, the storage and ingress classes, the CRDs and metrics APIs its features need.

Composition, like :mod:`components.args`: it reads the validated settings with the same functions ``pulumi up`` runs,
and hands the runtime's checks (:mod:`tritonft.preflight.checks`) plain :class:`~tritonft.preflight.checks.Needs`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from components.args import autoscaler_kind, edge_hosts, gateway_autoscales, gpu_scheduling
from components.common.sizing import server_sizing
from components.models.conversion_spec import HF_TOKEN_KEY
from components.settings.capacity import gpu_pool
from components.settings.model import Settings
from components.settings.stack_file import settings_from_stack_file
from tritonft.preflight.checks import (
    CRD_FOR_ADDON,
    CUSTOM_METRICS_API,
    RESOURCE_METRICS_API,
    CpuModel,
    Needs,
    TokenSecret,
)
from tritonft.spec import ModelSpec


@dataclass(frozen=True)
class StackNeeds:
    """A stack's needs and the cluster it names (its kubeconfig and context; None: the caller's default)."""

    needs: Needs
    kubeconfig: str | None
    context: str | None
    builds_cluster: bool = False
    """Platform ``aws``: the cluster is the one the stack's own ``up`` builds (its ``kubeconfig`` stack output)."""


def stack_needs(project_dir: Path, stack: str, assume_secrets: tuple[str, ...] = ()) -> StackNeeds:
    """The needs of ``stacks/Pulumi.<stack>.yaml`` (validated as ``pulumi up`` validates it; ``assume_secrets`` as
    :func:`components.settings.stack_file.settings_from_stack_file` takes them)."""
    settings = settings_from_stack_file(project_dir, stack, assume_secrets)
    k8s = settings.cluster.kubernetes
    return StackNeeds(
        needs_of(settings),
        k8s.kubeconfig if k8s else None,
        k8s.context if k8s else None,
        builds_cluster=settings.cluster.platform == "aws",
    )


def needs_of(settings: Settings) -> Needs:
    """What the stack's settings ask of the cluster (selectors and tolerations exactly as the program sets them)."""
    cluster = settings.cluster
    if cluster.platform == "aws":
        # imported only here: the aws platform loads pulumi_aws, seconds that an existing cluster's check never needs
        from components.platform.aws.platform import gpu_scheduling as aws_gpu_scheduling

        gpu = aws_gpu_scheduling()
    else:
        gpu = gpu_scheduling(settings)
    on_aws = cluster.platform == "aws"
    wanted: list[str] = []
    if settings.serving.monitoring:
        wanted.append("kube-prometheus-stack")
    if settings.serving.ingress.tls_issuer:
        wanted.append("cert-manager")
    if settings.serving.autoscaling.scale_to_zero:
        wanted.append("keda")
    ingress = settings.serving.ingress
    if ingress.edge == "gateway":
        wanted.append("gateway-api")
        if ingress.auth == "apiKey":
            wanted.append("envoy-gateway")
    installed = cluster.addons | ({"gateway-api"} if "envoy-gateway" in cluster.addons else set())
    crds = [crd for addon in wanted if addon not in installed for crd in CRD_FOR_ADDON[addon]]
    apis: list[tuple[str, str]] = []
    if autoscaler_kind(settings) == "hpa" and not (on_aws and "prometheus-adapter" in cluster.addons):
        apis.append(
            (
                CUSTOM_METRICS_API,
                "the Triton HPAs read the queue:compute ratio through it: run prometheus-adapter serving "
                "triton_queue_compute_ratio (README: Autoscaling signal), or set autoscaling: false",
            )
        )
    if gateway_autoscales(settings) and not on_aws:  # the aws platform installs metrics-server itself
        apis.append(
            (
                RESOURCE_METRICS_API,
                "the gateway's HPA scales on CPU through it: run metrics-server, or set gatewayReplicasMax to "
                "gatewayReplicasMin",
            )
        )
    return Needs(
        gpu_selector=dict(gpu.node_selector),
        tolerations=[dict(t) for t in gpu.tolerations],
        models=[(m.name, m.gpus) for m in settings.models if not m.on_cpu],
        storage_class=cluster.storage_class,
        stack_storage_class=on_aws,
        ingress_class=cluster.ingress_class,
        stack_ingress_class="ingress-nginx" in cluster.addons,
        crds=crds,
        metrics_apis=apis,
        gpu_pool=gpu_pool(cluster),
        cpu_selector=dict(cluster.cpu_node_selector),
        cpu_models=[cpu_model(m) for m in settings.models if m.on_cpu],
        edge=ingress.edge,
        gateway=(ingress.gateway_namespace or settings.namespace, ingress.gateway_name)
        if ingress.gateway_name
        else None,
        hosts=list(edge_hosts(settings)),
        namespace=settings.namespace,
        token_secrets=[TokenSecret(model, secret, HF_TOKEN_KEY) for model, secret in settings.token_secrets.items()],
    )


def cpu_model(model: ModelSpec) -> CpuModel:
    """What one replica of a ``device: cpu`` model requests (the Triton pod's own sizing)."""
    sized = server_sizing(model)
    return CpuModel(model.name, cpu=sized.cpu_request, memory=sized.memory_request)
