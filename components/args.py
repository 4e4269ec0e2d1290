"""Pure mappings from validated :class:`Settings` to each component's typed ``*Args``.

``__main__`` stays a composition root: it calls these and passes the results on. Keeping the mapping here makes
it testable without running a program.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from datetime import date
from pathlib import Path

import pulumi
import pulumi_aws as aws

from components.common.edge import (
    API_LISTENER,
    AcmeIssuer,
    EdgeArgs,
    GatewayRef,
    exposes_triton,
    gateway_http01_solver,
    ingress_http01_solver,
    model_listener,
)
from components.common.exposure import PROBE_CLIENT, EdgeObjects, EdgeObjectsArgs
from components.common.handoffs import ModelVolume
from components.common.ingress import IngressArgs
from components.common.layout import STORE_MOUNT, dns_label
from components.common.sizing import MIB
from components.common.target import ClusterTarget, GpuScheduling
from components.gateway import GatewayArgs, GatewayBackend
from components.gateway.spec import (
    gateway_drain,
    gateway_selector,
    in_flight_per_client,
    longest_deadline_seconds,
    model_deadline_seconds,
)
from components.models.conversion import ModelConversion, ModelConversionArgs
from components.models.store import ModelStore, ModelStoreArgs
from components.platform.aws.addons import AddonFlags
from components.platform.aws.charts import NLB_ANNOTATIONS
from components.platform.aws.decisions import AL2023_NVIDIA, BOTTLEROCKET_NVIDIA
from components.platform.aws.dns import GATEWAY_SOURCES, INGRESS_SOURCES, EdgeDns
from components.platform.aws.network import ExistingVpc, NewVpc
from components.platform.aws.nodegroups import GpuNodeGroup, SystemNodeGroup
from components.platform.aws.platform import AwsPlatformArgs
from components.platform.cluster import ExistingClusterArgs
from components.platform.compile_identity import image_compile_identity
from components.platform.image import ImageBuild, TritonImageArgs
from components.platform.signals import EdgeProbe
from components.probe import IntegrationProbeArgs, probe_settings
from components.probe.in_cluster import InClusterJudgeArgs
from components.serving.gemm_tuning import GemmTuning
from components.serving.judge_job import CHECKPOINT_MOUNT, judge_job_manifest, judge_job_name
from components.serving.promotion import VERSION_LABEL, Candidate
from components.serving.server_spec import triton_drain
from components.serving.service import Autoscaler, TritonService, TritonServiceArgs
from components.settings import eks
from components.settings.alerting import alert_routing
from components.settings.api_keys import ApiKey, client_keys, live_keys
from components.settings.capacity import (
    ModelShape,
    Rollout,
    capacity_pool,
    fixed_rollout,
    gpu_pool,
    model_shapes,
    rollout_for,
    surging_models,
)
from components.settings.catalog import hub_token_needed
from components.settings.gpus import AWS_GPU_INSTANCES, GIB
from components.settings.load import AWS_EFS_STORAGE_CLASS
from components.settings.model import Settings
from tritonft.convert.writer import CONVERTER_VERSION
from tritonft.encoder.convert import CONVERTER_VERSION as ENCODER_CONVERTER_VERSION
from tritonft.engines import FASTERTRANSFORMER, engine_for
from tritonft.engines.vllm.engine import model_path as vllm_model_path
from tritonft.engines.vllm.versions import VLLM_VERSION
from tritonft.probe.endpoint import Protocol
from tritonft.probe.judge_reference import has_reference
from tritonft.quantity import quantity_value as exact_quantity
from tritonft.rollout.verdict import NodeGrowth
from tritonft.spec import ModelSpec

PROBE_AUTH_ENV = "TRITONFT_PROBE_AUTHORIZATION"
"""Environment variable holding the ``Authorization`` header the probe sends through an authenticated ingress."""
ADDON_CAPABILITIES = {"kube-prometheus-stack": "prometheus-operator"}
"""Stack add-on names -> the capability names components check (``ClusterTarget.addons``)."""

AMI_TYPES = {"al2023": AL2023_NVIDIA, "bottlerocket": BOTTLEROCKET_NVIDIA}
CAPACITY_TYPES = {"on-demand": "ON_DEMAND", "spot": "SPOT"}


def gpu_scheduling(settings: Settings) -> GpuScheduling:
    cluster = settings.cluster
    return GpuScheduling(node_selector=dict(cluster.gpu_node_selector), tolerations=cluster.gpu_tolerations)


def edge_dns(settings: Settings) -> EdgeDns | None:
    """external-dns in the stack's zone for its hosts, the stack its owner (``<project>-<stack>``)."""
    ingress = settings.serving.ingress
    if not ingress.dns_zone:
        return None
    return EdgeDns(
        zone=ingress.dns_zone,
        domain=ingress.host,
        owner=f"{settings.project}-{settings.stack}",
        sources=GATEWAY_SOURCES if uses_gateway_api(settings) else INGRESS_SOURCES,
    )


def edge_hosts(settings: Settings) -> dict[str, str]:
    """Every public host of the stack and how its name resolves (the ``edgeHosts`` output)."""
    ingress = settings.serving.ingress
    hosts = [
        *([ingress.host] if settings.serving.gateway.enabled else []),
        *(model_host(settings, m) for m in exposed_models(settings)),
    ]
    if ingress.dns_zone:
        edge = f"Gateway {edge_gateway(settings).name}" if uses_gateway_api(settings) else "the Ingress controller"
        path = f"Route53 zone {ingress.dns_zone}: record kept by external-dns, pointing at {edge}'s load balancer"
    else:
        path = "not managed by the stack: point it at the cluster's edge yourself (existing cluster)"
    return dict.fromkeys(hosts, path)


EDGE_REFUSAL = {"apiKey": 401, "basic": 401, "oidc": 302}
"""What the edge answers a client without credentials, per ``ingressAuth`` (OIDC redirects to its sign-in)."""


def edge_probes(settings: Settings) -> tuple[EdgeProbe, ...]:
    """Each public HTTPS host as the blackbox exporter probes it: the gateway's host at ``/v1/models``, a model's
    own host at Triton's ``/v2/health/ready``, expecting the edge's refusal of a request without credentials (200
    with ``ingressAuth: none``). None on a plain-HTTP edge (a local cluster)."""
    ingress = settings.serving.ingress
    if not ingress.tls:
        return ()
    status = EDGE_REFUSAL.get(ingress.auth, 200)
    gateway = [EdgeProbe(ingress.host, "/v1/models", status)] if settings.serving.gateway.enabled else []
    hosts = set(edge_hosts(settings)) - {ingress.host}
    models = [EdgeProbe(host, "/v2/health/ready", status) for host in sorted(hosts)]
    return (*gateway, *models)


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
        addons=frozenset(ADDON_CAPABILITIES.get(a, a) for a in cluster.available_addons),
    )


def addon_flags(
    addons: frozenset[str], *, metrics_server: bool = False, rate_limit_redis: str | None = None
) -> AddonFlags:
    """The add-ons the stack lists, plus metrics-server when a feature needs it (``metrics_server``), and the Redis
    of the edge's global rate limit (``rateLimitRedis``)."""
    return AddonFlags(
        envoy_gateway="envoy-gateway" in addons,
        ingress_nginx="ingress-nginx" in addons,
        cert_manager="cert-manager" in addons,
        kube_prometheus_stack="kube-prometheus-stack" in addons,
        prometheus_adapter="prometheus-adapter" in addons,
        keda="keda" in addons,
        metrics_server=metrics_server,
        dcgm_exporter="kube-prometheus-stack" in addons,
        rate_limit_redis=rate_limit_redis,
    )


def gateway_autoscales(settings: Settings) -> bool:
    """The gateway gets an HPA on CPU (it reads the resource metrics API, ``metrics.k8s.io``)."""
    gateway = settings.serving.gateway
    return gateway.enabled and gateway.replicas_max > gateway.replicas_min


def aws_platform_args(settings: Settings) -> AwsPlatformArgs:
    cluster = settings.cluster
    aws_settings = cluster.aws
    assert aws_settings is not None, "aws_platform_args needs platform aws"
    vpc: NewVpc | ExistingVpc = (
        ExistingVpc(aws_settings.vpc_id, aws_settings.subnet_ids, aws_settings.public_subnet_ids)
        if aws_settings.vpc_id
        else NewVpc(cidr=aws_settings.vpc_cidr, nat=aws_settings.nat_gateways, endpoints=aws_settings.vpc_endpoints)
    )
    largest_model_gib = max((m.weight_bytes for m in settings.models), default=0) / GIB
    return AwsPlatformArgs(
        region=aws_settings.region,
        environment=settings.environment,
        namespace=settings.namespace,
        cluster_name=f"{settings.project}-{settings.stack}",
        kubernetes_version=aws_settings.kubernetes_version,
        eks_support=aws_settings.eks_support,
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
                instance_types=(cluster.gpu_node.name, *aws_settings.gpu_fallback_instance_types),
                ami_type=AMI_TYPES[aws_settings.gpu_ami],
                min_size=aws_settings.gpu_nodes_min,
                desired_size=aws_settings.gpu_nodes_desired,
                max_size=aws_settings.gpu_nodes_max,
                capacity_type=CAPACITY_TYPES[aws_settings.gpu_capacity_type],
                disk_gib=aws_settings.gpu_node_disk_gib,
            ),
        ),
        model_weights_gib=round(largest_model_gib, 1),
        longest_pod_grace_seconds=longest_pod_grace_seconds(settings),
        addons=addon_flags(
            cluster.addons,
            metrics_server=gateway_autoscales(settings),
            rate_limit_redis=settings.serving.ingress.rate_limit_redis,
        ),
        dns=edge_dns(settings),
        ingress_class=cluster.ingress_class,
        storage_class_name=cluster.storage_class or AWS_EFS_STORAGE_CLASS,
        protect_model_store=settings.storage.protect,
        kms_key_arn=aws_settings.kms_key_arn,
        tags={"triton-ft/stack": settings.stack, "triton-ft/environment": settings.environment},
        admin_role_arns=aws_settings.admin_principal_arns,
        public_access_cidrs=aws_settings.api_public_access_cidrs,
        private_endpoint_only=aws_settings.api_endpoint == "private",
        control_plane_log_retention_days=aws_settings.control_plane_log_retention_days,
        ship_logs=settings.environment in ("staging", "prod"),
        protect_infrastructure=aws_settings.protect_infrastructure,
        node_ssm_access=aws_settings.node_ssm_access,
        gpu_quota_check=aws_settings.gpu_quota_check,
        system_runs_server_image=any(m.on_cpu for m in settings.models),
        alert_receivers=aws_settings.alert_receivers,
        alert_routing=alert_routing(aws_settings.alert_receivers, aws_settings.alert_routing),
        prometheus_storage_gib=aws_settings.prometheus_storage_gib,
        edge_probes=edge_probes(settings),
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
        kms_key_arn=settings.cluster.aws.kms_key_arn if settings.cluster.aws else None,
        protect_repositories=settings.cluster.aws.protect_infrastructure if settings.cluster.aws else None,
        engines=engines_in_use(settings),
        engine_prebuilt=image.engine_images,
        base_digests=image.base_digests,
    )


def engines_in_use(settings: Settings) -> tuple[str, ...]:
    """The serving engines of the stack's models, by name (sorted, once each)."""
    return tuple(sorted({engine_for(model.family).name for model in settings.models}))


def model_store_args(settings: Settings, target: ClusterTarget) -> ModelStoreArgs:
    return ModelStoreArgs(
        target=target,
        models=settings.models,
        size_gi=settings.storage.size_gib,
        headroom=1 + settings.storage.headroom_percent / 100,
        protect=settings.storage.protect,
        elastic=settings.cluster.platform == "aws" and target.storage_class == AWS_EFS_STORAGE_CLASS,
        owned_subpaths=settings.cluster.platform == "aws" and target.storage_class == AWS_EFS_STORAGE_CLASS,
    )


def converter_version(model: ModelSpec) -> str:
    """The version of the converter that writes ``model``'s files (part of its content key): the ONNX converter's
    for an encoder, FasterTransformer's for a generator, the pinned vLLM's for a Llama-family model."""
    if model.family.is_vllm:
        return f"vllm-{VLLM_VERSION}"  # no converter: the repository renderer of the pinned vLLM's backend
    return ENCODER_CONVERTER_VERSION if model.family.is_encoder else CONVERTER_VERSION


def model_conversion_args(
    target: ClusterTarget,
    store: ModelStore,
    model: ModelSpec,
    tools_image: pulumi.Input[str],
    hf_token: pulumi.Input[str] | None,
    *,
    verify_generation: bool = True,
    bleu_threshold: float = 15.0,
    hf_token_secret: str | None = None,
) -> ModelConversionArgs:
    """``hf_token_secret`` (the model's ``hfTokenSecret``) replaces the stack's ``hf_token`` for this model; the
    stack's token goes only to the Jobs of repositories that may need it (:func:`hub_token_needed`: a catalog
    repository the Hub serves to anyone downloads without it, so its Job never holds the token)."""
    return ModelConversionArgs(
        target=target,
        store=store,
        model=model,
        tools_image=tools_image,
        converter_version=converter_version(model),
        hf_token=None if hf_token_secret or not hub_token_needed(model.hf_repo) else hf_token,
        hf_token_secret=hf_token_secret,
        verify_generation=verify_generation,
        bleu_threshold=bleu_threshold,
    )


def quantity_value(quantity: str) -> float:
    """A Kubernetes quantity as a number: ``500m`` -> 0.5, ``2`` -> 2.0, ``1k`` -> 1000.0."""
    return float(exact_quantity(quantity))


def autoscaler_kind(settings: Settings) -> Autoscaler:
    scaling, serving = settings.serving.autoscaling, settings.serving
    if scaling.scale_to_zero:
        return "keda"
    if scaling.enabled and serving.replicas_max > serving.replicas_min:
        return "hpa"
    return "none"


def model_host(settings: Settings, model: ModelSpec) -> str:
    """Each model gets its own host under the stack's base name (HTTP under ``/v2``, gRPC on the same host)."""
    return f"{model.name}.{settings.serving.ingress.host}"


def exposed_models(settings: Settings) -> tuple[ModelSpec, ...]:
    """The models whose own Triton has a host at the edge (encoders only: ``components.common.edge.exposes_triton``);
    every other model is reached through the OpenAI gateway only."""
    return tuple(m for m in settings.models if exposes_triton(m))


def ingress_args(settings: Settings, model: ModelSpec, htpasswd: pulumi.Input[str] | None) -> IngressArgs | None:
    """The model's Ingress on the Ingress edge (an encoder only); None on the Gateway API edge."""
    if settings.serving.ingress.edge != "ingress" or not exposes_triton(model):
        return None
    return exposure_args(settings, model_host(settings, model), htpasswd)


def uses_gateway_api(settings: Settings) -> bool:
    return settings.serving.ingress.edge == "gateway"


def edge_gateway(settings: Settings) -> GatewayRef:
    """The Gateway every route attaches to: the cluster's own (``gatewayName``) or ``<stack>-edge``, made by the
    stack in its namespace."""
    ingress = settings.serving.ingress
    if ingress.gateway_name:
        return GatewayRef(ingress.gateway_name, ingress.gateway_namespace)
    return GatewayRef(f"{settings.stack}-edge")


PROXY_TIMEOUT_S = 300
"""The request timeout of the proxies in front of the models and the gateway (Envoy's routes, ingress-nginx's
``proxy-read-timeout``), at the least: Envoy's own default, 15 s, would cut any long generation."""
PROXY_MARGIN_S = 10
"""How much longer than the gateway's longest deadline the proxies in front of it wait: the gateway ends an
overlong request itself (a 504 in OpenAI's error shape, or an error event in a stream), never the proxy's cut."""


def api_timeout_seconds(settings: Settings) -> int:
    """The request timeout of the routes to the gateway (the ``/v1`` HTTPRoute or Ingress) and of the edge's
    policy over every route (``rate_limit_policy_spec``: GRPCRoutes have no timeout of their own): at least
    :data:`PROXY_TIMEOUT_S`, and :data:`PROXY_MARGIN_S` over the longest deadline the gateway gives a model
    (a vLLM model's: ``gatewayDeadlineSeconds`` + its context x ``vllm.timePerOutputTokenSeconds``), so a full-length
    answer is cut by no proxy."""
    if not settings.serving.gateway.enabled:
        return PROXY_TIMEOUT_S
    longest = longest_deadline_seconds(settings.models, settings.serving.gateway.deadline_s)
    return max(PROXY_TIMEOUT_S, longest + PROXY_MARGIN_S)


def edge_args(settings: Settings, host: str, listener: str, request_timeout_seconds: int = PROXY_TIMEOUT_S) -> EdgeArgs:
    """One host on the Gateway API edge; on the cluster's own Gateway the route attaches to whichever listener
    accepts its host (the stack does not know that Gateway's listener names)."""
    ingress = settings.serving.ingress
    return EdgeArgs(
        gateway=edge_gateway(settings),
        host=host,
        listener=None if ingress.gateway_name or not ingress.tls else listener,
        tls=ingress.tls,
        api_key_auth=ingress.auth == "apiKey",
        request_timeout_seconds=request_timeout_seconds,
    )


def model_edge_args(settings: Settings, model: ModelSpec) -> EdgeArgs | None:
    """The model's routes on the Gateway API edge: an encoder only (``components.common.edge.exposes_triton``)."""
    if not uses_gateway_api(settings) or not exposes_triton(model):
        return None
    return edge_args(settings, model_host(settings, model), model_listener(model.name))


def api_clients(settings: Settings) -> tuple[str, ...]:
    """Every client with a key: the probe's first, then the stack's ``apiClients``."""
    return (PROBE_CLIENT, *settings.serving.ingress.api_clients)


def edge_keys(settings: Settings, on: date) -> tuple[ApiKey, ...]:
    """The keys the edge accepts ``on`` a day: each client's (``apiKeys``, or its ``default``), less the expired."""
    ingress = settings.serving.ingress
    return live_keys(client_keys(api_clients(settings), ingress.api_keys), on)


def acme_issuer(settings: Settings) -> AcmeIssuer | None:
    """The ClusterIssuer the stack makes: on a cluster it builds, with ``acmeEmail``, TLS on and an issuer name."""
    ingress = settings.serving.ingress
    if settings.cluster.platform != "aws" or not ingress.acme_email or not ingress.tls or not ingress.tls_issuer:
        return None
    return AcmeIssuer(ingress.tls_issuer, ingress.acme_email)


def edge_objects_args(settings: Settings, target: ClusterTarget) -> EdgeObjectsArgs | None:
    """The stack-wide edge objects: on the Gateway API edge its keys, policies and (on aws) its Gateway; on the
    Ingress edge of a cluster the stack builds, only the ClusterIssuer; None when there is nothing to make."""
    ingress = settings.serving.ingress
    issuer = acme_issuer(settings)
    gateway_api = uses_gateway_api(settings)
    if not gateway_api and issuer is None:
        return None
    gateway = edge_gateway(settings)
    solver = gateway_http01_solver(gateway) if gateway_api else ingress_http01_solver(ingress.class_name)
    return EdgeObjectsArgs(
        target=target,
        gateway=gateway,
        base_host=ingress.host,
        models=tuple(m.name for m in exposed_models(settings)),
        api=settings.serving.gateway.enabled,
        tls=ingress.tls,
        make_gateway=gateway_api and not ingress.gateway_name,
        cluster_issuer=ingress.tls_issuer,
        load_balancer_annotations=dict(NLB_ANNOTATIONS) if settings.cluster.platform == "aws" else {},
        api_key_auth=gateway_api and ingress.auth == "apiKey",
        keys=edge_keys(settings, eks.today()),
        rotation=ingress.api_key_rotation,
        requests_per_minute=ingress.rate_limit_per_minute,
        request_timeout_seconds=api_timeout_seconds(settings),
        max_concurrent_requests=ingress.max_concurrent_requests,
        global_rate_limit=ingress.rate_limit_redis is not None,
        monitoring=settings.serving.monitoring,
        issuer=issuer,
        issuer_solver=solver,
    )


def exposure_args(
    settings: Settings,
    host: str,
    htpasswd: pulumi.Input[str] | None,
    request_timeout_seconds: int = PROXY_TIMEOUT_S,
) -> IngressArgs:
    """The stack's TLS and authentication on ``host`` (the same for every model and the gateway)."""
    ingress = settings.serving.ingress
    basic = ingress.auth == "basic"
    return IngressArgs(
        host=host,
        request_timeout_seconds=request_timeout_seconds,
        secure=ingress.tls,
        cluster_issuer=ingress.tls_issuer,
        tls_secret=None if ingress.tls_issuer or not ingress.tls else ingress.tls_secret_name,
        basic_auth_htpasswd=htpasswd if basic and not ingress.basic_auth_secret else None,
        basic_auth_secret=ingress.basic_auth_secret if basic else None,
        oidc_auth_url=ingress.oidc_auth_url if ingress.auth == "oidc" else None,
        oidc_signin_url=ingress.oidc_signin_url if ingress.auth == "oidc" else None,
    )


def rollout(settings: Settings, model: ModelSpec) -> Rollout:
    """The model's rolling update: surge only where the GPU nodes that can exist hold the extra pod; a CPU model
    surges (its extra pod needs no GPU, and the GPU models' surge room is counted without it)."""
    if model.on_cpu:
        return cpu_rollout()
    pool = capacity_pool(settings.cluster)
    if pool is None:
        return fixed_rollout()
    serving = settings.serving
    top = serving.replicas_max if autoscaler_kind(settings) != "none" else serving.replicas_min
    surging = surging_models(model_shapes(gpu_models(settings.models)), top, pool)
    return rollout_for(ModelShape(model.name, model.gpus), surging, serving.replicas_min)


def gpu_models(models: Sequence[ModelSpec]) -> tuple[ModelSpec, ...]:
    """The models whose pods take GPUs (``device: gpu``): the only ones GPU capacity and packing count."""
    return tuple(m for m in models if not m.on_cpu)


def cpu_rollout() -> Rollout:
    """A CPU model's rolling update: one surge pod, none unavailable (it needs no free GPU)."""
    return Rollout(1, 0, "CPU model: a surge pod needs no GPU, so no capacity is lost during a rollout")


def node_growth(settings: Settings) -> NodeGrowth:
    """What can add GPU nodes: the aws stack's cluster-autoscaler up to gpuNodesMax; on an existing cluster,
    nothing the stack knows of."""
    pool = gpu_pool(settings.cluster)
    if pool is None or not pool.autoscaled:
        return NodeGrowth(autoscaler=False)
    return NodeGrowth(autoscaler=True, nodes_max=pool.nodes_max)


def triton_release_of(settings: Settings, model: ModelSpec) -> str:
    """The Triton release ``model``'s server image is built on: the stack's ``tritonVersion`` for FT's image, else
    the release its engine's own image pins (ONNX Runtime, vLLM), which decides the server's API restrictions."""
    image = engine_for(model.family).server_image
    if image == FASTERTRANSFORMER.server_image:
        return settings.image.triton_version
    return image.build_args["TRITON_VERSION"]


REPOSITORY = Path(__file__).resolve().parents[1]
"""The repository the program runs from: what its image builds read (the Dockerfiles and the files they copy)."""


def compile_identity_of(settings: Settings, model: ModelSpec) -> str:
    """What ``model``'s server image compiles with (a vLLM model's, for its compile cache's key): its base as the
    stack pins it and the files the repository's Dockerfile copies (``components.platform.compile_identity``);
    empty for the other engines, which keep no compile cache."""
    if not model.family.is_vllm:
        return ""
    return image_compile_identity(REPOSITORY, engine_for(model.family).server_image, settings.image.base_digests)


def triton_service_args(
    settings: Settings,
    *,
    target: ClusterTarget,
    store: ModelStore,
    conversion: ModelConversion,
    server_image: pulumi.Input[str],
    htpasswd: pulumi.Input[str] | None,
) -> TritonServiceArgs:
    serving = settings.serving
    ingress = ingress_args(settings, conversion.model, htpasswd)
    edge = model_edge_args(settings, conversion.model)
    return TritonServiceArgs(
        target=target,
        conversion=conversion,
        store=store,
        image=server_image,
        triton_release=triton_release_of(settings, conversion.model),
        compile_identity=compile_identity_of(settings, conversion.model),
        image_pins=image_pins(settings),
        ingress=ingress,
        edge=edge,
        autoscaler=autoscaler_kind(settings),
        min_replicas=serving.replicas_min,
        max_replicas=max(serving.replicas_max, 1),
        ratio_target=quantity_value(serving.autoscaling.target_ratio),
        ttft_p95_target_s=quantity_value(serving.autoscaling.target_ttft),
        waiting_target=quantity_value(serving.autoscaling.target_waiting),
        monitoring=serving.monitoring,
        alert_for=serving.alert_for,
        load_bandwidth=serving.load_bandwidth_mibps * MIB,
        scale_down_window_seconds=serving.autoscaling.scale_down_stabilization_s,
        gpus_per_node=None if conversion.model.on_cpu else settings.cluster.gpu_node.gpus,
        node_type=settings.cluster.gpu_node.name,
        gpu_node_cpus=None if conversion.model.on_cpu else gpu_node_cpus(settings),
        rollout=rollout(settings, conversion.model),
        longest_request_seconds=longest_request_seconds(
            settings, conversion.model, tuple(e.request_timeout_seconds for e in (ingress, edge) if e is not None)
        ),
        engine_stall_seconds=math.ceil(serving.gateway.deadline_s),
        node_growth=NodeGrowth(autoscaler=False) if conversion.model.on_cpu else node_growth(settings),
        gemm_tuning=gemm_tuning(settings),
        gateway_pods=gateway_selector(gateway_name(settings)) if settings.serving.gateway.enabled else None,
        gateway_job=dns_label(gateway_name(settings)) if settings.serving.gateway.enabled else None,
        canary=serving.canary if serving.canary.enabled and edge is not None else None,
    )


def gpu_node_cpus(settings: Settings) -> int | None:
    """The most CPUs a GPU node of the stack may have, a vLLM engine's CPU limit
    (``components.common.sizing.vllm_cpu_limit``): its type's, or a larger fallback type's (``g5.24xlarge`` beside
    ``g5.12xlarge``: 96); None when the node's CPUs are not known (an existing cluster without ``gpuNodeCpus``)."""
    node = settings.cluster.gpu_node
    if node.vcpus is None:
        return None
    aws_cluster = settings.cluster.aws
    fallbacks = aws_cluster.gpu_fallback_instance_types if aws_cluster is not None else ()
    return max([node.vcpus, *(AWS_GPU_INSTANCES[t].vcpus or 0 for t in fallbacks if t in AWS_GPU_INSTANCES)])


def longest_request_seconds(settings: Settings, model: ModelSpec, edge_timeouts: tuple[int, ...]) -> int:
    """The longest a request to ``model``'s Triton may take: the gateway's deadline for the model (its calls, the
    probe's through it; a vLLM model's covers its longest answer) and the request timeouts of the edge routes that
    expose the model directly (``edge_timeouts``: a client calling ``/v2`` is cut only there). What each Triton
    pod's drain waits for; 60 s (the gateway's default deadline) when neither bounds it."""
    gateway = settings.serving.gateway
    deadline = (model_deadline_seconds(model, gateway.deadline_s),) if gateway.enabled else ()
    return max((*deadline, *edge_timeouts), default=60)


def longest_pod_grace_seconds(settings: Settings) -> int:
    """The longest grace period a pod of the stack asks (a Triton pod's drain, with every request timeout in front of
    it counted as if it exposed the model; the gateway's drain): at most what the pods take, never less."""
    timeouts = (api_timeout_seconds(settings),)
    tritons = [
        triton_drain(longest_request_seconds(settings, m, timeouts), vllm=m.family.is_vllm).termination_grace_seconds
        for m in settings.models
    ]
    gateway = settings.serving.gateway
    gateways = (
        [gateway_drain(longest_deadline_seconds(settings.models, gateway.deadline_s)).termination_grace_seconds]
        if gateway.enabled
        else []
    )
    return max([*tritons, *gateways], default=0)


def gemm_tuning(settings: Settings) -> GemmTuning:
    """The GEMM tuning step, keyed by the FT commit and Triton release the server image is built from."""
    return GemmTuning(
        enabled=settings.serving.gemm_tuning,
        timeout_seconds=settings.serving.gemm_tuning_timeout_s,
        ft_commit=settings.image.ft_commit,
        triton_version=settings.image.triton_version,
    )


def gateway_name(settings: Settings) -> str:
    """The Gateway component's name (its Kubernetes objects are named from it)."""
    return f"{settings.stack}-gateway"


def gateway_args(
    settings: Settings,
    *,
    target: ClusterTarget,
    backends: Sequence[GatewayBackend],
    tools_image: pulumi.Input[str],
    htpasswd: pulumi.Input[str] | None,
    store: ModelVolume | None = None,
) -> GatewayArgs:
    """``/v1`` on the stack's base host (each model keeps ``<model>.<host>``), same TLS and auth; behind API keys,
    each client's cap and each key's expiry day, which the gateway applies too."""
    gateway = settings.serving.gateway
    keyed = uses_gateway_api(settings) and settings.serving.ingress.auth == "apiKey"
    return GatewayArgs(
        target=target,
        image=tools_image,
        backends=tuple(backends),
        store=store,
        ingress=None
        if uses_gateway_api(settings)
        else exposure_args(settings, settings.serving.ingress.host, htpasswd, api_timeout_seconds(settings)),
        edge=edge_args(settings, settings.serving.ingress.host, API_LISTENER, api_timeout_seconds(settings))
        if uses_gateway_api(settings)
        else None,
        min_replicas=gateway.replicas_min,
        max_replicas=gateway.replicas_max,
        cpu=gateway.cpu,
        memory=gateway.memory,
        deadline_seconds=gateway.deadline_s,
        coalesce=gateway.coalesce,
        max_in_flight_per_client=in_flight_per_client(
            gateway.max_in_flight_per_client, settings.serving.ingress.max_concurrent_requests, gateway.replicas_max
        )
        if keyed
        else 0,
        key_expiries=tuple((k.id, k.expires) for k in edge_keys(settings, eks.today()) if k.expires is not None)
        if keyed
        else (),
        monitoring=settings.serving.monitoring,
    )


def integration_probe_args(
    settings: Settings,
    service: TritonService,
    model: ModelSpec,
    image_digest: pulumi.Input[str],
    gateway_url: pulumi.Input[str | None] | None = None,
    *,
    edge: EdgeObjects | None = None,
) -> IntegrationProbeArgs:
    """The model's probe; with ``gateway_url`` (the gateway's public ``.../v1``) it also asks the gateway (a
    classifier is not served there: it is asked on its own endpoint only). An encoder is judged on the stack's
    expected answers (``settings.probe.encoders[model.name]``)."""
    probe = settings.probe
    serving = settings.serving
    # gRPC reaches the ingress only over TLS (HTTP/2 via ALPN); without TLS the probe speaks HTTP.
    protocol = Protocol.GRPC if probe.protocol == "grpc" and serving.ingress.tls else Protocol.HTTP
    chosen = service.grpc_endpoint if protocol is Protocol.GRPC else service.endpoint
    endpoint = chosen.apply(lambda url: url or "")
    serving_config = f"{model.to_json()}|{serving.replicas_min}-{serving.replicas_max}|{serving.ingress.host}"
    probe_args = IntegrationProbeArgs.from_specs(
        endpoint,
        [model],
        image_digest=image_digest,
        serving_config=serving_config,
        protocol=protocol,
        deadline_s=float(probe.timeout_s),
        latency_requests=probe.requests,
        bleu_threshold=float(probe.bleu_threshold),
        header_env=integration_probe_header_env(settings),
        headers=integration_probe_headers(settings, edge),
        gateway_url=gateway_url,
        encoder_probes=probe.encoders,
        reference=True,
    )
    if serving.replicas_min != 0:  # what TritonService.scales_to_zero says of every model's service
        return probe_args
    # Asleep at zero replicas: the probe asks it through the gateway first and times the wake (tritonft.probe.wake).
    woken = [dataclasses.replace(t, scales_to_zero=True) for t in probe_args.models]
    return dataclasses.replace(probe_args, models=woken)


def image_pins(settings: Settings) -> str:
    """What the server image is built from (or the prebuilt one's pinned reference), as plain text: part of each
    model's serving version, so a new server image is judged before it takes traffic."""
    image = settings.image
    return json.dumps(
        {
            "server": image.server_image,
            "triton": image.triton_version,
            "ft_backend": image.ft_backend_commit,
            "ft": image.ft_commit,
            "cuda_archs": list(image.cuda_archs),
        },
        sort_keys=True,
    )


def judged_before_the_switch(settings: Settings, model: ModelSpec) -> bool:
    """Whether each new serving version of ``model`` is judged in the cluster: whenever the probe runs. Before its
    Services switch to it when it has room for a candidate, else right after it rolled in place
    (``components.serving.promotion.judged_after_its_roll``). The judge asks the version from inside the cluster
    (:func:`in_cluster_judge_args`), so a model whose Triton has no route at the edge (FasterTransformer, vLLM:
    ``components.common.edge.exposes_triton``) is judged against its reference all the same
    (``docs/security/reach.md``)."""
    return settings.probe.enabled


def judge_probe_args(
    settings: Settings,
    candidate: Candidate,
    model: ModelSpec,
    image_digest: pulumi.Input[str],
    *,
    edge: EdgeObjects | None = None,
) -> IntegrationProbeArgs:
    """What judges a candidate version before it takes traffic (or a version right after it rolled in place): the
    same judged answers as the model's probe, asked of the version only, at its Service's in-cluster URL (the judge
    Job's, :func:`in_cluster_judge_args`): a candidate's own Service, an in-place version's user-facing one.
    Never through the edge (no candidate has a route there) nor the gateway (which calls the serving version); no
    credential (Triton is asked directly, from a pod its NetworkPolicy admits by label). ``edge`` is unused: kept so
    the signature stays the probe's."""
    del edge
    probe = settings.probe
    judged = IntegrationProbeArgs.from_specs(
        candidate.internal_url,
        [model],
        image_digest=image_digest,
        serving_config=f"{model.to_json()}|judge|{candidate.version}",
        protocol=Protocol.HTTP,
        deadline_s=float(probe.timeout_s),
        latency_requests=probe.requests,
        bleu_threshold=float(probe.bleu_threshold),
        encoder_probes=probe.encoders,
        reference=True,
        failure_hint=(failed_in_place_hint if candidate.in_place else failed_candidate_hint)(
            settings.namespace, candidate
        ),
    )
    if judged_chat_checkpoint(model) is None:
        return judged
    # Its chats are rendered from the version's own tokenizer_config.json, mounted in the judge's pod where the
    # gateway would read it (in_cluster_judge_args mounts it).
    chat = f"{CHECKPOINT_MOUNT}/{TOKENIZER_CONFIG_FILE}"
    models = [dataclasses.replace(t, tokenizer_config=chat) if t.name == model.name else t for t in judged.models]
    return dataclasses.replace(judged, models=models)


TOKENIZER_CONFIG_FILE = "tokenizer_config.json"


def judged_chat_checkpoint(model: ModelSpec) -> str | None:
    """The store ``subPath`` of the checkpoint a version's judge renders its chats from (a vLLM model judged against
    its reference: ``hf/<model>/<revision>``, the directory the gateway mounts); None for the others."""
    if not (model.family.is_vllm and has_reference(model)):
        return None
    return vllm_model_path(model, STORE_MOUNT).removeprefix(f"{STORE_MOUNT}/")


def in_cluster_judge_args(
    settings: Settings,
    target: ClusterTarget,
    candidate: Candidate,
    probe_args: IntegrationProbeArgs,
    tools_image: pulumi.Input[str],
    *,
    model: ModelSpec,
    store_claim: pulumi.Input[str],
) -> InClusterJudgeArgs:
    """The candidate's judge Job (``components.serving.judge_job``): ``tritonft judge`` with ``probe_args``'s
    settings (:func:`judge_probe_args`), in the tools image, its pods labelled ``candidate.judge_pods``; a vLLM
    ``model``'s with the version's checkpoint mounted read-only from the store (``store_claim``): its chats."""
    settings_json = pulumi.Output.from_input(probe_settings(probe_args)).apply(
        lambda s: json.dumps(s, sort_keys=True, separators=(",", ":"))
    )
    subpath = judged_chat_checkpoint(model)
    job = pulumi.Output.all(
        namespace=target.namespace, image=tools_image, config=settings_json, claim=store_claim
    ).apply(
        lambda v: judge_job_manifest(
            name=judge_job_name(candidate.service),
            namespace=v["namespace"],
            pod_labels=candidate.judge_pods,
            image=v["image"],
            probe_settings_json=v["config"],
            cpu_node_selector=dict(target.cpu_node_selector),
            gpu_node_selector=dict(target.gpu.node_selector),
            deadline_s=probe_args.deadline_s,
            checkpoint=(v["claim"], subpath) if subpath is not None else None,
        )
    )
    return InClusterJudgeArgs(
        namespace=target.namespace,
        job=job,
        candidate_service=candidate.service,
        candidate_deployment=candidate.service,
        failure_hint=probe_args.failure_hint,
        rolled=candidate.rolled if candidate.in_place else None,
        kubeconfig=target.kubeconfig,
        context=target.context,
    )


def failed_candidate_hint(namespace: str, candidate: Candidate) -> str:
    """What a failed judgement leaves, said with the failure: the candidate stays beside the serving version, taking no
    traffic, so its pods and logs can be looked at; the next ``up`` (or ``destroy``) removes it. Why it is kept rather
    than removed by the failed ``up``: Pulumi runs no step after a failed one, and a judge that deleted the candidate
    itself would leave the state holding objects that are gone."""
    version, deployment = candidate.version, candidate.service
    return (
        f"The candidate version {version} of {candidate.model} is left running beside the serving version, taking no "
        f"traffic (the serving version keeps all of it), so it can be looked at: "
        f"`kubectl -n {namespace} get deployment,pods,service -l {VERSION_LABEL}={version}`, "
        f"`kubectl -n {namespace} logs deployment/{deployment} -c triton`; the judge's whole report: "
        f"`kubectl -n {namespace} logs job/{judge_job_name(deployment)}`. Its pods hold their GPUs until the next "
        "`pulumi up` removes it (a revert deletes it; a fix is judged as a new version and this one is deleted at "
        "the end of that up); `pulumi destroy` removes it too."
    )


def failed_in_place_hint(namespace: str, judged: Candidate) -> str:
    """What a failed judgement of a version that rolled in place leaves, said with the failure: the version serves
    (every pod of the model runs it: the roll replaced the previous version's pods, and no candidate was possible),
    ``up`` stops there, and the way back is the stack's previous settings. Why it is not rolled back or scaled away
    by the failed ``up``: either would leave the live Deployment differing from the state Pulumi just recorded (a
    rerun without a revert would then judge the previous pods and pass while the stack declares the failed
    version), and scaling it away turns wrong answers into no answers, with the evidence gone."""
    version, deployment = judged.version, judged.service
    return (
        f"Version {version} of {judged.model} rolled in place (no room for a candidate beside its serving version: "
        "the settings warned, rule judged-before-traffic) and SERVES NOW: every pod of the model runs it. `up` "
        "stops here: the gateway keeps its previous configuration, the probe and the stack's outputs are not "
        "updated, and a pipeline promoting this change to the next environment stops. Nothing rolls it back by "
        "itself. Roll back: revert the change in the stack's settings (the stack file's previous commit; `pulumi "
        "stack history` lists the update that deployed it) and run `pulumi up`: the previous version rolls in place "
        "(its files are still in the store under their key) and is judged the same way. Look at it: "
        f"`kubectl -n {namespace} logs deployment/{deployment} -c triton`; the judge's whole report: "
        f"`kubectl -n {namespace} logs job/{judge_job_name(deployment)}`. Room for one more pod of the model "
        "(gpuNodesMax; gpuNodes on an existing cluster) makes each change a candidate judged before it takes traffic."
    )


def integration_probe_header_env(settings: Settings) -> dict[str, str]:
    """Behind an authenticated Ingress (basic, oidc) the probe sends ``Authorization`` from :data:`PROBE_AUTH_ENV`;
    behind the API keys it sends its own key instead (:func:`integration_probe_headers`)."""
    return {"Authorization": PROBE_AUTH_ENV} if settings.serving.ingress.auth in ("basic", "oidc") else {}


def integration_probe_headers(settings: Settings, edge: EdgeObjects | None) -> pulumi.Output[dict[str, str]] | None:
    """``Authorization: Bearer <the probe's key>`` (a secret input) when the edge checks API keys."""
    if settings.serving.ingress.auth != "apiKey" or edge is None:
        return None
    return edge.authorization(PROBE_CLIENT).apply(lambda value: {"Authorization": value})
