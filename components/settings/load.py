"""Read a stack's configuration once and validate all of it before anything is created.

Every problem is collected, not just the first, each as ``<key as written>: <what is wrong and how to fix it>``,
e.g. ``models[1].tensorParallel: 3 does not divide numHeads=12 (use 1, 2, 4)``.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from components.settings import api_keys
from components.settings.alerting import SECRETS_DIR, inline_credentials
from components.settings.catalog import KNOWN_ENCODERS, KNOWN_MODELS
from components.settings.facts import ModelFacts, StackFacts
from components.settings.gpus import AWS_GPU_INSTANCES, GPU_MODELS, GpuNodeType
from components.settings.model import (
    AutoscalingSettings,
    AwsClusterSettings,
    CanarySettings,
    ClusterSettings,
    EncoderProbe,
    GatewaySettings,
    ImageSettings,
    IngressSettings,
    KubernetesClusterSettings,
    ProbeSettings,
    ServingSettings,
    Settings,
    StorageSettings,
)
from components.settings.rules import MODEL_RULES, PLAN_RULES, STACK_RULES
from components.settings.schema import (
    ARCHITECTURE_FIELDS,
    ARCHITECTURE_REQUIRED,
    MODEL_KNOBS,
    STACK_KNOBS,
    Knob,
    parse_value,
)
from tritonft.engines.vllm.engine import checkpoint_of, options_of
from tritonft.engines.vllm.rules import served_dtype
from tritonft.errors import UserError
from tritonft.spec import Architecture, Batching, DataType, ModelSpec, WeightDType

DEFAULT_GPU_TOLERATIONS: tuple[dict[str, str], ...] = (
    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
)
AWS_EFS_STORAGE_CLASS = "triton-ft-efs"
PLATFORMS = ("kubernetes", "aws")


@dataclass
class _Reader:
    """Typed values, problems and the set of invalid keys for one mapping of knobs."""

    knobs: tuple[Knob, ...]
    raw: Mapping[str, Any]
    prefix: str = ""
    problems: list[str] = field(default_factory=list)
    values: dict[str, Any] = field(default_factory=dict)
    invalid: set[str] = field(default_factory=set)
    """Keys (without the prefix) that are wrong or missing: rules binding them do not run."""

    def problem(self, key: str, message: str, sub: str = "") -> None:
        root = key.split(".", maxsplit=1)[0].split("[", maxsplit=1)[0]
        self.invalid.add(root)
        self.problems.append(f"{self.prefix}{key}{sub}: {message}")

    def read(self, platform: str | None, platform_known: bool = True) -> None:
        """Check each key on its own: known, on its platform, present when required, of its type and grammar.

        ``platform_known=False`` (platform missing or invalid): platform-bound keys are neither required nor
        refused, since which platform applies is the one problem to report.
        """
        by_key = {k.key: k for k in self.knobs}
        for key in self.raw:
            if key not in by_key:
                close = difflib.get_close_matches(key, list(by_key), n=1, cutoff=0.6)
                hint = f"did you mean `{close[0]}`?" if close else f"known keys: {', '.join(sorted(by_key))}"
                self.problems.append(f"{self.prefix}{key}: unknown key; {hint}")
        for knob in self.knobs:
            present = key_present(self.raw, knob.key)
            in_scope = knob.scope in ("any", platform)
            if present and platform_known and not in_scope:
                self.problem(
                    knob.key, f"applies to platform `{knob.scope}` only; remove it or set platform: {knob.scope}"
                )
                continue
            if not present:
                if knob.required and (knob.scope == "any" or (platform_known and in_scope)):
                    where = f" for platform `{platform}`" if knob.scope != "any" else ""
                    self.problem(knob.key, f"is required{where}: {knob.doc}")
                self.values[knob.key] = knob.default
                continue
            value, problems = parse_value(knob, self.raw[knob.key])
            for sub, message in problems:
                self.problem(knob.key, message, sub)
            self.values[knob.key] = value if not problems else None

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

    First every key on its own (schema), then every cross-field rule (``components.settings.rules``) whose keys
    are all valid. Raises :class:`UserError` listing every problem, each with its key as written in the stack.
    """
    secret_keys = frozenset(secret_keys)
    top = _Reader(STACK_KNOBS, values)
    raw_platform = values.get("platform")
    platform = raw_platform if raw_platform in PLATFORMS else None
    top.read(platform, platform_known=platform is not None)
    for knob in STACK_KNOBS:
        if knob.secret and key_present(values, knob.key) and knob.key not in secret_keys:
            top.problem(
                knob.key,
                f"must be stored as a secret: `pulumi config set --secret {knob.key} <value>` "
                "(a `secure:` value in the stack file)",
            )
    receivers = top.values.get("alertReceivers")
    if "alertReceivers" not in secret_keys and isinstance(receivers, list):
        for path in inline_credentials([r for r in receivers if isinstance(r, dict)]):
            top.problem(
                "alertReceivers",
                f"a credential written in plain text: read it from a file of a Secret "
                f"(`{path.rsplit('.', 1)[-1]}_file: {SECRETS_DIR}/<secret>/<key>`, docs/day2.md#paging) or store the "
                "whole value with `pulumi config set --secret alertReceivers ...`",
                sub=path,
            )
    models = _model_facts(top)
    facts = StackFacts(
        stack=stack,
        values=top.values,
        present=frozenset(k for k in values if key_present(values, k)),
        secret_keys=secret_keys,
        platform=platform,
        node=_gpu_node(top, platform),
        models=tuple(m for m, _ in models),
    )
    problems = list(top.problems)
    for _, reader in models:
        problems += reader.problems
    problems += _run_rules(facts, top, [r for _, r in models])
    settings = None
    if not problems:
        assert platform is not None and facts.node is not None
        settings = _settings(project, facts, top, platform, facts.node)
        # Plan rules (capacity) pack every model onto the GPU nodes: meaningful only once all else is valid.
        warnings: list[str] = []
        for plan_rule in PLAN_RULES:
            refused, noted = plan_rule.check(settings)
            problems += refused
            warnings += noted
        settings = dataclasses.replace(settings, warnings=tuple(warnings))
    if problems or settings is None:
        where = f" ({source})" if source else ""
        raise UserError(f"stack '{stack}' has {len(problems)} configuration problem(s){where}:", problems)
    return settings


def _gpu_node(top: _Reader, platform: str | None) -> GpuNodeType | None:
    """The GPU node shape, or None when the keys that name it are missing or invalid."""
    if platform == "kubernetes" and not top.invalid & {"gpuType", "gpusPerNode", "gpuNodeCpus"} and top.get("gpuType"):
        return GpuNodeType(
            "existing", GPU_MODELS[top.get("gpuType")], top.get("gpusPerNode", 1), top.get("gpuNodeCpus")
        )
    if platform == "aws" and "gpuInstanceType" not in top.invalid and top.get("gpuInstanceType"):
        return AWS_GPU_INSTANCES[top.get("gpuInstanceType")]
    return None


def _model_facts(top: _Reader) -> list[tuple[ModelFacts, _Reader]]:
    entries = top.values.get("models")
    if entries is None:
        return []
    if not entries:
        top.problem("models", "needs at least one model entry")
        return []
    result = []
    for i, entry in enumerate(entries):
        reader = _Reader(MODEL_KNOBS, entry, prefix=f"models[{i}].")
        reader.read(None)
        repo = reader.values.get("hfRepo")
        catalog = KNOWN_MODELS.get(repo) if isinstance(repo, str) else None
        arch = _architecture(reader) if "architecture" in entry else (catalog[1] if catalog else None)
        encoder = KNOWN_ENCODERS.get(repo) if isinstance(repo, str) else None
        facts = ModelFacts(
            index=i,
            values=reader.values,
            present=frozenset(k for k in entry if key_present(entry, k)),
            catalog=catalog,
            architecture=arch,
            encoder_defaults=encoder[1] if encoder else None,
        )
        result.append((facts, reader))
    return result


def _architecture(r: _Reader) -> Architecture | None:
    raw_arch = r.values.get("architecture")
    if raw_arch is None:
        return None
    unknown = sorted(set(raw_arch) - set(ARCHITECTURE_FIELDS))
    missing = [k for k in ARCHITECTURE_REQUIRED if k not in raw_arch]
    if unknown:
        r.problem("architecture", f"unknown key(s) {unknown}; known: {', '.join(ARCHITECTURE_FIELDS)}")
    if missing:
        r.problem("architecture", f"missing {', '.join(missing)}")
    kwargs: dict[str, Any] = {}
    for key, attr in ARCHITECTURE_FIELDS.items():
        if key not in raw_arch:
            continue
        value = raw_arch[key]
        wants_bool = attr in ("gated_ffn", "tied_embeddings")
        if wants_bool != isinstance(value, bool) or (not wants_bool and (not isinstance(value, int) or value < 1)):
            kind = "true or false" if wants_bool else "a positive integer"
            r.problem(f"architecture.{key}", f"must be {kind}, got {value!r}")
        kwargs[attr] = value
    if "architecture" in r.invalid:
        return None
    return Architecture(**kwargs)


def _run_rules(facts: StackFacts, top: _Reader, models: list[_Reader]) -> list[str]:
    """Run each rule whose keys are all valid; a key a rule refuses is not checked by later rules."""
    problems: list[str] = []
    for rule in STACK_RULES:
        if top.invalid & set(rule.keys):
            continue
        for path, message in rule.check(facts):
            top.invalid.add(path)
            problems.append(f"{path}: {message}")
    for m, reader in zip(facts.models, models, strict=True):
        for model_rule in MODEL_RULES:
            if reader.invalid & set(model_rule.keys) or top.invalid & set(model_rule.stack_keys):
                continue
            for path, message in model_rule.check(facts, m):
                reader.invalid.add(path.split(".")[0])
                problems.append(f"{reader.prefix}{path}: {message}")
    return problems


def _settings(project: str, f: StackFacts, top: _Reader, platform: str, node: GpuNodeType) -> Settings:
    """The typed settings of a stack that passed every check."""
    environment = f.environment
    namespace = top.get("namespace", "triton")
    protect = top.get("protectStorage")
    return Settings(
        project=project,
        stack=f.stack,
        environment=environment,
        namespace=namespace,
        cluster=_cluster(top, platform, node, environment),
        image=ImageSettings(
            server_image=top.get("serverImage"),
            tools_image=top.get("toolsImage"),
            triton_version=top.get("tritonVersion"),
            ft_backend_commit=top.get("ftBackendCommit"),
            ft_commit=top.get("ftCommit"),
            cuda_archs=tuple(top.get("cudaArchs", [])),
            base_digests=dict(top.get("baseImageDigests", {})),
            engine_images=dict(top.get("engineImages", {})),
        ),
        storage=StorageSettings(
            size_gib=top.get("storageSizeGiB"),
            headroom_percent=top.get("storageHeadroomPercent", 100),
            protect=(environment == "prod") if protect is None else bool(protect),
        ),
        models=tuple(_spec(m) for m in f.models),
        serving=_serving(f, top, namespace),
        probe=ProbeSettings(
            enabled=top.get("probe", True),
            protocol=top.get("probeProtocol", "grpc"),
            requests=top.get("probeRequests", 20),
            timeout_s=top.get("probeTimeoutSeconds", 900),
            bleu_threshold=top.get("probeBleuThreshold", 15),
            verify_generation=top.get("verifyGeneration", True),
            encoders={m.get("name"): _encoder_probe(m) for m in f.models if m.is_encoder},
        ),
        secrets=frozenset(k for k in f.secret_keys if k in f.present),
        token_secrets={m.get("name"): m.get("hfTokenSecret") for m in f.models if m.get("hfTokenSecret")},
    )


def _cluster(top: _Reader, platform: str, node: GpuNodeType, environment: str) -> ClusterSettings:
    common: dict[str, Any] = {
        "gpu_node": node,
        "gpu_tolerations": tuple(top.get("gpuTolerations", list(DEFAULT_GPU_TOLERATIONS))),
        "ingress_class": top.get("ingressClass", "nginx"),
        "addons": frozenset(top.get("addons", [])),
    }
    if platform == "kubernetes":
        return ClusterSettings(
            platform="kubernetes",
            gpu_node_selector=dict(top.get("gpuNodeSelector", {})),
            cpu_node_selector=dict(top.get("cpuNodeSelector", {})),
            storage_class=top.get("storageClass"),
            kubernetes=KubernetesClusterSettings(
                kubeconfig=top.get("kubeconfig"),
                context=top.get("kubeContext"),
                existing_addons=frozenset(top.get("existingAddons", [])),
                image_registry=top.get("imageRegistry"),
                gpu_nodes=top.get("gpuNodes"),
            ),
            **common,
        )
    return ClusterSettings(
        platform="aws",
        gpu_node_selector={},
        cpu_node_selector={},
        storage_class=top.get("storageClass", AWS_EFS_STORAGE_CLASS),
        aws=AwsClusterSettings(
            region=top.get("awsRegion"),
            kubernetes_version=top.get("kubernetesVersion"),
            eks_support=top.get("eksSupport"),
            vpc_cidr=top.get("vpcCidr"),
            vpc_id=top.get("vpcId"),
            subnet_ids=tuple(top.get("subnetIds", [])),
            public_subnet_ids=tuple(top.get("publicSubnetIds", [])),
            gpu_nodes_min=top.get("gpuNodesMin"),
            gpu_nodes_max=top.get("gpuNodesMax"),
            gpu_nodes_desired=top.get("gpuNodesDesired"),
            gpu_node_disk_gib=top.get("gpuNodeDiskGiB"),
            gpu_ami=top.get("gpuAmi"),
            gpu_capacity_type=top.get("gpuCapacityType"),
            gpu_fallback_instance_types=tuple(top.get("gpuFallbackInstanceTypes", [])),
            system_instance_type=top.get("systemInstanceType"),
            system_nodes_min=top.get("systemNodesMin"),
            system_nodes_max=top.get("systemNodesMax"),
            kms_key_arn=top.get("kmsKeyArn"),
            api_endpoint=top.get("apiEndpoint"),
            api_public_access_cidrs=tuple(top.get("apiPublicAccessCidrs")),
            admin_principal_arns=tuple(top.get("adminPrincipalArns")),
            control_plane_log_retention_days=top.get("controlPlaneLogRetentionDays"),
            nat_gateways=top.get("natGateways", "per-zone" if environment == "prod" else "single"),
            vpc_endpoints=top.get("vpcEndpoints"),
            protect_infrastructure=top.get("protectInfrastructure", environment == "prod"),
            node_ssm_access=top.get("nodeSsmAccess"),
            gpu_quota_check=top.get("gpuQuotaCheck"),
            alert_receivers=tuple(dict(r) for r in top.get("alertReceivers", [])),
            alert_routing=dict(top.get("alertRouting", {})),
            prometheus_storage_gib=top.get("prometheusStorageGiB"),
        ),
        **common,
    )


VLLM_DATA_TYPES = {"float16": DataType.FP16, "bfloat16": DataType.BF16, "float32": DataType.FP32}
"""vLLM's served dtype -> the spec's runtime type (``ModelSpec.gpu_weight_bytes``)."""


def _vllm_spec(m: ModelFacts) -> ModelSpec:
    """A Llama-family model served by vLLM: its ``vllm`` block (over the catalog's checkpoint facts), TP from
    ``tensorParallel``, decoupled (NVIDIA's vLLM backend streams by design), the weights' dtype as published."""
    family, arch, vllm = m.family, m.architecture, m.vllm_spec()
    assert family is not None and arch is not None and vllm is not None, "rules guarantee them"
    spec = ModelSpec(
        name=m.get("name"),
        family=family,
        hf_repo=m.get("hfRepo"),
        revision=m.get("revision"),
        architecture=arch,
        weight_dtype=WeightDType.FP32 if vllm.checkpoint_dtype == "float32" else WeightDType.FP16,
        tensor_parallel=m.get("tensorParallel"),
        decoupled=True,
        vllm=vllm,
    )
    dtype = served_dtype(options_of(spec), checkpoint_of(spec))
    return dataclasses.replace(spec, data_type=VLLM_DATA_TYPES[dtype])


def _spec(m: ModelFacts) -> ModelSpec:
    """The model's spec: a generator's FasterTransformer settings, or an encoder's ``encoder`` block with its
    graph's dtype as the compute type (``dataType`` is refused for encoders) and ``maxSeqLength`` as its input
    limit."""
    family, arch = m.family, m.architecture
    assert family is not None and arch is not None, "rules guarantee a family and an architecture"
    if family.is_vllm:
        return _vllm_spec(m)
    encoder = m.encoder_spec()
    weight_dtype = m.weight_dtype
    data_type = DataType(str(weight_dtype)) if encoder is not None else DataType(m.get("dataType"))
    return ModelSpec(
        name=m.get("name"),
        family=family,
        hf_repo=m.get("hfRepo"),
        revision=m.get("revision"),
        architecture=arch,
        weight_dtype=weight_dtype,
        data_type=data_type,
        tensor_parallel=m.get("tensorParallel"),
        pipeline_parallel=m.get("pipelineParallel"),
        batching=Batching(
            max_batch_size=m.get("maxBatchSize"),
            max_queue_delay_us=m.get("maxQueueDelayUs"),
            preferred_batch_sizes=tuple(m.get("preferredBatchSizes", [])),
        ),
        max_input_len=encoder.max_seq_length if encoder is not None else m.get("maxInputLen"),
        max_output_len=m.get("maxOutputLen"),
        decoupled=m.get("streaming"),
        int8_mode=m.get("int8Mode"),
        instances=m.get("instances"),
        encoder=encoder,
        device=m.device,
    )


def _encoder_probe(m: ModelFacts) -> EncoderProbe:
    """What the probe asks of an encoder: the stack's similarity triples (empty = the probe's defaults) or its
    expected labels."""
    triples = tuple((t["anchor"], t["closer"], t["farther"]) for t in m.get("probeSimilar", []))
    labels = tuple((str(text), label) for text, label in m.get("probeLabels", {}).items())
    return EncoderProbe(triples=triples, labels=labels)


def _serving(f: StackFacts, top: _Reader, namespace: str) -> ServingSettings:
    return ServingSettings(
        replicas_min=top.get("replicasMin"),
        replicas_max=top.get("replicasMax"),
        ingress=IngressSettings(
            host=f.ingress_host,
            class_name=top.get("ingressClass", "nginx"),
            tls=f.tls,
            tls_issuer=f.issuer,
            tls_secret_name=top.get("tlsSecretName") or f"{namespace}-triton-tls",
            auth=f.auth,
            basic_auth_secret=top.get("basicAuthSecretName"),
            oidc_auth_url=top.get("oidcAuthUrl"),
            oidc_signin_url=top.get("oidcSigninUrl"),
            edge=f.edge,
            gateway_name=top.get("gatewayName"),
            gateway_namespace=top.get("gatewayNamespace"),
            api_clients=tuple(top.get("apiClients", [])),
            api_keys=api_keys.parse(top.get("apiKeys", {})),
            api_key_rotation=top.get("apiKeyRotation", 0),
            rate_limit_per_minute=top.get("rateLimitPerMinute", 600),
            max_concurrent_requests=top.get("maxConcurrentRequests", 256),
            rate_limit_redis=top.get("rateLimitRedis"),
            acme_email=top.get("acmeEmail"),
            dns_zone=top.get("dnsZone"),
        ),
        autoscaling=AutoscalingSettings(
            enabled=top.get("autoscaling", True),
            target_ratio=top.get("autoscaleTargetRatio", "500m"),
            scale_down_stabilization_s=top.get("scaleDownStabilizationSeconds"),
            scale_to_zero=f.scale_to_zero,
            target_ttft=top.get("autoscaleTargetTtftSeconds", "1"),
            target_waiting=top.get("autoscaleTargetWaitingRequests", "2"),
        ),
        monitoring=f.monitoring,
        alert_for=dict(top.get("alertFor", {})),
        load_bandwidth_mibps=top.get("loadBandwidthMiBps", 47),
        gemm_tuning=f.gemm_tuning,
        gemm_tuning_timeout_s=top.get("gemmTuningTimeoutSeconds", 900),
        canary=CanarySettings(
            enabled=top.get("canary", False),
            weight_percent=top.get("canaryWeightPercent", 10),
            duration_s=top.get("canaryDurationSeconds", 300),
            max_error_ratio_increase_percent=top.get("canaryMaxErrorRatioIncreasePercent", 1),
            max_latency_increase_percent=top.get("canaryMaxLatencyIncreasePercent", 20),
            min_requests=top.get("canaryMinRequests", 50),
            prometheus_url=top.get("canaryPrometheusUrl"),
        ),
        gateway=GatewaySettings(
            enabled=top.get("gateway", True),
            replicas_min=top.get("gatewayReplicasMin", 2),
            replicas_max=top.get("gatewayReplicasMax", 4),
            cpu=top.get("gatewayCpu", "1"),
            memory=top.get("gatewayMemory", "512Mi"),
            deadline_s=top.get("gatewayDeadlineSeconds", 60),
            coalesce=top.get("gatewayCoalesce", True),
            max_in_flight_per_client=top.get("maxConcurrentPerClient"),
        ),
    )
