"""Read a stack's configuration once and validate all of it before anything is created.

Every problem is collected, not just the first, each as ``<key path>: <what is wrong and how to fix it>``, e.g.
``models[1].tensorParallel: 3 does not divide numHeads=16 (use 1, 2, 4, 8 or 16)``.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from components.settings.capacity import capacity_verdict
from components.settings.catalog import KNOWN_MODELS
from components.settings.gpus import AWS_GPU_INSTANCES, GIB, GPU_MODELS, WEIGHT_BUDGET_FRACTION, GpuNodeType
from components.settings.model import (
    AutoscalingSettings,
    AwsClusterSettings,
    ClusterSettings,
    ImageSettings,
    IngressSettings,
    KubernetesClusterSettings,
    ProbeSettings,
    ServingSettings,
    Settings,
    StorageSettings,
)
from components.settings.schema import (
    ARCHITECTURE_FIELDS,
    ARCHITECTURE_REQUIRED,
    MODEL_KNOBS,
    STACK_KNOBS,
    Knob,
    parse_value,
)
from tritonft.errors import UserError
from tritonft.spec import Architecture, Batching, DataType, Family, ModelSpec, WeightDType

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_HF_REPO = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")
_DIGEST_REF = re.compile(r"^[^\s@]+@sha256:[0-9a-f]{64}$")
_BRANCHES = frozenset({"main", "master", "HEAD", "dev", "develop"})
TP_SIZES = (1, 2, 4, 8)
MAX_MODEL_NAME = 40
"""Model names prefix Job/Deployment names (<= 63 chars with the content key), so keep them short."""

DEFAULT_GPU_TOLERATIONS: tuple[dict[str, str], ...] = (
    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
)
AWS_EFS_STORAGE_CLASS = "triton-ft-efs"


@dataclass
class _Reader:
    """Collects typed values and problems for one mapping of knobs."""

    knobs: tuple[Knob, ...]
    raw: Mapping[str, Any]
    prefix: str = ""
    problems: list[str] = field(default_factory=list)
    values: dict[str, Any] = field(default_factory=dict)

    def path(self, key: str) -> str:
        return f"{self.prefix}{key}"

    def problem(self, key: str, message: str) -> None:
        self.problems.append(f"{self.path(key)}: {message}")

    def read(self, platform: str | None = None) -> None:
        by_key = {k.key: k for k in self.knobs}
        for key in self.raw:
            if key not in by_key:
                close = difflib.get_close_matches(key, list(by_key), n=1, cutoff=0.6)
                hint = f"did you mean `{close[0]}`?" if close else f"known keys: {', '.join(sorted(by_key))}"
                self.problem(key, f"unknown key; {hint}")
        for knob in self.knobs:
            present = key_present(self.raw, knob.key)
            in_scope = platform is None or knob.scope in ("any", platform)
            if present and not in_scope:
                self.problem(
                    knob.key, f"applies to platform `{knob.scope}` only; remove it or set platform: {knob.scope}"
                )
                continue
            if not present:
                # Without a valid platform only `platform` itself is reported: which keys it requires is unknown.
                if knob.required and knob.scope in ("any", platform):
                    where = f" for platform `{platform}`" if knob.scope != "any" else ""
                    self.problem(knob.key, f"is required{where}: {knob.doc}")
                self.values[knob.key] = knob.default
                continue
            value, message = parse_value(knob, self.raw[knob.key])
            if message is not None:
                self.problem(knob.key, message)
            self.values[knob.key] = value if message is None else None

    def get(self, key: str, fallback: Any = None) -> Any:
        value = self.values.get(key)
        return fallback if value is None else value


def key_present(raw: Mapping[str, Any], key: str) -> bool:
    return key in raw and raw[key] is not None


def load_settings(
    values: Mapping[str, Any],
    *,
    project: str,
    stack: str,
    secret_keys: Iterable[str] = (),
    source: str = "",
) -> Settings:
    """Validate one stack's configuration (keys without the ``project:`` prefix, values as the CLI passes them).

    Raises :class:`UserError` listing every problem, each with its key path.
    """
    secret_keys = frozenset(secret_keys)
    problems: list[str] = []
    top = _Reader(STACK_KNOBS, values)
    platform = values.get("platform")
    top.read(platform if platform in ("kubernetes", "aws") else None)
    problems += top.problems

    for knob in STACK_KNOBS:
        if knob.secret and key_present(values, knob.key) and knob.key not in secret_keys:
            problems.append(
                f"{knob.key}: must be stored as a secret: `pulumi config set --secret {knob.key} <value>` "
                "(a `secure:` value in the stack file)"
            )

    environment = top.get("environment", "dev")
    namespace = top.get("namespace", "triton")
    if not _DNS_LABEL.match(namespace) or len(namespace) > 63:
        problems.append(f"namespace: {namespace!r} is not a valid Kubernetes name (lower-case a-z, 0-9, '-')")

    cluster = _cluster(top, platform, problems)
    models = _models(top, cluster.gpu_node if cluster else None, problems)
    serving = _serving(
        top,
        stack=stack,
        environment=environment,
        namespace=namespace,
        cluster=cluster,
        secret_keys=secret_keys,
        problems=problems,
    )
    image = _image(top, platform, cluster, problems)
    warnings: tuple[str, ...] = ()
    if cluster is not None and serving is not None and not problems:
        scaled_max = serving.replicas_max if serving.autoscaling.enabled else serving.replicas_min
        verdict = capacity_verdict(cluster, models, serving.replicas_min, scaled_max)
        problems += verdict.problems
        warnings = verdict.warnings

    if problems:
        where = f" ({source})" if source else ""
        raise UserError(f"stack '{stack}' has {len(problems)} configuration problem(s){where}:", problems)
    assert cluster is not None and image is not None and serving is not None
    protect = top.get("protectStorage")
    return Settings(
        project=project,
        stack=stack,
        environment=environment,
        namespace=namespace,
        cluster=cluster,
        image=image,
        storage=StorageSettings(
            size_gib=top.get("storageSizeGiB"),
            headroom_percent=top.get("storageHeadroomPercent", 100),
            protect=(environment == "prod") if protect is None else bool(protect),
        ),
        models=tuple(models),
        serving=serving,
        probe=ProbeSettings(
            enabled=top.get("probe", True),
            protocol=top.get("probeProtocol", "grpc"),
            requests=top.get("probeRequests", 20),
            timeout_s=top.get("probeTimeoutSeconds", 900),
            bleu_threshold=top.get("probeBleuThreshold", 15),
        ),
        secrets=frozenset(k for k in secret_keys if key_present(values, k)),
        warnings=warnings,
    )


def _cluster(top: _Reader, platform: Any, problems: list[str]) -> ClusterSettings | None:
    if platform not in ("kubernetes", "aws"):
        return None
    tolerations = tuple(top.get("gpuTolerations", list(DEFAULT_GPU_TOLERATIONS)))
    for i, tol in enumerate(tolerations):
        if not isinstance(tol, dict) or not ({"key", "operator"} <= set(tol) or tol.get("operator") == "Exists"):
            problems.append(f"gpuTolerations[{i}]: needs at least `key` and `operator` (a Kubernetes toleration)")
    for key in ("gpuNodeSelector", "cpuNodeSelector"):
        selector = top.get(key, {})
        if not all(isinstance(v, str) for v in selector.values()):
            problems.append(f"{key}: label values must be strings (quote numbers and booleans)")
    common: dict[str, Any] = {
        "gpu_tolerations": tolerations,
        "ingress_class": top.get("ingressClass", "nginx"),
        "addons": frozenset(top.get("addons", [])),
    }
    if platform == "kubernetes":
        gpu_type = top.get("gpuType")
        node = GpuNodeType("existing", GPU_MODELS[gpu_type], top.get("gpusPerNode", 1)) if gpu_type else None
        if node is None:
            return None
        return ClusterSettings(
            platform="kubernetes",
            gpu_node=node,
            gpu_node_selector=dict(top.get("gpuNodeSelector", {})),
            cpu_node_selector=dict(top.get("cpuNodeSelector", {})),
            storage_class=top.get("storageClass"),
            kubernetes=KubernetesClusterSettings(
                kubeconfig=top.get("kubeconfig"),
                context=top.get("kubeContext"),
                existing_addons=frozenset(top.get("existingAddons", [])),
                image_registry=top.get("imageRegistry"),
            ),
            **common,
        )
    instance = top.get("gpuInstanceType")
    node = AWS_GPU_INSTANCES.get(instance) if instance else None
    if instance and node is None:
        close = difflib.get_close_matches(instance, list(AWS_GPU_INSTANCES), n=3, cutoff=0.6)
        hint = f"did you mean {', '.join(close)}?" if close else "use a g4dn, g5, g6, g6e, p3, p4d, p4de or p5 type"
        problems.append(f"gpuInstanceType: {instance!r} is not a GPU instance type we know; {hint}")
    lo, hi, want = top.get("gpuNodesMin", 0), top.get("gpuNodesMax", 2), top.get("gpuNodesDesired", 1)
    if lo > hi:
        problems.append(f"gpuNodesMin: {lo} is larger than gpuNodesMax={hi}; lower the minimum or raise the maximum")
    elif not lo <= want <= hi:
        problems.append(f"gpuNodesDesired: {want} must lie within gpuNodesMin..gpuNodesMax = {lo}..{hi}")
    subnets, vpc_id = top.get("subnetIds", []), top.get("vpcId")
    if bool(subnets) != bool(vpc_id):
        problems.append("vpcId: an existing VPC needs both vpcId and subnetIds (one private subnet per zone, >= 2)")
    elif subnets and len(subnets) < 2:
        problems.append("subnetIds: EKS needs private subnets in at least 2 availability zones")
    addons = set(top.get("addons", []))
    if "prometheus-adapter" in addons and "kube-prometheus-stack" not in addons:
        problems.append("addons: prometheus-adapter reads the Prometheus of kube-prometheus-stack; add it too")
    slo, shi = top.get("systemNodesMin", 1), top.get("systemNodesMax", 3)
    if slo > shi:
        problems.append(f"systemNodesMin: {slo} is larger than systemNodesMax={shi}")
    if node is None:
        return None
    return ClusterSettings(
        platform="aws",
        gpu_node=node,
        gpu_node_selector={},
        cpu_node_selector={},
        storage_class=top.get("storageClass", AWS_EFS_STORAGE_CLASS),
        aws=AwsClusterSettings(
            region=top.get("awsRegion", ""),
            kubernetes_version=top.get("kubernetesVersion", "1.33"),
            vpc_cidr=top.get("vpcCidr", "10.0.0.0/16"),
            vpc_id=top.get("vpcId"),
            subnet_ids=tuple(top.get("subnetIds", [])),
            public_subnet_ids=tuple(top.get("publicSubnetIds", [])),
            gpu_nodes_min=lo,
            gpu_nodes_max=hi,
            gpu_nodes_desired=want,
            gpu_node_disk_gib=top.get("gpuNodeDiskGiB"),
            gpu_ami=top.get("gpuAmi", "al2023"),
            gpu_capacity_type=top.get("gpuCapacityType", "on-demand"),
            system_instance_type=top.get("systemInstanceType", "m6i.2xlarge"),
            system_nodes_min=slo,
            system_nodes_max=shi,
        ),
        **common,
    )


def _models(top: _Reader, node: GpuNodeType | None, problems: list[str]) -> list[ModelSpec]:
    entries = top.get("models") or []
    if top.values.get("models") is not None and not entries:
        problems.append("models: needs at least one model entry")
    specs: list[ModelSpec] = []
    seen: dict[str, int] = {}
    for i, entry in enumerate(entries):
        reader = _Reader(MODEL_KNOBS, entry, prefix=f"models[{i}].")
        reader.read()
        problems += reader.problems
        spec = _model(reader, node, problems)
        name = reader.get("name")
        if isinstance(name, str):
            if name in seen:
                problems.append(
                    f"models[{i}].name: {name!r} is already used by models[{seen[name]}]; names must be unique"
                )
            seen.setdefault(name, i)
        if spec is not None:
            specs.append(spec)
    return specs


def _model(r: _Reader, node: GpuNodeType | None, problems: list[str]) -> ModelSpec | None:
    p = r.prefix
    start = len(problems)
    name, repo, revision = r.get("name"), r.get("hfRepo"), r.get("revision")
    if isinstance(name, str) and (not _DNS_LABEL.match(name) or len(name) > MAX_MODEL_NAME):
        problems.append(
            f"{p}name: {name!r} is not a valid Kubernetes name (lower-case a-z, 0-9 and '-', at most "
            f"{MAX_MODEL_NAME} characters)"
        )
    if isinstance(repo, str) and not _HF_REPO.match(repo):
        problems.append(f"{p}hfRepo: {repo!r} is not a Hugging Face repository id like `t5-small` or `org/name`")
    if isinstance(revision, str) and revision in _BRANCHES:
        problems.append(
            f"{p}revision: {revision!r} is a branch, so the weights could change under the same key; "
            "pin a commit sha (or a tag)"
        )
    family, arch = _family_and_architecture(r, repo, problems)
    tp, pp = r.get("tensorParallel", 1), r.get("pipelineParallel", 1)
    if isinstance(tp, int) and tp not in TP_SIZES:
        problems.append(f"{p}tensorParallel: {tp} is not one of {', '.join(map(str, TP_SIZES))}")
    elif arch is not None and isinstance(tp, int):
        if arch.num_heads % tp:
            options = ", ".join(str(n) for n in TP_SIZES if arch.num_heads % n == 0)
            problems.append(f"{p}tensorParallel: {tp} does not divide numHeads={arch.num_heads} (use {options})")
        if arch.d_ff % tp:
            problems.append(f"{p}tensorParallel: {tp} does not divide the FFN size dFf={arch.d_ff}")
    if node is not None and isinstance(tp, int) and isinstance(pp, int) and tp in TP_SIZES:
        gpus = tp * pp
        if gpus > node.gpus:
            problems.append(
                f"{p}tensorParallel: {tp} x pipelineParallel {pp} = {gpus} GPUs, but a {node.name} node has "
                f"{node.gpus} {node.gpu.name}; use a larger node type or lower the parallelism"
            )
        elif node.gpus % gpus:
            problems.append(
                f"{p}tensorParallel: {node.name} has {node.gpus} GPUs per node, which TP x PP = {gpus} does not "
                "divide; choose a parallelism that divides the node's GPU count"
            )
    data_type = r.get("dataType", "fp16")
    if node is not None and data_type == "bf16" and not node.gpu.supports_bf16:
        problems.append(
            f"{p}dataType: bf16 needs an Ampere or newer GPU (sm >= 80), {node.gpu.name} is "
            f"sm_{node.gpu.compute_capability}; use fp16 or fp32"
        )
    int8 = r.get("int8Mode", 0)
    if int8 and family is not None and family is not Family.GPT2:
        problems.append(f"{p}int8Mode: weight-only int8 is supported for gpt2 only, not {family}")
    batch = r.get("maxBatchSize", 8)
    preferred = r.get("preferredBatchSizes", [])
    if not all(isinstance(b, int) and not isinstance(b, bool) and 1 <= b <= batch for b in preferred):
        problems.append(f"{p}preferredBatchSizes: must be integers between 1 and maxBatchSize={batch}")
    if len(problems) > start or None in (name, repo, revision, family, arch):
        return None
    assert family is not None and arch is not None
    spec = ModelSpec(
        name=name,
        family=family,
        hf_repo=repo,
        revision=revision,
        architecture=arch,
        weight_dtype=WeightDType(r.get("weightDtype", "fp16")),
        data_type=DataType(data_type),
        tensor_parallel=tp,
        pipeline_parallel=pp,
        batching=Batching(
            max_batch_size=batch,
            max_queue_delay_us=r.get("maxQueueDelayUs", 1000),
            preferred_batch_sizes=tuple(preferred),
        ),
        max_input_len=r.get("maxInputLen", 512),
        max_output_len=r.get("maxOutputLen", 128),
        decoupled=r.get("streaming", False),
        int8_mode=int8,
        instances=r.get("instances", 1),
    )
    if node is not None:
        per_gpu = spec.gpu_weight_bytes / spec.gpus
        budget = node.gpu.memory_gib * GIB * WEIGHT_BUDGET_FRACTION
        if per_gpu > budget:
            problems.append(
                f"{p}tensorParallel: weights need ~{per_gpu / GIB:.1f} GiB per GPU at dataType {spec.data_type} "
                f"and TP {spec.tensor_parallel}, over {WEIGHT_BUDGET_FRACTION:.0%} of a {node.gpu.name}'s "
                f"{node.gpu.memory_gib} GiB; raise tensorParallel, use a 16-bit dataType or a larger GPU"
            )
            return None
    return spec


def _family_and_architecture(r: _Reader, repo: Any, problems: list[str]) -> tuple[Family | None, Architecture | None]:
    p = r.prefix
    known = KNOWN_MODELS.get(repo) if isinstance(repo, str) else None
    family_raw = r.get("family")
    family = Family(family_raw) if family_raw else (known[0] if known else None)
    if known and family_raw and Family(family_raw) is not known[0]:
        problems.append(f"{p}family: {family_raw!r} contradicts the catalog ({repo} is {known[0]}); drop `family`")
    raw_arch = r.get("architecture")
    if raw_arch is None:
        if known is None and isinstance(repo, str):
            problems.append(
                f"{p}architecture: {repo!r} is not in the catalog of known models; add `family` and an "
                f"`architecture` block ({', '.join(ARCHITECTURE_REQUIRED)})"
            )
            return family, None
        return family, known[1] if known else None
    if family is None:
        problems.append(f"{p}family: required with a custom `architecture` (one of t5, gpt2, gptj)")
    unknown = sorted(set(raw_arch) - set(ARCHITECTURE_FIELDS))
    missing = [k for k in ARCHITECTURE_REQUIRED if k not in raw_arch]
    if unknown:
        problems.append(f"{p}architecture: unknown key(s) {unknown}; known: {', '.join(ARCHITECTURE_FIELDS)}")
    if missing:
        problems.append(f"{p}architecture: missing {', '.join(missing)}")
    if unknown or missing:
        return family, None
    kwargs: dict[str, Any] = {}
    for key, attr in ARCHITECTURE_FIELDS.items():
        if key not in raw_arch:
            continue
        value = raw_arch[key]
        wants_bool = attr in ("gated_ffn", "tied_embeddings")
        if wants_bool != isinstance(value, bool) or (not wants_bool and (not isinstance(value, int) or value < 1)):
            kind = "true or false" if wants_bool else "a positive integer"
            problems.append(f"{p}architecture.{key}: must be {kind}, got {value!r}")
            return family, None
        kwargs[attr] = value
    return family, Architecture(**kwargs)


def _serving(
    top: _Reader,
    *,
    stack: str,
    environment: str,
    namespace: str,
    cluster: ClusterSettings | None,
    secret_keys: frozenset[str],
    problems: list[str],
) -> ServingSettings | None:
    lo, hi = top.get("replicasMin", 1), top.get("replicasMax", 1)
    if lo > hi:
        problems.append(f"replicasMin: {lo} is larger than replicasMax={hi}; lower the minimum or raise the maximum")
    scale_to_zero = top.get("scaleToZero", False)
    addons = cluster.available_addons if cluster else frozenset()
    if scale_to_zero and "keda" not in addons:
        problems.append("scaleToZero: needs KEDA; add `keda` to `addons` (or `existingAddons`) or turn it off")
    if lo == 0 and not scale_to_zero:
        problems.append("replicasMin: 0 needs scaleToZero: true (an HPA cannot scale to zero)")
    monitoring = top.get("monitoring")
    if monitoring is None:
        monitoring = "kube-prometheus-stack" in addons
    elif monitoring and "kube-prometheus-stack" not in addons:
        problems.append(
            "monitoring: needs the Prometheus operator CRDs; add `kube-prometheus-stack` to `addons` "
            "(or `existingAddons`) or set monitoring: false"
        )
    autoscaling = top.get("autoscaling", True)
    if autoscaling and not scale_to_zero and hi > lo and "prometheus-adapter" not in addons:
        problems.append(
            "autoscaling: the HPA reads Triton's queue:compute ratio through prometheus-adapter; add "
            "`prometheus-adapter` to `addons` (or `existingAddons`), or set autoscaling: false"
        )
    if autoscaling and hi > lo and not scale_to_zero and not monitoring:
        problems.append(
            "autoscaling: the HPA scales on the queue:compute ratio the PrometheusRule records; needs monitoring "
            "(kube-prometheus-stack), or set autoscaling: false"
        )
    outside_local = environment != "local"
    tls = top.get("ingressTls")
    tls = outside_local if tls is None else tls
    auth = top.get("ingressAuth") or ("basic" if outside_local else "none")
    issuer = top.get("tlsIssuer")
    if issuer and "cert-manager" not in addons:
        problems.append("tlsIssuer: needs cert-manager; add `cert-manager` to `addons` or use tlsSecretName")
    if auth == "oidc" and not (top.get("oidcAuthUrl") and top.get("oidcSigninUrl")):
        problems.append("ingressAuth: oidc needs both oidcAuthUrl and oidcSigninUrl")
    basic_secret = top.get("basicAuthSecretName")
    if auth == "basic" and not basic_secret and "ingressHtpasswd" not in secret_keys:
        problems.append(
            "ingressAuth: basic needs credentials: set the secret `pulumi config set --secret ingressHtpasswd "
            '"$(htpasswd -nb USER PASS)"` or basicAuthSecretName (an existing Secret), or use ingressAuth oidc/none'
        )
    host = top.get("ingressHost") or f"{stack}.triton.local"
    if lo > hi:
        return None
    return ServingSettings(
        replicas_min=lo,
        replicas_max=hi,
        ingress=IngressSettings(
            host=host,
            class_name=top.get("ingressClass", "nginx"),
            tls=tls,
            tls_issuer=issuer,
            tls_secret_name=top.get("tlsSecretName") or f"{namespace}-triton-tls",
            auth=auth,
            basic_auth_secret=basic_secret,
            oidc_auth_url=top.get("oidcAuthUrl"),
            oidc_signin_url=top.get("oidcSigninUrl"),
        ),
        autoscaling=AutoscalingSettings(
            enabled=autoscaling,
            target_ratio=top.get("autoscaleTargetRatio", "500m"),
            scale_down_stabilization_s=top.get("scaleDownStabilizationSeconds"),
            scale_to_zero=scale_to_zero,
        ),
        monitoring=monitoring,
        load_bandwidth_mibps=top.get("loadBandwidthMiBps", 100),
    )


def _image(top: _Reader, platform: Any, cluster: ClusterSettings | None, problems: list[str]) -> ImageSettings | None:
    server, tools = top.get("serverImage"), top.get("toolsImage")
    for key, ref in (("serverImage", server), ("toolsImage", tools)):
        if ref and not _DIGEST_REF.match(ref):
            problems.append(
                f"{key}: {ref!r} is not pinned by digest; use `repo@sha256:<64 hex>` (tags can move under you)"
            )
    needs_build = not (server and tools)
    registry = cluster.kubernetes.image_registry if cluster and cluster.kubernetes else None
    if platform == "kubernetes" and needs_build and not registry:
        problems.append(
            "imageRegistry: required on platform kubernetes unless both serverImage and toolsImage are prebuilt "
            "(the built images must be pushed somewhere the cluster can pull from)"
        )
    for key in ("ftBackendCommit", "ftCommit"):
        if not re.fullmatch(r"[0-9a-f]{40}", top.get(key) or ""):
            problems.append(f"{key}: {top.get(key)!r} is not a full git commit sha (40 lower-case hex digits)")
    archs = top.get("cudaArchs", [])
    bad = [a for a in archs if not re.fullmatch(r"[5-9][0-9]", a)]
    if bad:
        problems.append(f"cudaArchs: {bad} are not SM versions like '80' or '90'")
    if cluster is not None:
        needed = str(cluster.gpu_node.gpu.compute_capability)
        if not bad and needed not in archs:
            problems.append(
                f"cudaArchs: the {cluster.gpu_node.gpu.name} GPUs need sm_{needed}; add {needed!r} to cudaArchs"
            )
    return ImageSettings(
        server_image=server,
        tools_image=tools,
        triton_version=top.get("tritonVersion"),
        ft_backend_commit=top.get("ftBackendCommit", ""),
        ft_commit=top.get("ftCommit", ""),
        cuda_archs=tuple(archs),
    )
