"""The stack configuration schema: every knob once, with its type, default and meaning.

Validation (``components.settings.load``), the README's configuration reference and the typed ``config:`` block
of ``Pulumi.yaml`` are all generated from these tables, so the three cannot drift apart.

Values reach the program the way the Pulumi CLI passes them: every value is a string, objects and lists are
JSON. ``parse_value`` turns one raw string into a typed value or a problem message that names the fix.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Literal

from components.settings.gpus import GPU_MODELS
from components.versions import DEFAULT_CUDA_ARCHS, FT_BACKEND_COMMIT, FT_COMMIT, TRITON_VERSION

KnobType = Literal["string", "integer", "boolean", "array", "object", "quantity"]
Scope = Literal["any", "kubernetes", "aws"]

_UNIT_SUFFIX = re.compile(r"^\s*\d+(\.\d+)?\s*([A-Za-z]+)\s*$")
_QUANTITY = re.compile(r"^(\d+(\.\d+)?)(m|k|M|G|Ki|Mi|Gi)?$")


@dataclass(frozen=True)
class Knob:
    """One configuration key."""

    key: str
    type: KnobType
    doc: str
    default: Any = None
    """Static default (also declared in ``Pulumi.yaml``); ``None`` = no static default."""
    default_doc: str = ""
    """How the default is chosen when it depends on other keys (shown in the README)."""
    choices: tuple[str, ...] = ()
    scope: Scope = "any"
    secret: bool = False
    minimum: int | None = None
    maximum: int | None = None
    unit: str = ""
    """Unit of an integer knob (``GiB``, ``seconds`` ...): named in errors when a value carries a unit suffix."""
    items: Literal["string", "object", "integer"] = "string"
    """Element type of an ``array`` knob."""
    required: bool = False

    @property
    def pulumi_type(self) -> str | None:
        """Type for ``Pulumi.yaml``'s typed config, or None where Pulumi's schema cannot express it."""
        if self.type in ("string", "quantity"):
            return "string"
        if self.type in ("integer", "boolean"):
            return self.type
        if self.type == "array" and self.items == "string":
            return "array"
        return None

    def shown_default(self) -> str:
        if self.default_doc:
            return self.default_doc
        if self.default is None:
            return "required" if self.required else "unset"
        return json.dumps(self.default)


def parse_value(knob: Knob, raw: Any) -> tuple[Any, str | None]:
    """One raw config value -> (typed value, None) or (None, problem without the key path)."""
    if knob.type in ("array", "object") and isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError:
            want = "a list" if knob.type == "array" else "a mapping"
            return None, f"must be {want} (YAML list/mapping in the stack file), got {raw!r}"
    if knob.type == "string":
        if not isinstance(raw, str) or raw == "":
            return None, f"must be a non-empty string, got {raw!r}"
        if knob.choices and raw not in knob.choices:
            return None, f"must be one of {', '.join(knob.choices)}; got {raw!r}"
        return raw, None
    if knob.type == "quantity":
        text = str(raw)
        if not _QUANTITY.match(text):
            return None, f"must be a Kubernetes quantity such as '500m' or '2', got {raw!r}"
        return text, None
    if knob.type == "boolean":
        text = str(raw).strip().lower()
        if text in ("true", "false"):
            return text == "true", None
        return None, f"must be true or false, got {raw!r}"
    if knob.type == "integer":
        return _parse_int(knob, raw)
    if knob.type == "array":
        if not isinstance(raw, list):
            return None, f"must be a list, got {raw!r}"
        if knob.items == "string" and not all(isinstance(x, str) for x in raw):
            return None, f"must be a list of strings, got {raw!r}"
        if knob.items == "object" and not all(isinstance(x, dict) for x in raw):
            return None, f"must be a list of mappings, got {raw!r}"
        if knob.items == "integer" and not all(isinstance(x, int) and not isinstance(x, bool) for x in raw):
            return None, f"must be a list of integers, got {raw!r}"
        if knob.choices:
            bad = [x for x in raw if x not in knob.choices]
            if bad:
                return None, f"has unknown entries {bad}; allowed: {', '.join(knob.choices)}"
        return list(raw), None
    if not isinstance(raw, dict):
        return None, f"must be a mapping, got {raw!r}"
    return dict(raw), None


def _parse_int(knob: Knob, raw: Any) -> tuple[Any, str | None]:
    if isinstance(raw, bool):
        return None, f"must be an integer, got {raw!r}"
    text = str(raw).strip()
    try:
        value = int(text)
    except ValueError:
        unit = _UNIT_SUFFIX.match(text)
        if unit and knob.unit:
            number = text[: unit.start(2)].strip()
            return None, f"is a whole number of {knob.unit}: write {number} (without the unit), not {raw!r}"
        return None, f"must be an integer{f' number of {knob.unit}' if knob.unit else ''}, got {raw!r}"
    if knob.minimum is not None and value < knob.minimum:
        return None, f"must be >= {knob.minimum}, got {value}"
    if knob.maximum is not None and value > knob.maximum:
        return None, f"must be <= {knob.maximum}, got {value}"
    return value, None


ENVIRONMENTS = ("local", "dev", "staging", "prod", "review")
PLATFORMS = ("kubernetes", "aws")
ADDONS = ("ingress-nginx", "cert-manager", "kube-prometheus-stack", "prometheus-adapter", "keda")
DATA_TYPES = ("fp32", "fp16", "bf16")
WEIGHT_DTYPES = ("fp32", "fp16")
FAMILIES = ("t5", "gpt2", "gptj")

STACK_KNOBS: tuple[Knob, ...] = (
    # -- where and what kind of environment
    Knob(
        "platform",
        "string",
        "Where the cluster comes from: an existing cluster (`kubernetes`) or EKS built by this stack (`aws`).",
        required=True,
        choices=PLATFORMS,
    ),
    Knob(
        "environment",
        "string",
        "Environment tier; drives safe defaults (TLS/auth on outside `local`, storage protected in `prod`).",
        default="dev",
        choices=ENVIRONMENTS,
    ),
    Knob("namespace", "string", "Kubernetes namespace for every workload of the stack.", default="triton"),
    # -- existing cluster
    Knob(
        "kubeconfig",
        "string",
        "Path to the kubeconfig file (or its content as a secret).",
        scope="kubernetes",
        default_doc="`$KUBECONFIG` or `~/.kube/config`",
    ),
    Knob(
        "kubeContext",
        "string",
        "Context in the kubeconfig to use.",
        scope="kubernetes",
        default_doc="the kubeconfig's current context",
    ),
    Knob(
        "gpuType",
        "string",
        "GPU model of the existing cluster's GPU nodes (sizes memory checks).",
        scope="kubernetes",
        required=True,
        choices=tuple(GPU_MODELS),
    ),
    Knob(
        "gpusPerNode",
        "integer",
        "GPUs on each GPU node of the existing cluster.",
        scope="kubernetes",
        default=1,
        minimum=1,
        maximum=16,
    ),
    Knob(
        "gpuNodeSelector",
        "object",
        "Node selector that lands pods on GPU nodes (label -> value).",
        default_doc="`{}` (on aws the platform labels and selects its own GPU nodes)",
        scope="kubernetes",
    ),
    Knob(
        "gpuTolerations",
        "array",
        "Tolerations for the GPU nodes' taints (Kubernetes toleration objects).",
        items="object",
        default_doc="`nvidia.com/gpu` Exists NoSchedule",
        scope="kubernetes",
    ),
    Knob(
        "cpuNodeSelector",
        "object",
        "Node selector for CPU work (conversion Jobs); never GPU nodes.",
        default_doc="`{}` (on aws: the system node group)",
        scope="kubernetes",
    ),
    Knob(
        "storageClass",
        "string",
        "ReadWriteMany storage class of the model store.",
        default_doc="the cluster default on kubernetes; the EFS class this stack creates on aws",
    ),
    Knob("ingressClass", "string", "IngressClass of the HTTP and gRPC ingresses.", default="nginx"),
    Knob(
        "existingAddons",
        "array",
        "Add-ons the existing cluster already runs (enables ServiceMonitor, certificates, KEDA objects).",
        default=[],
        choices=ADDONS,
        scope="kubernetes",
    ),
    # -- AWS
    Knob("awsRegion", "string", "AWS region of the EKS cluster.", scope="aws", required=True),
    Knob("kubernetesVersion", "string", "EKS Kubernetes version.", default="1.33", scope="aws"),
    Knob(
        "vpcCidr",
        "string",
        "CIDR of the VPC this stack creates (ignored with `subnetIds`).",
        default="10.0.0.0/16",
        scope="aws",
    ),
    Knob("vpcId", "string", "Existing VPC id (with `subnetIds`).", scope="aws", default_doc="a new VPC"),
    Knob(
        "publicSubnetIds",
        "array",
        "Existing public subnets for internet-facing load balancers (with `vpcId`).",
        default=[],
        scope="aws",
    ),
    Knob(
        "subnetIds", "array", "Existing private subnet ids to use instead of creating a VPC.", default=[], scope="aws"
    ),
    Knob(
        "gpuInstanceType",
        "string",
        "EC2 instance type of the GPU node group (must be a known GPU type).",
        scope="aws",
        required=True,
    ),
    Knob(
        "gpuNodesMin",
        "integer",
        "Fewest GPU nodes (the node group's minSize; cluster-autoscaler never goes below). The models' pods at "
        "replicasMin must fit them, or the first `up` waits for scale-up (a warning).",
        default=0,
        minimum=0,
        scope="aws",
    ),
    Knob(
        "gpuNodesMax",
        "integer",
        "Most GPU nodes cluster-autoscaler may add (the node group's maxSize); the models' pods at replicasMax "
        "must fit them. Equal to gpuNodesMin: a fixed-size GPU group.",
        default=2,
        minimum=1,
        scope="aws",
    ),
    Knob("gpuNodesDesired", "integer", "Initial GPU nodes.", default=1, minimum=0, scope="aws"),
    Knob(
        "gpuNodeDiskGiB",
        "integer",
        "Root disk of each GPU node.",
        unit="GiB",
        minimum=50,
        scope="aws",
        default_doc="sized from the images and the largest model",
    ),
    Knob(
        "gpuAmi",
        "string",
        "GPU node OS: EKS AL2023 NVIDIA or Bottlerocket NVIDIA (bundles the device plugin).",
        default="al2023",
        choices=("al2023", "bottlerocket"),
        scope="aws",
    ),
    Knob(
        "gpuCapacityType",
        "string",
        "On-demand or spot GPU capacity.",
        default="on-demand",
        choices=("on-demand", "spot"),
        scope="aws",
    ),
    Knob(
        "systemInstanceType",
        "string",
        "Instance type of the CPU system node group (controllers, conversion Jobs).",
        default="m6i.2xlarge",
        scope="aws",
    ),
    Knob("systemNodesMin", "integer", "Minimum system nodes.", default=1, minimum=1, scope="aws"),
    Knob("systemNodesMax", "integer", "Maximum system nodes.", default=3, minimum=1, scope="aws"),
    Knob(
        "addons",
        "array",
        "Add-ons this stack installs with pinned Helm charts.",
        default=[],
        choices=ADDONS,
        scope="aws",
    ),
    # -- images
    Knob(
        "serverImage",
        "string",
        "Prebuilt Triton+FT server image, pinned by digest (`repo@sha256:...`); skips the build.",
        default_doc="built by this stack",
    ),
    Knob(
        "toolsImage",
        "string",
        "Prebuilt tools image (`tritonft` CLI), pinned by digest; skips the build.",
        default_doc="built by this stack",
    ),
    Knob(
        "imageRegistry",
        "string",
        "Registry to push built images to on `kubernetes` (on `aws`: an ECR repository of this stack).",
        scope="kubernetes",
        default_doc="required unless both images are prebuilt",
    ),
    Knob("tritonVersion", "string", "Triton container release the server image builds on.", default=TRITON_VERSION),
    Knob(
        "ftBackendCommit",
        "string",
        "fastertransformer_backend commit built into the server image.",
        default=FT_BACKEND_COMMIT,
    ),
    Knob("ftCommit", "string", "FasterTransformer commit the backend is built against.", default=FT_COMMIT),
    Knob(
        "cudaArchs",
        "array",
        "CUDA SM architectures compiled into FasterTransformer.",
        default=list(DEFAULT_CUDA_ARCHS),
    ),
    # -- storage
    Knob(
        "storageSizeGiB",
        "integer",
        "Size of the model store.",
        unit="GiB",
        minimum=1,
        default_doc="converted bytes of all models x (1 + headroom), rounded up",
    ),
    Knob(
        "storageHeadroomPercent",
        "integer",
        "Extra room in the model store over the converted weights (100 = room for one re-conversion).",
        default=100,
        minimum=0,
        maximum=400,
        unit="percent",
    ),
    Knob(
        "protectStorage",
        "boolean",
        "Protect the model store from `pulumi destroy`.",
        default_doc="true in `prod`, else false",
    ),
    # -- models
    Knob("models", "array", "The models to serve (see *Model entries*).", items="object", required=True),
    # -- serving
    Knob("replicasMin", "integer", "Minimum Triton replicas.", default=1, minimum=0),
    Knob("replicasMax", "integer", "Maximum Triton replicas.", default=1, minimum=1),
    Knob(
        "ingressHost",
        "string",
        "Base DNS name of the endpoints: each model is served at `<model>.<ingressHost>` (HTTP under `/v2`, "
        "gRPC on the same host).",
        default_doc="`<stack>.triton.local`",
    ),
    Knob("ingressTls", "boolean", "Serve the ingresses over TLS.", default_doc="false in `local`, else true"),
    Knob(
        "tlsIssuer",
        "string",
        "cert-manager ClusterIssuer that signs the ingress certificate.",
        default_doc="unset: use `tlsSecretName`",
    ),
    Knob(
        "tlsSecretName",
        "string",
        "Existing TLS Secret for the ingresses (when no issuer).",
        default_doc="`<namespace>-triton-tls`",
    ),
    Knob(
        "ingressAuth",
        "string",
        "Authentication in front of the ingresses.",
        choices=("none", "basic", "oidc"),
        default_doc="`none` in `local`, else `basic`",
    ),
    Knob(
        "basicAuthSecretName",
        "string",
        "Existing Secret (key `auth`, htpasswd lines) for basic auth, instead of `ingressHtpasswd`.",
        default_doc="created from `ingressHtpasswd`",
    ),
    Knob("oidcAuthUrl", "string", "OIDC auth URL (oauth2-proxy `/oauth2/auth`) when `ingressAuth: oidc`."),
    Knob("oidcSigninUrl", "string", "OIDC sign-in URL when `ingressAuth: oidc`."),
    Knob("autoscaling", "boolean", "Scale replicas on Triton's queue-time / compute-time ratio.", default=True),
    Knob(
        "autoscaleTargetRatio",
        "quantity",
        "Target average queue:compute ratio per pod (Kubernetes quantity).",
        default="500m",
    ),
    Knob(
        "scaleDownStabilizationSeconds",
        "integer",
        "HPA scale-down stabilization window (scale-up is immediate; cold starts take minutes).",
        default_doc="max(600, 2 x (startup budget + node scale-up)), at most 3600",
        minimum=60,
        maximum=3600,
        unit="seconds",
    ),
    Knob("scaleToZero", "boolean", "Use a KEDA ScaledObject that scales to zero when idle.", default=False),
    Knob(
        "monitoring",
        "boolean",
        "ServiceMonitor, PrometheusRule and Grafana dashboard.",
        default_doc="true when kube-prometheus-stack is installed or present",
    ),
    Knob(
        "loadBandwidthMiBps",
        "integer",
        "Weight load bandwidth from the store assumed by the startup budget.",
        default=100,
        minimum=1,
        unit="MiB/s",
    ),
    # -- probe
    Knob(
        "probe",
        "boolean",
        "Run the integration probe during `pulumi up` (fails the update when the model does not answer).",
        default=True,
    ),
    Knob("probeProtocol", "string", "Protocol the probe uses.", default="grpc", choices=("http", "grpc")),
    Knob("probeRequests", "integer", "Requests the probe times for p50/p95.", default=20, minimum=1, maximum=10000),
    Knob("probeTimeoutSeconds", "integer", "Overall probe deadline.", default=900, minimum=10, unit="seconds"),
    Knob(
        "probeBleuThreshold", "integer", "Minimum BLEU of T5 translation samples.", default=15, minimum=0, maximum=100
    ),
    # -- secrets
    Knob("hfToken", "string", "Hugging Face token for gated/private repos (set with `--secret`).", secret=True),
    Knob(
        "ingressHtpasswd",
        "string",
        "htpasswd lines for basic auth (set with `--secret`).",
        secret=True,
        default_doc="required when `ingressAuth: basic` and no existing secret",
    ),
)

MODEL_KNOBS: tuple[Knob, ...] = (
    Knob("name", "string", "Model name in Triton and Kubernetes (DNS-1123 label).", required=True),
    Knob("hfRepo", "string", "Hugging Face repository id.", required=True),
    Knob("revision", "string", "Pinned commit sha or tag of the repository (never a branch).", required=True),
    Knob("family", "string", "Model family.", choices=FAMILIES, default_doc="from the catalog of known repos"),
    Knob(
        "architecture",
        "object",
        "Shape of a model not in the catalog: `dModel`, `numHeads`, `numLayers`, "
        "`dFf`, `vocabSize` (+ `dKv`, `numDecoderLayers`, `maxPositions`, `gatedFfn`, `tiedEmbeddings`).",
        default_doc="from the catalog",
    ),
    Knob("weightDtype", "string", "Element type of the converted weight files.", default="fp16", choices=WEIGHT_DTYPES),
    Knob("dataType", "string", "Runtime compute type on the GPU.", default="fp16", choices=DATA_TYPES),
    Knob("tensorParallel", "integer", "GPUs one replica's tensors are split over (1, 2, 4 or 8).", default=1),
    Knob("pipelineParallel", "integer", "Pipeline stages.", default=1, minimum=1, maximum=8),
    Knob("maxBatchSize", "integer", "Triton max_batch_size.", default=8, minimum=1, maximum=1024),
    Knob("maxQueueDelayUs", "integer", "Dynamic batching queue delay.", default=1000, minimum=0, unit="microseconds"),
    Knob("preferredBatchSizes", "array", "Dynamic batching preferred sizes.", default=[], items="integer"),
    Knob("maxInputLen", "integer", "Longest prompt in tokens.", default=512, minimum=1),
    Knob("maxOutputLen", "integer", "Longest generation in tokens.", default=128, minimum=1),
    Knob("streaming", "boolean", "Decoupled (streaming) mode.", default=False),
    Knob("int8Mode", "integer", "Weight-only int8 (GPT-2 only).", default=0, minimum=0, maximum=1),
    Knob("instances", "integer", "Triton model instances per replica.", default=1, minimum=1, maximum=8),
)

ARCHITECTURE_FIELDS = {
    "dModel": "d_model",
    "numHeads": "num_heads",
    "numLayers": "num_layers",
    "dFf": "d_ff",
    "vocabSize": "vocab_size",
    "dKv": "d_kv",
    "numDecoderLayers": "num_decoder_layers",
    "maxPositions": "max_positions",
    "gatedFfn": "gated_ffn",
    "tiedEmbeddings": "tied_embeddings",
}
ARCHITECTURE_REQUIRED = ("dModel", "numHeads", "numLayers", "dFf", "vocabSize")
