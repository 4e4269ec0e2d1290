"""The validated, typed settings of one stack. Frozen: read once, passed down, never re-read."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from components.settings.api_keys import KeySpec
from components.settings.gpus import GpuNodeType
from tritonft.spec import ModelSpec


@dataclass(frozen=True)
class KubernetesClusterSettings:
    """An existing cluster reached through a kubeconfig."""

    kubeconfig: str | None
    context: str | None
    existing_addons: frozenset[str]
    image_registry: str | None
    gpu_nodes: int | None = None
    """``gpuNodes``: the GPU nodes the stack may use (None: not known)."""


@dataclass(frozen=True)
class AwsClusterSettings:
    """EKS built by this stack."""

    region: str
    kubernetes_version: str
    vpc_cidr: str
    vpc_id: str | None
    subnet_ids: tuple[str, ...]
    public_subnet_ids: tuple[str, ...]
    gpu_nodes_min: int
    gpu_nodes_max: int
    gpu_nodes_desired: int
    gpu_node_disk_gib: int | None
    gpu_ami: str
    gpu_capacity_type: str
    system_instance_type: str
    system_nodes_min: int
    system_nodes_max: int
    gpu_fallback_instance_types: tuple[str, ...] = ()
    """``gpuFallbackInstanceTypes``: launched, in order, when a zone is out of ``gpuInstanceType``."""
    eks_support: str = "standard"
    """``eksSupport``: the cluster's upgrade policy, ``standard`` or ``extended``."""
    api_endpoint: str = "public"
    api_public_access_cidrs: tuple[str, ...] = ("0.0.0.0/0",)
    admin_principal_arns: tuple[str, ...] = ()
    control_plane_log_retention_days: int = 90
    nat_gateways: str = "single"
    vpc_endpoints: bool = True
    protect_infrastructure: bool = False
    node_ssm_access: bool = False
    gpu_quota_check: bool = True
    alert_receivers: tuple[dict[str, object], ...] = ()
    """Alertmanager receivers (credentials inline only when stored as a secret, else read from Secret files)."""
    alert_routing: dict[str, str] = field(default_factory=dict)
    """``alertRouting``: receiver name per route (``critical``, ``warning``, ``watchdog``), as written."""
    prometheus_storage_gib: int = 50
    kms_key_arn: str | None = None
    """Customer-managed KMS key for Kubernetes Secrets and ECR; None = AWS-managed keys."""


@dataclass(frozen=True)
class ClusterSettings:
    """Where workloads run, whatever the platform."""

    platform: str
    gpu_node: GpuNodeType
    gpu_node_selector: dict[str, str]
    gpu_tolerations: tuple[dict[str, str], ...]
    cpu_node_selector: dict[str, str]
    storage_class: str | None
    ingress_class: str
    addons: frozenset[str]
    """Add-ons this stack installs."""
    kubernetes: KubernetesClusterSettings | None = None
    aws: AwsClusterSettings | None = None

    @property
    def available_addons(self) -> frozenset[str]:
        """Installed by this stack or already present in an existing cluster."""
        present = self.kubernetes.existing_addons if self.kubernetes else frozenset()
        return self.addons | present


@dataclass(frozen=True)
class ImageSettings:
    """Server and tools images: built by the stack, or prebuilt and pinned by digest."""

    server_image: str | None
    tools_image: str | None
    triton_version: str
    ft_backend_commit: str
    ft_commit: str
    cuda_archs: tuple[str, ...]
    base_digests: Mapping[str, str] = field(default_factory=dict)
    """``baseImageDigests``: the digest of each base image (``repository:tag``) the Dockerfiles leave unpinned."""
    engine_images: Mapping[str, str] = field(default_factory=dict)
    """``engineImages``: a prebuilt server image (pinned by digest) by engine name, instead of building it."""


@dataclass(frozen=True)
class StorageSettings:
    """The RWX model store."""

    size_gib: int | None
    headroom_percent: int
    protect: bool


@dataclass(frozen=True)
class IngressSettings:
    """HTTP and gRPC ingresses."""

    host: str
    """Base DNS name; each model is served at ``<model>.<host>``."""
    class_name: str
    tls: bool
    tls_issuer: str | None
    tls_secret_name: str
    auth: str
    basic_auth_secret: str | None
    """Existing Secret with htpasswd lines; None = created from the ``ingressHtpasswd`` secret."""
    oidc_auth_url: str | None
    oidc_signin_url: str | None
    edge: str = "ingress"
    """``gateway`` (Gateway API on Envoy Gateway) or ``ingress`` (Ingresses for ingress-nginx)."""
    gateway_name: str | None = None
    """The existing cluster's own Gateway; None = the stack makes ``<stack>-edge``."""
    gateway_namespace: str | None = None
    """Namespace of ``gateway_name``; None = the stack's."""
    api_clients: tuple[str, ...] = ()
    """Clients with an API key of their own (the probe's is always made)."""
    api_keys: Mapping[str, tuple[KeySpec, ...]] = field(default_factory=dict)
    """``apiKeys``: the keys of the clients that hold more (or other) than their ``default`` key."""
    api_key_rotation: int = 0
    rate_limit_per_minute: int = 600
    max_concurrent_requests: int = 256
    rate_limit_redis: str | None = None
    """``rateLimitRedis``: Envoy Gateway's global rate limit keeps its counters there (one bucket per key and stack)."""
    dns_zone: str | None = None
    """On aws: the Route53 hosted zone external-dns writes the edge's records into."""
    acme_email: str | None = None
    """On aws: the stack makes the ClusterIssuer ``tls_issuer`` (ACME, HTTP-01 through the edge) with this contact."""


@dataclass(frozen=True)
class AutoscalingSettings:
    """HPA (or KEDA) on Triton's queue:compute ratio, or the requests waiting inside a vLLM model's engine."""

    enabled: bool
    target_ratio: str
    scale_down_stabilization_s: int | None
    """None = computed from the model's startup budget."""
    scale_to_zero: bool
    target_ttft: str = "1"
    """A vLLM model's time-to-first-token p95 objective, seconds (a Kubernetes quantity): its alert's threshold."""
    target_waiting: str = "2"
    """A vLLM model's autoscaling target: requests waiting inside vLLM per pod (a Kubernetes quantity)."""


@dataclass(frozen=True)
class GatewaySettings:
    """The OpenAI-compatible API in front of every model."""

    enabled: bool
    replicas_min: int
    replicas_max: int
    cpu: str
    memory: str
    deadline_s: int
    coalesce: bool = True
    """Merge concurrent same-parameter completions into one Triton call (``tritonft gateway --coalesce``)."""
    max_in_flight_per_client: int | None = None
    """``maxConcurrentPerClient``; None = derived from the edge's cap (``components.gateway.spec
    .in_flight_per_client``)."""


@dataclass(frozen=True)
class CanarySettings:
    """The optional weighted phase of a judged promotion (``canary*`` keys): after the probe judged a new serving
    version, it takes ``weight_percent`` of the model's edge traffic for ``duration_s``; then Prometheus compares its
    error ratio and latency p95 with the stable version's (``components.serving.canary``)."""

    enabled: bool = False
    weight_percent: int = 10
    duration_s: int = 300
    max_error_ratio_increase_percent: int = 1
    """How many percentage points the candidate's error ratio may exceed the stable's."""
    max_latency_increase_percent: int = 20
    """How much (percent of the stable's) the candidate's latency p95 may exceed the stable's."""
    min_requests: int = 50
    """Requests the candidate must have answered in the phase for its figures to count."""
    prometheus_url: str | None = None
    """Where ``pulumi up`` queries Prometheus; None = through the Kubernetes API's service proxy to
    kube-prometheus-stack's Prometheus in ``monitoring``."""


@dataclass(frozen=True)
class ServingSettings:
    """The Triton Deployment and everything around it."""

    replicas_min: int
    replicas_max: int
    ingress: IngressSettings
    autoscaling: AutoscalingSettings
    monitoring: bool
    alert_for: dict[str, str]
    """The stack's ``alertFor``: alert name -> ``for:`` duration, for the alerts it names (the rest keep theirs)."""
    load_bandwidth_mibps: int
    gateway: GatewaySettings
    gemm_tuning: bool = True
    """FT's GEMM autotuning before Triton starts (``gemmTuning``; default off in ``local``)."""
    gemm_tuning_timeout_s: int = 900
    canary: CanarySettings = field(default_factory=CanarySettings)
    """The weighted phase after a new version is judged (off by default)."""


@dataclass(frozen=True)
class EncoderProbe:
    """What the probe asks of one encoder beyond its width and norm (the model entry's probe keys)."""

    triples: tuple[tuple[str, str, str], ...] = ()
    """``task: embed``: (anchor, closer, farther) sentences; the served embeddings must put ``closer`` nearer to
    ``anchor`` than ``farther``. Empty = :data:`tritonft.probe.encoder.DEFAULT_TRIPLES`."""
    labels: tuple[tuple[str, str], ...] = ()
    """``task: classify``: (text, expected label) pairs. Empty = only the labels' and scores' shape is checked."""


@dataclass(frozen=True)
class ProbeSettings:
    """The post-deploy integration probe."""

    enabled: bool
    protocol: str
    requests: int
    timeout_s: int
    bleu_threshold: int
    verify_generation: bool = True
    """Also check the converted files' generation in the conversion Job (``verifyGeneration``)."""
    encoders: Mapping[str, EncoderProbe] = field(default_factory=dict)
    """Encoder model name -> what the probe asks of it (every encoder of the stack has an entry)."""


@dataclass(frozen=True)
class Settings:
    """Everything one stack asks for, validated."""

    project: str
    stack: str
    environment: str
    namespace: str
    cluster: ClusterSettings
    image: ImageSettings
    storage: StorageSettings
    models: tuple[ModelSpec, ...]
    serving: ServingSettings
    probe: ProbeSettings
    secrets: frozenset[str]
    """Names of the secret keys the stack sets (their values are read as Pulumi secrets, never here)."""
    token_secrets: Mapping[str, str] = field(default_factory=dict)
    """Model name -> the existing Secret (key ``token``) its download Job reads the Hugging Face token from
    (``hfTokenSecret``); the other models use the stack's ``hfToken`` secret when it is set."""
    warnings: tuple[str, ...] = ()
    """Things that work but deserve a look (e.g. the first ``up`` waits for the node autoscaler)."""
