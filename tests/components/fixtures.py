"""Shared inputs for the Kubernetes component tests: two real model shapes and a cluster target."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.common.edge import EdgeArgs
from components.common.ingress import IngressArgs
from components.common.target import ClusterTarget, GpuScheduling
from components.models.conversion import ModelConversion, ModelConversionArgs
from components.models.store import ModelStore, ModelStoreArgs
from components.serving.gemm_tuning import GemmTuning
from components.serving.service import Autoscaler, Judge, TritonService, TritonServiceArgs
from components.settings.capacity import Rollout, fixed_rollout
from components.settings.model import CanarySettings
from tests.tritonft.encoder.checkpoints import MINILM_SPEC
from tritonft.engines.fastertransformer.versions import TRITON_VERSION
from tritonft.rollout.verdict import NodeGrowth
from tritonft.spec import Architecture, DataType, Device, Family, ModelSpec, WeightDType
from tritonft.synth.engine import RecordingMocks, Registered, run_program

NAMESPACE = "triton"
TOOLS_IMAGE = "registry.example.com/triton-ft/tools@sha256:" + "a" * 64
SERVER_IMAGE = "registry.example.com/triton-ft/server@sha256:" + "b" * 64
COMPILE_IDENTITY = "c" * 64
"""What the server image compiles with (``components.platform.compile_identity``): a vLLM model's cache key needs it."""
CONVERTER = "0.1.0"
GPU_POOL = {"triton-ft/pool": "gpu"}
CPU_POOL = {"triton-ft/pool": "cpu"}

T5_SMALL = ModelSpec(
    name="t5-small",
    family=Family.T5,
    hf_repo="google-t5/t5-small",
    revision="df1b051c49625cf57a3d0d8d3863ed4d13564fe4",
    architecture=Architecture(
        d_model=512, num_heads=8, num_layers=6, d_ff=2048, vocab_size=32128, d_kv=64, num_decoder_layers=6
    ),
)

GPTJ_6B = ModelSpec(
    name="gpt-j-6b",
    family=Family.GPTJ,
    hf_repo="EleutherAI/gpt-j-6b",
    revision="47e169305d2e8376be1d31e765533382721b2cc1",
    architecture=Architecture(
        d_model=4096,
        num_heads=16,
        num_layers=28,
        d_ff=16384,
        vocab_size=50400,
        max_positions=2048,
        tied_embeddings=False,
    ),
    weight_dtype=WeightDType.FP16,
    data_type=DataType.FP16,
    tensor_parallel=4,
)


MINILM_CPU = replace(MINILM_SPEC, device=Device.CPU)
"""all-MiniLM-L6-v2 (mean pooling, normalised, 256 tokens) on CPU nodes."""

MINILM_GPU = replace(MINILM_SPEC, name="minilm-gpu")
"""The same encoder on a GPU node."""


def make_target(crd_charts: bool = True, addons: frozenset[str] | None = None) -> ClusterTarget:
    """A ClusterTarget as the cluster components build it (call inside a mock program)."""
    provider = k8s.Provider("test-k8s", kubeconfig="{}")
    installers: list[pulumi.Resource] = []
    if crd_charts:
        installers.append(
            k8s.helm.v4.Chart(
                "kube-prometheus-stack",
                chart="kube-prometheus-stack",
                namespace="monitoring",
                opts=pulumi.ResourceOptions(provider=provider),
            )
        )
    return ClusterTarget(
        provider=provider,
        namespace=pulumi.Output.from_input(NAMESPACE),
        gpu=GpuScheduling(node_selector=dict(GPU_POOL)),
        cpu_node_selector=dict(CPU_POOL),
        storage_class="efs-sc",
        crd_installers=installers,
        addons=addons
        if addons is not None
        else frozenset({"prometheus-operator", "cert-manager", "keda", "ingress-nginx", "prometheus-adapter"}),
    )


def secure_ingress(host: str) -> IngressArgs:
    """TLS from cert-manager and basic auth from an htpasswd secret: the default outside ``local``."""
    return IngressArgs(
        host=host, cluster_issuer="letsencrypt", basic_auth_htpasswd=pulumi.Output.secret("ops:$apr1$abc$def")
    )


def serve(
    name: str,
    model: ModelSpec,
    *,
    target: ClusterTarget | None = None,
    ingress: IngressArgs | None = None,
    edge: EdgeArgs | None = None,
    autoscaler: Autoscaler = "hpa",
    monitoring: bool = True,
    min_replicas: int = 1,
    hf_token: str | None = None,
    gateway_pods: dict[str, str] | None = None,
    gateway_job: str | None = None,
    gemm_tuning: GemmTuning | None = None,
    node_growth: NodeGrowth | None = None,
    gpus_per_node: int | None = None,
    triton_release: str = TRITON_VERSION,
    longest_request_seconds: int = 60,
    image_pins: str = "",
    judge: Judge | None = None,
    rollout: Rollout | None = None,
    canary: CanarySettings | None = None,
    gpu_node_cpus: int | None = None,
    image: str = SERVER_IMAGE,
    engine_stall_seconds: int = 60,
    compile_identity: str = COMPILE_IDENTITY,
) -> TritonService:
    """Store + conversion + service for one model (call inside a mock program)."""
    target = target or make_target()
    store = ModelStore(f"{name}-store", ModelStoreArgs(target=target, models=(model,)))
    conversion = ModelConversion(
        name,
        ModelConversionArgs(
            target=target,
            store=store,
            model=model,
            tools_image=TOOLS_IMAGE,
            converter_version=CONVERTER,
            hf_token=pulumi.Output.secret(hf_token) if hf_token else None,
        ),
    )
    return TritonService(
        name,
        TritonServiceArgs(
            target=target,
            conversion=conversion,
            store=store,
            image=image,
            ingress=ingress,
            edge=edge,
            autoscaler=autoscaler,
            monitoring=monitoring,
            min_replicas=min_replicas,
            gateway_pods=gateway_pods,
            gateway_job=gateway_job,
            gemm_tuning=gemm_tuning or GemmTuning(),
            node_growth=node_growth or NodeGrowth(autoscaler=False),
            gpus_per_node=gpus_per_node,
            triton_release=triton_release,
            longest_request_seconds=longest_request_seconds,
            engine_stall_seconds=engine_stall_seconds,
            compile_identity=compile_identity,
            image_pins=image_pins,
            judge=judge,
            rollout=rollout or fixed_rollout(),
            canary=canary,
            gpu_node_cpus=gpu_node_cpus,
        ),
    )


DEPLOYMENT = "kubernetes:apps/v1:Deployment"


def served_deployment(mocks: RecordingMocks, model: ModelSpec, **kwargs: Any) -> Registered:
    """The one Deployment :func:`serve` registers for ``model`` (``kwargs``: :func:`serve`'s options)."""
    run_program(lambda: serve("m", model, **kwargs))
    (deployment,) = mocks.of_type(DEPLOYMENT)
    return deployment


def triton_container(deployment: Registered) -> dict[str, Any]:
    """The Triton container of a captured Deployment (its only one)."""
    (container,) = containers(deployment)
    return container


def containers(res: Registered) -> list[dict[str, Any]]:
    """The containers of a captured Deployment or Job."""
    return list(res.inputs["spec"]["template"]["spec"]["containers"])


def pod_spec(res: Registered) -> dict[str, Any]:
    return dict(res.inputs["spec"]["template"]["spec"])
