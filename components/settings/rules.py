"""Every cross-field rule of a stack's configuration, in one table.

A rule binds some keys (as written in the stack file), states itself in one sentence (shown in the README next to
those keys) and checks typed facts that the per-key validation has already produced. The loader runs a rule only
when every key it binds is valid, and a key a rule refuses is not checked again by later rules: one root problem
gives one message, not a cascade of follow-on ones. Model rules run once per entry of ``models``; their keys are
model-entry keys and their messages are prefixed ``models[i].``.

To add a rule: write its check below with ``@stack_rule``/``@model_rule`` (or add a tuple of rules from a module
of its own to :data:`STACK_RULES`/:data:`MODEL_RULES`), and give it a case in
``tests/components/settings/test_rules.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from components.settings import api_keys, chart_facts, eks, kube
from components.settings.alerting import routing_problems
from components.settings.built_cluster_rules import BUILT_CLUSTER_RULES
from components.settings.capacity import (
    capacity_pool,
    capacity_verdict,
    cpu_fit_verdict,
    model_shapes,
    nodes_for_a_surge,
    nodes_key,
    reference_job_fit_verdict,
    surging_models,
)
from components.settings.catalog import closest_known
from components.settings.facts import ModelFacts, Problem, StackFacts
from components.settings.ft_rules import FT_MODEL_RULES
from components.settings.gpus import AWS_GPU_INSTANCES, GIB, WEIGHT_BUDGET_FRACTION
from components.settings.model import Settings
from components.settings.vllm_rules import VLLM_MODEL_RULES, gated_repos_need_token
from tritonft.spec import (
    DataType,
    Device,
    EncoderTask,
    Family,
    parameter_count,
)

GPU_KEYS = ("gpuType", "gpusPerNode", "gpuInstanceType")
"""The stack keys that say which GPU node a model lands on."""
ADDON_KEYS = ("addons", "existingAddons")
AUTH_KEYS = ("ingressAuth", "environment", "edge", "platform")
"""``ingressAuth`` defaults from ``environment``: a rule reading the effective auth binds both."""
TLS_KEYS = ("ingressTls", "environment")
GPT_FAMILIES = (Family.GPT2, Family.GPTJ)


@dataclass(frozen=True)
class StackRule:
    """A rule over stack keys."""

    id: str
    keys: tuple[str, ...]
    doc: str
    check: Callable[[StackFacts], Iterable[Problem]]


@dataclass(frozen=True)
class ModelRule:
    """A rule over one model entry (``keys``), possibly with stack keys it reads (``stack_keys``)."""

    id: str
    keys: tuple[str, ...]
    doc: str
    check: Callable[[StackFacts, ModelFacts], Iterable[Problem]]
    stack_keys: tuple[str, ...] = ()


@dataclass(frozen=True)
class PlanRule:
    """A rule over the whole validated plan; runs only when every key and every other rule passed."""

    id: str
    keys: tuple[str, ...]
    doc: str
    check: Callable[[Settings], tuple[Sequence[str], Sequence[str]]]
    """Settings -> (problems, warnings), each ``<key as written>: <message>``."""


_STACK: list[StackRule] = []
_MODEL: list[ModelRule] = []


def stack_rule(
    rule_id: str, keys: tuple[str, ...], doc: str
) -> Callable[[Callable[[StackFacts], Iterable[Problem]]], Callable[[StackFacts], Iterable[Problem]]]:
    def register(check: Callable[[StackFacts], Iterable[Problem]]) -> Callable[[StackFacts], Iterable[Problem]]:
        _STACK.append(StackRule(rule_id, keys, doc, check))
        return check

    return register


ModelCheck = Callable[[StackFacts, ModelFacts], Iterable[Problem]]


def model_rule(
    rule_id: str, keys: tuple[str, ...], doc: str, stack_keys: tuple[str, ...] = ()
) -> Callable[[ModelCheck], ModelCheck]:
    def register(check: ModelCheck) -> ModelCheck:
        _MODEL.append(ModelRule(rule_id, keys, doc, check, stack_keys))
        return check

    return register


# -- node groups and network (aws) -------------------------------------------------------------------------------


@stack_rule(
    "gpu-nodes-range",
    ("gpuNodesMin", "gpuNodesDesired", "gpuNodesMax"),
    "`gpuNodesMin` <= `gpuNodesDesired` <= `gpuNodesMax`.",
)
def _gpu_nodes_range(f: StackFacts) -> Iterable[Problem]:
    if f.platform != "aws":
        return
    lo, want, hi = f.get("gpuNodesMin", 0), f.get("gpuNodesDesired", 1), f.get("gpuNodesMax", 2)
    if lo > hi:
        yield "gpuNodesMin", f"{lo} is larger than gpuNodesMax={hi}; lower the minimum or raise the maximum"
    elif not lo <= want <= hi:
        yield "gpuNodesDesired", f"{want} must lie within gpuNodesMin..gpuNodesMax = {lo}..{hi}"


@stack_rule(
    "gpu-fallback-types-same-gpus",
    ("gpuFallbackInstanceTypes", "gpuInstanceType"),
    "aws: each of `gpuFallbackInstanceTypes` has the GPUs of `gpuInstanceType` (same model, same count per node), "
    "so every sizing and engine decision made for it holds on a fallback node.",
)
def _gpu_fallback_types(f: StackFacts) -> Iterable[Problem]:
    fallbacks = f.get("gpuFallbackInstanceTypes", [])
    if f.platform != "aws" or not fallbacks or f.node is None:
        return
    want = f.node
    for i, name in enumerate(fallbacks):
        node = AWS_GPU_INSTANCES.get(name)
        if name == want.name:
            yield f"gpuFallbackInstanceTypes[{i}]", f"{name} is gpuInstanceType itself; list other types only"
        elif node is None or (node.gpu.name, node.gpus) != (want.gpu.name, want.gpus):
            same = sorted(n for n, t in AWS_GPU_INSTANCES.items() if (t.gpu.name, t.gpus) == (want.gpu.name, want.gpus))
            has = "an unknown GPU type" if node is None else f"{node.gpus} x {node.gpu.name}"
            yield (
                f"gpuFallbackInstanceTypes[{i}]",
                f"{name} has {has}, gpuInstanceType {want.name} {want.gpus} x {want.gpu.name}: the models are sized "
                f"and built for that GPU; use one of {', '.join(n for n in same if n != want.name) or 'none'}",
            )


@stack_rule("system-nodes-range", ("systemNodesMin", "systemNodesMax"), "`systemNodesMin` <= `systemNodesMax`.")
def _system_nodes_range(f: StackFacts) -> Iterable[Problem]:
    lo, hi = f.get("systemNodesMin", 1), f.get("systemNodesMax", 3)
    if f.platform == "aws" and lo > hi:
        yield "systemNodesMin", f"{lo} is larger than systemNodesMax={hi}; lower the minimum or raise the maximum"


@stack_rule(
    "existing-vpc-needs-subnets",
    ("vpcId", "subnetIds"),
    "An existing VPC takes both `vpcId` and its private `subnetIds`.",
)
def _existing_vpc(f: StackFacts) -> Iterable[Problem]:
    subnets, vpc_id = f.get("subnetIds", []), f.get("vpcId")
    if vpc_id and not subnets:
        yield "subnetIds", "an existing VPC (vpcId) needs its private subnet ids (one per zone, at least 2)"
    elif subnets and not vpc_id:
        yield "vpcId", "subnetIds name subnets of an existing VPC: give its vpcId too"


@stack_rule(
    "eks-version-offered",
    ("kubernetesVersion", "eksSupport"),
    "aws: `kubernetesVersion` is one EKS still offers (standard or extended support: `components/settings/eks.py`, "
    "judged on today's date); one in extended support only with `eksSupport: extended`.",
)
def _eks_version_offered(f: StackFacts) -> Iterable[Problem]:
    if f.platform != "aws":
        return
    support = f.get("eksSupport", eks.DEFAULT_SUPPORT)
    for message in eks.version_problems(f.get("kubernetesVersion"), eks.today(), support):
        yield "kubernetesVersion", message.split(": ", 1)[1]


def _bounded_charts_doc() -> str:
    """The pinned charts whose bounds leave out some minor EKS offers (those the rule below can refuse)."""
    bounded = [
        f"{f.chart} {f.version}: {chart_facts.minors_text(f)}"
        for f in chart_facts.PINNED.values()
        if not all(chart_facts.supports(f, minor) for minor in eks.EKS_VERSIONS)
    ]
    return "; ".join(bounded)


def _growing_node_groups(f: StackFacts) -> list[str]:
    """The node groups of an ``aws`` stack that may grow (cluster-autoscaler is installed for them), as
    ``systemNodesMin 1 < systemNodesMax 3``."""
    groups = [
        ("systemNodesMin", f.get("systemNodesMin", 1), "systemNodesMax", f.get("systemNodesMax", 3)),
        ("gpuNodesMin", f.get("gpuNodesMin", 0), "gpuNodesMax", f.get("gpuNodesMax", 2)),
    ]
    return [f"{lo_key} {lo} < {hi_key} {hi}" for lo_key, lo, hi_key, hi in groups if hi > lo]


@stack_rule(
    "charts-made-for-the-minor",
    ("kubernetesVersion", "eksSupport", "addons", "systemNodesMin", "systemNodesMax", "gpuNodesMin", "gpuNodesMax"),
    "aws: every pinned chart the stack installs (its `addons`, what they bring, and the platform's own) is made for "
    f"`kubernetesVersion`, as the chart's own files state ({_bounded_charts_doc()}; "
    "`components/settings/chart_facts.py`); when a node group may grow (a `*NodesMax` above its `*NodesMin`), "
    "cluster-autoscaler has a release of that minor pinned (its minor must be the cluster's: "
    f"{chart_facts.autoscaler_minors_text()}).",
)
def _charts_made_for_the_minor(f: StackFacts) -> Iterable[Problem]:
    if f.platform != "aws":
        return
    minor = f.get("kubernetesVersion")
    charts = chart_facts.installed_charts(f.get("addons", []))
    support = f.get("eksSupport", eks.DEFAULT_SUPPORT)
    growing = _growing_node_groups(f)
    offered = [m for m in eks.EKS_VERSIONS if not eks.version_problems(m, eks.today(), support)]
    fits = [
        m
        for m in offered
        if all(chart_facts.supports(facts, m) for _, facts in charts)
        and (not growing or chart_facts.autoscaler_release(m) is not None)
    ]
    use = f"set kubernetesVersion to {_either(fits)}" if fits else "no minor EKS offers suits every chart it installs"
    if growing and minor in eks.EKS_VERSIONS and chart_facts.autoscaler_release(minor) is None:
        yield (
            "kubernetesVersion",
            f"{minor} has no cluster-autoscaler release pinned (its minor must be the cluster's; pinned for "
            f"{chart_facts.autoscaler_minors_text()}), and this stack's node groups may grow "
            f"({', '.join(growing)}), which is cluster-autoscaler's job; {use}, or make every node group fixed-size "
            "(each *NodesMax equal to its *NodesMin)",
        )
    for addon, facts in charts:
        if chart_facts.supports(facts, minor):
            continue
        source = f", per {facts.bounds_from}" if facts.bounds_from else ""
        drop = "" if addon is None else f", or remove {addon} from addons"
        if addon is not None and addon != facts.chart:
            drop += f" (it brings {facts.chart})"
        yield (
            "kubernetesVersion",
            f"{minor} is not a minor the pinned {facts.chart} chart {facts.version} is made for "
            f"({chart_facts.minors_text(facts)}{source}); {use}{drop}",
        )


def _either(items: Sequence[str]) -> str:
    """``a``, ``a or b``, ``a, b or c``."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} or {items[-1]}"


@stack_rule("subnets-in-two-zones", ("subnetIds",), "`subnetIds` lists at least 2 subnets (EKS needs 2 zones).")
def _two_zones(f: StackFacts) -> Iterable[Problem]:
    subnets = f.get("subnetIds", [])
    if len(subnets) == 1:
        yield "subnetIds", "EKS needs private subnets in at least 2 availability zones; list one per zone"


@stack_rule(
    "public-subnets-need-vpc",
    ("publicSubnetIds", "vpcId"),
    "`publicSubnetIds` only with an existing VPC (`vpcId`).",
)
def _public_subnets(f: StackFacts) -> Iterable[Problem]:
    if f.get("publicSubnetIds", []) and not f.get("vpcId"):
        yield "publicSubnetIds", "only used with an existing VPC: set vpcId and subnetIds, or remove publicSubnetIds"


# -- add-ons -----------------------------------------------------------------------------------------------------


@stack_rule(
    "prometheus-adapter-needs-prometheus",
    ("addons",),
    "`addons`: `prometheus-adapter` comes with `kube-prometheus-stack` (it reads that Prometheus).",
)
def _adapter_needs_prometheus(f: StackFacts) -> Iterable[Problem]:
    addons = set(f.get("addons", []))
    if "prometheus-adapter" in addons and "kube-prometheus-stack" not in addons:
        yield "addons", "prometheus-adapter reads the Prometheus of kube-prometheus-stack; add it too"


# -- images ------------------------------------------------------------------------------------------------------


@stack_rule(
    "build-needs-registry",
    ("imageRegistry", "serverImage", "toolsImage"),
    "On `kubernetes`, `imageRegistry` is required unless both `serverImage` and `toolsImage` are prebuilt.",
)
def _build_needs_registry(f: StackFacts) -> Iterable[Problem]:
    prebuilt = f.get("serverImage") and f.get("toolsImage")
    if f.platform == "kubernetes" and not prebuilt and not f.get("imageRegistry"):
        yield (
            "imageRegistry",
            "required on platform kubernetes unless both serverImage and toolsImage are prebuilt "
            "(the built images must be pushed somewhere the cluster can pull from)",
        )


@stack_rule(
    "cuda-archs-cover-gpu",
    ("cudaArchs", *GPU_KEYS),
    "`cudaArchs` includes the SM version of the GPU (`gpuType` / `gpuInstanceType`).",
)
def _cuda_archs(f: StackFacts) -> Iterable[Problem]:
    if f.node is None:
        return
    needed = str(f.node.gpu.compute_capability)
    if needed not in f.get("cudaArchs", []):
        yield "cudaArchs", f"the {f.node.gpu.name} GPUs need sm_{needed}; add {needed!r} to cudaArchs"


# -- replicas and autoscaling ------------------------------------------------------------------------------------


@stack_rule("replicas-range", ("replicasMin", "replicasMax"), "`replicasMin` <= `replicasMax`.")
def _replicas_range(f: StackFacts) -> Iterable[Problem]:
    lo, hi = f.get("replicasMin", 1), f.get("replicasMax", 1)
    if lo > hi:
        yield "replicasMin", f"{lo} is larger than replicasMax={hi}; lower the minimum or raise the maximum"


@stack_rule(
    "gateway-replicas-range",
    ("gatewayReplicasMin", "gatewayReplicasMax"),
    "`gatewayReplicasMin` <= `gatewayReplicasMax`.",
)
def _gateway_replicas_range(f: StackFacts) -> Iterable[Problem]:
    lo, hi = f.get("gatewayReplicasMin", 2), f.get("gatewayReplicasMax", 4)
    if lo > hi:
        yield (
            "gatewayReplicasMin",
            f"{lo} is larger than gatewayReplicasMax={hi}; lower the minimum or raise the maximum",
        )


@stack_rule(
    "zero-replicas-need-scale-to-zero",
    ("replicasMin", "scaleToZero"),
    "`replicasMin: 0` needs `scaleToZero: true` (an HPA cannot scale to zero).",
)
def _zero_replicas(f: StackFacts) -> Iterable[Problem]:
    if f.get("replicasMin", 1) == 0 and not f.scale_to_zero:
        yield "replicasMin", "0 needs scaleToZero: true (an HPA cannot scale to zero)"


@stack_rule(
    "scale-to-zero-needs-keda",
    ("scaleToZero", *ADDON_KEYS),
    "`scaleToZero` needs the `keda` add-on (in `addons` or `existingAddons`).",
)
def _scale_to_zero_keda(f: StackFacts) -> Iterable[Problem]:
    if f.scale_to_zero and "keda" not in f.addons:
        yield "scaleToZero", "needs KEDA; add `keda` to `addons` (or `existingAddons`) or turn it off"


@stack_rule(
    "scale-to-zero-needs-monitoring",
    ("scaleToZero", "monitoring", *ADDON_KEYS),
    "`scaleToZero` needs `monitoring` (KEDA wakes and scales on the ratio the PrometheusRule records).",
)
def _scale_to_zero_monitoring(f: StackFacts) -> Iterable[Problem]:
    if f.scale_to_zero and not f.monitoring:
        yield (
            "scaleToZero",
            "KEDA scales on the queue:compute ratio the PrometheusRule records; needs monitoring "
            "(kube-prometheus-stack in `addons` or `existingAddons`), or turn scaleToZero off",
        )


@stack_rule(
    "monitoring-needs-prometheus-operator",
    ("monitoring", *ADDON_KEYS),
    "`monitoring: true` needs `kube-prometheus-stack` (the Prometheus operator CRDs).",
)
def _monitoring(f: StackFacts) -> Iterable[Problem]:
    if f.values.get("monitoring") and "kube-prometheus-stack" not in f.addons:
        yield (
            "monitoring",
            "needs the Prometheus operator CRDs; add `kube-prometheus-stack` to `addons` (or `existingAddons`) "
            "or set monitoring: false",
        )


@stack_rule(
    "autoscaling-needs-prometheus-adapter",
    ("autoscaling", "replicasMin", "replicasMax", *ADDON_KEYS),
    "`autoscaling` between `replicasMin` < `replicasMax` (HPA) needs the `prometheus-adapter` add-on.",
)
def _autoscaling_adapter(f: StackFacts) -> Iterable[Problem]:
    if _hpa(f) and "prometheus-adapter" not in f.addons:
        yield (
            "autoscaling",
            "the HPA reads Triton's queue:compute ratio through prometheus-adapter; add `prometheus-adapter` to "
            "`addons` (or `existingAddons`), or set autoscaling: false",
        )


@stack_rule(
    "autoscaling-needs-monitoring",
    ("autoscaling", "replicasMin", "replicasMax", "monitoring", *ADDON_KEYS),
    "`autoscaling` between `replicasMin` < `replicasMax` (HPA) needs `monitoring` (the recorded ratio).",
)
def _autoscaling_monitoring(f: StackFacts) -> Iterable[Problem]:
    if _hpa(f) and not f.monitoring:
        yield (
            "autoscaling",
            "the HPA scales on the queue:compute ratio the PrometheusRule records; needs monitoring "
            "(kube-prometheus-stack), or set autoscaling: false",
        )


def _hpa(f: StackFacts) -> bool:
    return (
        bool(f.get("autoscaling", True)) and not f.scale_to_zero and f.get("replicasMax", 1) > f.get("replicasMin", 1)
    )


# -- ingress: TLS and authentication -----------------------------------------------------------------------------


@stack_rule(
    "tls-issuer-needs-cert-manager",
    ("tlsIssuer", "acmeEmail", *ADDON_KEYS),
    "`tlsIssuer`, written or the one the stack makes from `acmeEmail`, needs the `cert-manager` add-on (in `addons` "
    "or `existingAddons`).",
)
def _issuer_cert_manager(f: StackFacts) -> Iterable[Problem]:
    stated = f.get("tlsIssuer")
    # The issuer the stack makes from `acmeEmail` (on aws, with TLS on) needs cert-manager as much as a written one.
    issuer = stated or (f.issuer if f.platform == "aws" and f.tls else None)
    if issuer and "cert-manager" not in f.addons:
        if stated:
            yield (
                "tlsIssuer",
                "needs cert-manager; add `cert-manager` to `addons` (or `existingAddons`) or use tlsSecretName",
            )
        else:
            yield (
                "acmeEmail",
                f"the stack makes the ClusterIssuer {issuer!r} from it, a cert-manager resource: add `cert-manager` "
                "to `addons` (cert-manager issues the edge's certificates from it)",
            )


@stack_rule(
    "one-tls-source",
    ("tlsIssuer", "tlsSecretName"),
    "`tlsIssuer` or `tlsSecretName`, not both (the issuer writes its own secret).",
)
def _one_tls_source(f: StackFacts) -> Iterable[Problem]:
    if f.get("tlsIssuer") and f.get("tlsSecretName"):
        yield "tlsSecretName", "give tlsIssuer (cert-manager signs) or tlsSecretName (an existing Secret), not both"


@stack_rule(
    "tls-source-needs-tls",
    ("tlsIssuer", "tlsSecretName", *TLS_KEYS),
    "`tlsIssuer` / `tlsSecretName` only with TLS on (`ingressTls`, default on outside `local`).",
)
def _tls_source_needs_tls(f: StackFacts) -> Iterable[Problem]:
    if not f.tls:
        for key in ("tlsIssuer", "tlsSecretName"):
            if f.get(key):
                yield key, "has no effect with ingressTls: false; remove it or set ingressTls: true"


@stack_rule(
    "tls-needs-auth",
    (*TLS_KEYS, *AUTH_KEYS),
    "A TLS (public) endpoint needs authentication: `ingressAuth` `apiKey` (`edge: gateway`), `basic` or `oidc`.",
)
def _tls_needs_auth(f: StackFacts) -> Iterable[Problem]:
    if f.tls and f.auth == "none":
        fix = "apiKey" if f.edge == "gateway" else "basic or oidc"
        yield (
            "ingressAuth",
            f"none leaves the public TLS endpoint open; use {fix} (TLS is on outside `local` unless ingressTls: false)",
        )


@stack_rule(
    "auth-fits-the-edge",
    AUTH_KEYS,
    "`ingressAuth: apiKey` is the Gateway API edge's (Envoy Gateway's API keys); `basic` and `oidc` are the "
    "Ingress edge's (ingress-nginx annotations).",
)
def _auth_fits_edge(f: StackFacts) -> Iterable[Problem]:
    if f.auth == "apiKey" and f.edge != "gateway":
        yield "ingressAuth", "apiKey needs edge: gateway (Envoy Gateway checks the keys); with edge: ingress use basic"
    if f.auth in ("basic", "oidc") and f.edge == "gateway":
        yield (
            "ingressAuth",
            f"{f.auth} is an ingress-nginx annotation and does nothing on edge: gateway; use apiKey (keys the stack "
            "generates, sent as `Authorization: Bearer`) or set edge: ingress",
        )
    # Issue 51: on another Ingress class (an ALB, Traefik, ...) ingress-nginx's auth annotations are ignored and
    # every host would be served open, so such an edge is refused.
    # A stack that installs ingress-nginx itself names that controller's class, whatever the name.
    ingress_class = str(f.get("ingressClass") or INGRESS_NGINX_CLASS)
    installs_nginx = "ingress-nginx" in (f.get("addons") or ())
    if (
        f.edge == "ingress"
        and f.auth in ("basic", "oidc")
        and ingress_class != INGRESS_NGINX_CLASS
        and not installs_nginx
    ):
        yield (
            "ingressClass",
            f"{ingress_class!r} ignores ingress-nginx's {f.auth} annotations, so every host would be open: use "
            "edge: gateway with ingressAuth: apiKey (Envoy Gateway on the cluster: existingAddons: [envoy-gateway]), "
            f"or ingressClass: {INGRESS_NGINX_CLASS} (ingress-nginx)",
        )


INGRESS_NGINX_CLASS = "nginx"
"""The only Ingress class whose controller enforces the stack's ``basic``/``oidc`` authentication (ingress-nginx's
``auth-*`` annotations)."""


@stack_rule(
    "canary-needs-its-signals",
    ("canary", "edge", "platform", "monitoring", "probe", *ADDON_KEYS),
    "`canary: true` needs `edge: gateway` (weighted `backendRefs`), `monitoring` (the figures it compares) and "
    "`probe` (the judge before it), and is refused with a Llama-family (vLLM) model: Triton counts a decoupled "
    "model's request as a success, and times it, when it is queued, so the phase could not fail it.",
)
def _canary_needs(f: StackFacts) -> Iterable[Problem]:
    if not f.get("canary", False):
        return
    for m in f.models:
        if m.is_vllm:
            yield (
                "canary",
                f"models[{m.index}] {m.get('name', '')!r} is served by vLLM, whose phase could not fail it: Triton "
                "counts a request to a decoupled (vLLM) model as a success, and measures its latency, when the "
                "request is queued, so a candidate that errors or is slow would pass; set canary: false (every new "
                "version is still judged by the probe before it takes traffic), or serve this model from another "
                "stack",
            )
    if f.edge != "gateway":
        yield (
            "canary",
            "the weighted phase splits the model's traffic with Gateway API route weights; needs edge: gateway "
            "(on edge: ingress a new version is judged, then takes all traffic at once): set edge: gateway or "
            "canary: false",
        )
    if not f.monitoring:
        yield (
            "canary",
            "the phase compares Triton's metrics of both versions in Prometheus; needs monitoring "
            "(kube-prometheus-stack), or set canary: false",
        )
    if not f.get("probe", True):
        yield "canary", "the phase follows the probe's judgement of the new version; needs probe: true"


@stack_rule(
    "api-clients-are-distinct",
    ("apiClients",),
    "`apiClients` are distinct and none is `probe` (the probe's own key).",
)
def _api_clients(f: StackFacts) -> Iterable[Problem]:
    seen: set[str] = set()
    for i, client in enumerate(f.get("apiClients", [])):
        if client == "probe":
            yield (
                f"apiClients[{i}]",
                "'probe' is the integration probe's own key (always made); name the client otherwise",
            )
        elif client in seen:
            yield f"apiClients[{i}]", f"{client!r} is listed twice; each client once"
        seen.add(client)


@stack_rule(
    "api-keys-name-clients",
    ("apiKeys", "apiClients"),
    "`apiKeys` names only clients of `apiClients` (never `probe`, whose key `apiKeyRotation` replaces).",
)
def _api_keys_clients(f: StackFacts) -> Iterable[Problem]:
    return api_keys.client_problems(f.get("apiKeys", {}), tuple(f.get("apiClients", [])), "probe")


@stack_rule(
    "api-keys-need-the-api-key-edge",
    ("apiClients", "apiKeys", "maxConcurrentPerClient", *AUTH_KEYS),
    "`apiClients` / `apiKeys` / `maxConcurrentPerClient` only with `edge: gateway` and `ingressAuth: apiKey`: "
    "Envoy Gateway checks the keys (and names the client the gateway counts); on any other edge or authentication "
    "nothing does.",
)
def _api_keys_need_edge(f: StackFacts) -> Iterable[Problem]:
    if f.edge == "gateway" and f.auth == "apiKey":
        return
    now = f"edge: {f.edge}" if f.edge != "gateway" else f"ingressAuth: {f.auth}"
    door = "anyone gets in" if f.auth == "none" else f"clients get in with {f.auth} credentials"
    for key in ("apiClients", "apiKeys", "maxConcurrentPerClient"):
        if f.get(key):
            yield (
                key,
                f"no API key is made or checked with {now} ({door}, not a key): remove {key}, or set edge: gateway "
                "with ingressAuth: apiKey",
            )


@stack_rule(
    "global-rate-limit-needs-api-keys",
    ("rateLimitRedis", "edge", "ingressAuth"),
    "`rateLimitRedis` counts each API key's requests: it needs `edge: gateway` with `ingressAuth: apiKey`.",
)
def _global_rate_limit(f: StackFacts) -> Iterable[Problem]:
    if f.get("rateLimitRedis") and (f.edge != "gateway" or f.auth != "apiKey"):
        yield (
            "rateLimitRedis",
            "the global limit counts the requests of each API key: it needs edge: gateway with ingressAuth: apiKey; "
            "remove rateLimitRedis, or use that edge",
        )


@stack_rule(
    "gateway-edge-on-existing-cluster",
    ("edge", "platform", "gatewayName", "ingressAuth", "environment", "existingAddons"),
    "`edge: gateway` on an existing cluster attaches to the cluster's own Gateway (`gatewayName`); `apiKey` "
    "there needs Envoy Gateway (`envoy-gateway` in `existingAddons`).",
)
def _gateway_on_existing(f: StackFacts) -> Iterable[Problem]:
    if f.platform != "kubernetes" or f.edge != "gateway":
        return
    if not f.get("gatewayName"):
        yield (
            "edge",
            "gateway on an existing cluster needs the cluster's own Gateway: set gatewayName (and gatewayNamespace "
            "when it is in another namespace), or edge: ingress",
        )
    if f.auth == "apiKey" and "envoy-gateway" not in f.get("existingAddons", []):
        yield (
            "ingressAuth",
            "apiKey is Envoy Gateway's SecurityPolicy: add `envoy-gateway` to existingAddons when the cluster's "
            "Gateway is Envoy Gateway's, or use ingressAuth none behind your own authentication",
        )


@stack_rule(
    "gateway-name-needs-gateway-edge",
    ("gatewayName", "gatewayNamespace", "edge", "platform"),
    "`gatewayName` / `gatewayNamespace` only with `edge: gateway`.",
)
def _gateway_name_needs_edge(f: StackFacts) -> Iterable[Problem]:
    if f.edge != "gateway":
        for key in ("gatewayName", "gatewayNamespace"):
            if f.get(key):
                yield key, f"has no effect with edge: {f.edge}; remove it or set edge: gateway"


@stack_rule(
    "oidc-needs-urls",
    (*AUTH_KEYS, "oidcAuthUrl", "oidcSigninUrl"),
    "`ingressAuth: oidc` needs both `oidcAuthUrl` and `oidcSigninUrl`.",
)
def _oidc_urls(f: StackFacts) -> Iterable[Problem]:
    if f.auth == "oidc" and not (f.get("oidcAuthUrl") and f.get("oidcSigninUrl")):
        yield "ingressAuth", "oidc needs both oidcAuthUrl and oidcSigninUrl"


@stack_rule(
    "oidc-urls-need-oidc",
    ("oidcAuthUrl", "oidcSigninUrl", *AUTH_KEYS),
    "`oidcAuthUrl` / `oidcSigninUrl` only with `ingressAuth: oidc`.",
)
def _oidc_urls_unused(f: StackFacts) -> Iterable[Problem]:
    if f.auth != "oidc":
        for key in ("oidcAuthUrl", "oidcSigninUrl"):
            if f.get(key):
                yield key, f"has no effect with ingressAuth {f.auth}; remove it or set ingressAuth: oidc"


@stack_rule(
    "basic-auth-needs-credentials",
    (*AUTH_KEYS, "ingressHtpasswd", "basicAuthSecretName"),
    "`ingressAuth: basic` (default outside `local`) needs the secret `ingressHtpasswd` or `basicAuthSecretName`.",
)
def _basic_credentials(f: StackFacts) -> Iterable[Problem]:
    if f.auth == "basic" and not f.get("basicAuthSecretName") and "ingressHtpasswd" not in f.present:
        yield (
            "ingressAuth",
            'basic needs credentials: set the secret `pulumi config set --secret ingressHtpasswd "$(htpasswd -nb '
            'USER PASS)"` or basicAuthSecretName (an existing Secret), or use ingressAuth oidc/none',
        )


@stack_rule(
    "one-basic-auth-source",
    ("ingressHtpasswd", "basicAuthSecretName"),
    "`ingressHtpasswd` or `basicAuthSecretName`, not both.",
)
def _one_basic_source(f: StackFacts) -> Iterable[Problem]:
    if f.get("basicAuthSecretName") and "ingressHtpasswd" in f.present:
        yield "basicAuthSecretName", "give basicAuthSecretName (an existing Secret) or ingressHtpasswd, not both"


# -- models as a whole -------------------------------------------------------------------------------------------


@stack_rule("model-names-unique", ("models",), "Each entry of `models` has its own `name`.")
def _unique_names(f: StackFacts) -> Iterable[Problem]:
    seen: dict[str, int] = {}
    for m in f.models:
        name = m.values.get("name")
        if not isinstance(name, str):
            continue
        if name in seen:
            yield f"models[{m.index}].name", f"{name!r} is already used by models[{seen[name]}]; names must be unique"
        seen.setdefault(name, m.index)


@stack_rule(
    "model-hosts-are-dns-names",
    ("ingressHost", "models"),
    "Each model's host `<name>.<ingressHost>` is a valid DNS name (at most 253 characters).",
)
def _model_hosts(f: StackFacts) -> Iterable[Problem]:
    for m in f.models:
        name = m.values.get("name")
        if isinstance(name, str):
            host = f"{name}.{f.ingress_host}"
            for problem in kube.dns1123_subdomain(host):
                yield "ingressHost", f"the host of models[{m.index}], {host[:40]!r}..., {problem}; shorten ingressHost"


STACK_RULES: tuple[StackRule, ...] = (
    *_STACK,
    StackRule(
        "gated-repo-needs-token",
        ("hfToken", "models"),
        "A gated catalog repository (`meta-llama/...`) needs a token of an account that accepted its licence: the "
        "`hfToken` secret or the model's `hfTokenSecret`.",
        gated_repos_need_token,
    ),
    *(StackRule(r.id, r.keys, r.doc, r.check) for r in BUILT_CLUSTER_RULES),
)


# -- one model entry ---------------------------------------------------------------------------------------------


@model_rule(
    "family-matches-catalog",
    ("family", "hfRepo"),
    "`family` of a catalog repository (`hfRepo`) must match the catalog (or be left out).",
)
def _family_matches(_: StackFacts, m: ModelFacts) -> Iterable[Problem]:
    stated = m.values.get("family")
    if m.catalog and stated and Family(stated) is not m.catalog[0]:
        yield "family", f"{stated!r} contradicts the catalog ({m.get('hfRepo')} is {m.catalog[0]}); drop `family`"


@model_rule(
    "unknown-repo-needs-architecture",
    ("hfRepo", "architecture"),
    "An `hfRepo` outside the catalog needs an `architecture` block (and `family`); a near miss of a catalog id "
    "is named (did you mean).",
)
def _needs_architecture(_: StackFacts, m: ModelFacts) -> Iterable[Problem]:
    repo = m.values.get("hfRepo")
    if m.catalog is None and "architecture" not in m.present and repo:
        nearest = closest_known(str(repo))
        if nearest is not None:
            yield (
                "hfRepo",
                f"{repo!r} is not in the catalog of known models; did you mean {nearest!r}? (A model outside the "
                "catalog needs `family` and an `architecture` block.)",
            )
            return
        yield (
            "architecture",
            f"{m.get('hfRepo')!r} is not in the catalog of known models; add `family` and an `architecture` block "
            "(dModel, numHeads, numLayers, dFf, vocabSize)",
        )


@model_rule(
    "architecture-needs-family",
    ("architecture", "family", "hfRepo"),
    "A custom `architecture` of a repository outside the catalog needs `family`.",
)
def _architecture_family(_: StackFacts, m: ModelFacts) -> Iterable[Problem]:
    if "architecture" in m.present and m.family is None:
        yield "family", "required with a custom `architecture` (one of t5, gpt2, gptj, bert, llama)"


# -- encoders (family bert) and generators: each family's own keys -------------------------------------------------

ENCODER_KEYS = ("task", "pooling", "normalize", "labels", "maxSeqLength", "probeSimilar", "probeLabels")
"""Model-entry keys of encoders only."""
EMBED_KEYS = ("pooling", "normalize", "probeSimilar")
CLASSIFY_KEYS = ("labels", "probeLabels")
FAMILY_KEYS = ("family", "hfRepo")
"""A rule reading the model's family binds both (the family comes from ``family`` or the catalog's ``hfRepo``)."""
_GENERATOR_ONLY = {
    "streaming": "an encoder answers each request once, it does not stream: remove it",
    "int8Mode": "FasterTransformer's weight-only int8 is for gpt2; an encoder's weights are `weightDtype` (fp32 or "
    "fp16): remove it",
    "maxInputLen": "is a generator's prompt limit; an encoder's is `maxSeqLength`: write maxSeqLength instead",
    "maxOutputLen": "an encoder generates no tokens: remove it",
    "dataType": "an encoder computes in its ONNX graph's type: set `weightDtype` (fp32 or fp16) instead and remove "
    "dataType",
}


@model_rule(
    "encoder-keys-for-encoders",
    (*FAMILY_KEYS, *ENCODER_KEYS),
    "`task`, `pooling`, `normalize`, `labels`, `maxSeqLength`, `probeSimilar`, `probeLabels` only for family `bert`.",
)
def _encoder_keys(_: StackFacts, m: ModelFacts) -> Iterable[Problem]:
    family = m.family
    if family is None or family.is_encoder:
        return
    for key in ENCODER_KEYS:
        if key in m.present:
            yield key, f"is an encoder setting (family bert); {family} is a generator: remove it"


@model_rule(
    "generator-keys-for-generators",
    (*FAMILY_KEYS, *_GENERATOR_ONLY, "tensorParallel", "pipelineParallel"),
    "`streaming`, `int8Mode`, `maxInputLen`, `maxOutputLen`, `dataType` and `tensorParallel` / `pipelineParallel` "
    "above 1 only for the generators (not family `bert`).",
)
def _generator_keys(_: StackFacts, m: ModelFacts) -> Iterable[Problem]:
    if not m.is_encoder:
        return
    for key, fix in _GENERATOR_ONLY.items():
        if key in m.present:
            yield key, f"is a generator setting, not for family bert: {fix}"
    for key in ("tensorParallel", "pipelineParallel"):
        if m.get(key, 1) > 1:
            yield (
                key,
                f"{m.get(key)}: an encoder replica runs whole on one GPU (or on a CPU), never split; remove it "
                "(scale with replicasMax or instances)",
            )


@model_rule(
    "cpu-for-encoders-only",
    ("device", *FAMILY_KEYS),
    "`device: cpu` only for family `bert` (FasterTransformer needs GPUs).",
)
def _cpu_for_encoders(_: StackFacts, m: ModelFacts) -> Iterable[Problem]:
    family = m.family
    if family is not None and not family.is_encoder and m.device is Device.CPU:
        yield "device", f"cpu is for encoders (family bert); {family} runs on FasterTransformer, which needs GPUs"


@model_rule(
    "task-keys-match-task",
    (*FAMILY_KEYS, "task", *EMBED_KEYS, *CLASSIFY_KEYS),
    "`pooling`, `normalize`, `probeSimilar` only with `task: embed`; `labels`, `probeLabels` only with "
    "`task: classify`.",
)
def _task_keys(_: StackFacts, m: ModelFacts) -> Iterable[Problem]:
    if not m.is_encoder:
        return
    task = m.task
    other = EncoderTask.CLASSIFY if task is EncoderTask.EMBED else EncoderTask.EMBED
    wrong = CLASSIFY_KEYS if task is EncoderTask.EMBED else EMBED_KEYS
    answer = "a sentence embedding" if task is EncoderTask.EMBED else "a label and its scores"
    for key in wrong:
        if key in m.present:
            yield key, f"is for task {other}; task {task} answers {answer}: remove it (or set task: {other})"


@model_rule(
    "classify-needs-labels",
    (*FAMILY_KEYS, "task", "labels"),
    "`task: classify` needs `labels` (the class names by logit index, the checkpoint's `id2label`).",
)
def _classify_labels(_: StackFacts, m: ModelFacts) -> Iterable[Problem]:
    if m.is_encoder and m.task is EncoderTask.CLASSIFY and "labels" not in m.present:
        yield (
            "labels",
            "is required with task classify: list the class names by logit index (id2label in the checkpoint's "
            "config.json), e.g. labels: [negative, positive]",
        )


@model_rule(
    "probe-labels-are-labels",
    (*FAMILY_KEYS, "task", "labels", "probeLabels"),
    "Each label of `probeLabels` is one of `labels`.",
)
def _probe_labels(_: StackFacts, m: ModelFacts) -> Iterable[Problem]:
    labels = m.get("labels", [])
    if not m.is_encoder or m.task is not EncoderTask.CLASSIFY or not labels:
        return
    unknown = sorted({label for label in m.get("probeLabels", {}).values() if label not in labels})
    if unknown:
        yield "probeLabels", f"expects {unknown}, not among labels {labels}; use one of them"


@model_rule(
    "encoder-length-fits-positions",
    ("maxSeqLength", "architecture", *FAMILY_KEYS),
    "`bert`: `architecture.maxPositions` is known (catalog or stated) and `maxSeqLength` <= it.",
)
def _encoder_length(_: StackFacts, m: ModelFacts) -> Iterable[Problem]:
    arch = m.architecture
    if not m.is_encoder or arch is None:
        return
    if not arch.max_positions:
        yield (
            "architecture.maxPositions",
            "required for family bert: its position table bounds maxSeqLength (max_position_embeddings in the "
            "checkpoint's config.json)",
        )
        return
    seq = m.max_seq_length()
    if seq is not None and seq > arch.max_positions:
        yield (
            "maxSeqLength",
            f"{seq} exceeds the model's {arch.max_positions} positions (architecture.maxPositions); use at most "
            f"{arch.max_positions}",
        )


@model_rule(
    "heads-divide-width",
    ("architecture",),
    "`architecture.numHeads` divides `architecture.dModel` (unless `dKv` gives the head size).",
)
def _heads_divide_width(_: StackFacts, m: ModelFacts) -> Iterable[Problem]:
    arch = m.architecture
    if arch is not None and not arch.d_kv and arch.d_model % arch.num_heads:
        yield "architecture.numHeads", f"{arch.num_heads} does not divide dModel={arch.d_model}; give dKv or fix"


@model_rule(
    "tp-divides-heads",
    ("tensorParallel", "architecture", "hfRepo"),
    "`tensorParallel` divides the number of attention heads.",
)
def _tp_heads(_: StackFacts, m: ModelFacts) -> Iterable[Problem]:
    arch, tp = m.architecture, m.get("tensorParallel", 1)
    if arch is not None and arch.num_heads % tp:
        options = ", ".join(str(n) for n in (1, 2, 4, 8) if arch.num_heads % n == 0)
        yield "tensorParallel", f"{tp} does not divide numHeads={arch.num_heads} (use {options})"


@model_rule(
    "tp-divides-ffn",
    ("tensorParallel", "architecture", "hfRepo"),
    "`tensorParallel` divides the FFN size (`dFf`).",
)
def _tp_ffn(_: StackFacts, m: ModelFacts) -> Iterable[Problem]:
    arch, tp = m.architecture, m.get("tensorParallel", 1)
    if arch is not None and arch.d_ff % tp:
        yield "tensorParallel", f"{tp} does not divide the FFN size dFf={arch.d_ff}"


@model_rule(
    "pp-divides-layers",
    ("pipelineParallel", "architecture", "hfRepo"),
    "`pipelineParallel` divides the number of layers (each stage holds the same number).",
)
def _pp_layers(_: StackFacts, m: ModelFacts) -> Iterable[Problem]:
    arch, pp = m.architecture, m.get("pipelineParallel", 1)
    if arch is not None and arch.num_layers % pp:
        yield "pipelineParallel", f"{pp} does not divide numLayers={arch.num_layers}"


@model_rule(
    "parallelism-fits-node",
    ("tensorParallel", "pipelineParallel", "device"),
    "`tensorParallel` x `pipelineParallel` GPUs fit on one GPU node and divide its GPU count.",
    stack_keys=GPU_KEYS,
)
def _parallelism_node(f: StackFacts, m: ModelFacts) -> Iterable[Problem]:
    node, tp, pp = f.node, m.get("tensorParallel", 1), m.get("pipelineParallel", 1)
    if node is None or m.device is Device.CPU:
        return
    gpus = tp * pp
    shape = "each GPU node (gpusPerNode)" if f.platform == "kubernetes" else f"a {node.name} node"
    if gpus > node.gpus:
        yield (
            "tensorParallel",
            f"{tp} x pipelineParallel {pp} = {gpus} GPUs, but {shape} has {node.gpus} {node.gpu.name}; "
            "use a larger node type or lower the parallelism",
        )
    elif node.gpus % gpus:
        yield (
            "tensorParallel",
            f"TP x PP = {gpus} does not divide the {node.gpus} GPUs of {shape}; choose a parallelism that divides "
            "the node's GPU count",
        )


@model_rule(
    "bf16-needs-ampere",
    ("dataType",),
    "`dataType: bf16` needs an Ampere or newer GPU (sm >= 80).",
    stack_keys=GPU_KEYS,
)
def _bf16(f: StackFacts, m: ModelFacts) -> Iterable[Problem]:
    node = f.node
    if node is not None and m.get("dataType") == "bf16" and not node.gpu.supports_bf16:
        yield (
            "dataType",
            f"bf16 needs an Ampere or newer GPU (sm >= 80), {node.gpu.name} is sm_{node.gpu.compute_capability}; "
            "use fp16 or fp32",
        )


@model_rule(
    "weights-fit-gpu-memory",
    (
        "tensorParallel",
        "pipelineParallel",
        "dataType",
        "architecture",
        *FAMILY_KEYS,
        "device",
        "weightDtype",
        "task",
        "labels",
    ),
    f"Weights per GPU (at `dataType`, split over TP x PP; an encoder's ONNX weights at `weightDtype` on one GPU) fit "
    f"in {WEIGHT_BUDGET_FRACTION:.0%} of the GPU's memory (`device: cpu` models take no GPU).",
    stack_keys=GPU_KEYS,
)
def _weights_fit(f: StackFacts, m: ModelFacts) -> Iterable[Problem]:
    node, family, arch = f.node, m.family, m.architecture
    if node is None or family is None or arch is None or m.device is Device.CPU or family.is_vllm:
        return  # a vLLM model's weights and KV cache are checked by vllm-engine-rules, against its memory fraction
    budget = node.gpu.memory_gib * GIB * WEIGHT_BUDGET_FRACTION
    if family.is_encoder:
        encoder = m.encoder_spec()
        if encoder is None:
            return  # encoder-length-fits-positions reports the missing position table
        onnx_bytes = parameter_count(family, arch, encoder) * m.weight_dtype.nbytes
        if onnx_bytes > budget:
            yield (
                "weightDtype",
                f"the ONNX weights need ~{onnx_bytes / GIB:.1f} GiB at {m.weight_dtype}, over "
                f"{WEIGHT_BUDGET_FRACTION:.0%} of a {node.gpu.name}'s {node.gpu.memory_gib} GiB; use weightDtype "
                "fp16, device: cpu or a larger GPU",
            )
        return
    tp, pp, data_type = m.get("tensorParallel", 1), m.get("pipelineParallel", 1), DataType(m.get("dataType"))
    per_gpu = parameter_count(family, arch) * data_type.nbytes / (tp * pp)
    if per_gpu > budget:
        yield (
            "tensorParallel",
            f"weights need ~{per_gpu / GIB:.1f} GiB per GPU at dataType {data_type} and TP {tp}, over "
            f"{WEIGHT_BUDGET_FRACTION:.0%} of a {node.gpu.name}'s {node.gpu.memory_gib} GiB; raise tensorParallel, "
            "use a 16-bit dataType or a larger GPU",
        )


@model_rule("int8-gpt2-only", ("int8Mode", "family", "hfRepo"), "`int8Mode: 1` only for the gpt2 family.")
def _int8(_: StackFacts, m: ModelFacts) -> Iterable[Problem]:
    family = m.family
    if m.get("int8Mode", 0) and family is not None and family is not Family.GPT2:
        yield "int8Mode", f"weight-only int8 is supported for gpt2 only, not {family}"


@model_rule(
    "preferred-batches-within-max",
    ("preferredBatchSizes", "maxBatchSize"),
    "Each of `preferredBatchSizes` lies in 1..`maxBatchSize`.",
)
def _preferred(_: StackFacts, m: ModelFacts) -> Iterable[Problem]:
    batch = m.get("maxBatchSize", 8)
    bad = [b for b in m.get("preferredBatchSizes", []) if not 1 <= b <= batch]
    if bad:
        yield "preferredBatchSizes", f"{bad} must lie between 1 and maxBatchSize={batch}"


@model_rule(
    "lengths-fit-positions",
    ("maxInputLen", "maxOutputLen", "architecture", "family", "hfRepo"),
    "GPT families: `maxInputLen` + `maxOutputLen` <= the model's positions (`architecture.maxPositions`).",
)
def _lengths(_: StackFacts, m: ModelFacts) -> Iterable[Problem]:
    arch, family = m.architecture, m.family
    if arch is None or family not in GPT_FAMILIES:
        return
    if not arch.max_positions:
        yield (
            "architecture.maxPositions",
            f"required for the {family} family: its position table bounds maxInputLen + maxOutputLen",
        )
        return
    total = m.get("maxInputLen", 512) + m.get("maxOutputLen", 128)
    if total > arch.max_positions:
        yield (
            "maxInputLen",
            f"{m.get('maxInputLen', 512)} + maxOutputLen {m.get('maxOutputLen', 128)} = {total} tokens exceeds the "
            f"model's {arch.max_positions} positions; lower maxInputLen or maxOutputLen so they sum to at most "
            f"{arch.max_positions}",
        )


def _generators_only(check: ModelCheck) -> ModelCheck:
    """A FasterTransformer rule: it says nothing about an encoder (ONNX Runtime serves those) or a Llama-family
    model (vLLM serves those: ``vllm_rules``)."""

    def run(f: StackFacts, m: ModelFacts) -> Iterable[Problem]:
        return () if m.is_encoder or m.is_vllm else check(f, m)

    return run


MODEL_RULES: tuple[ModelRule, ...] = (
    *_MODEL,
    *(
        ModelRule(r.id, r.keys, r.doc, _generators_only(r.check), GPU_KEYS if r.reads_gpu else ())
        for r in FT_MODEL_RULES
    ),
    *(ModelRule(r.id, r.keys, r.doc, r.check, GPU_KEYS if r.reads_gpu else ()) for r in VLLM_MODEL_RULES),
)


# -- the whole plan ----------------------------------------------------------------------------------------------


SMALL_ON_GPU_FRACTION = 0.1
"""An encoder whose ONNX weights take less than this share of its GPU's memory is worth a warning on ``device: gpu``."""


def _capacity(settings: Settings) -> tuple[Sequence[str], Sequence[str]]:
    serving = settings.serving
    scaled_max = serving.replicas_max if serving.autoscaling.enabled else serving.replicas_min
    verdict = capacity_verdict(settings.cluster, settings.models, serving.replicas_min, scaled_max)
    return verdict.problems, (*verdict.warnings, *_small_encoders_on_gpus(settings))


def _judged_after_traffic(settings: Settings) -> tuple[Sequence[str], Sequence[str]]:
    """A GPU model whose rollout cannot surge has no room for a candidate: a change to what it serves rolls in place,
    and its judge Job asks it only after its new pods took traffic (a wrong version fails ``up`` while it serves).
    Warned with the ``gpuNodesMax`` that gives it room."""
    pool = capacity_pool(settings.cluster)
    if not settings.probe.enabled or pool is None:
        return [], []  # no judge; or an existing cluster of unstated size: the candidate is tried (the watch says)
    key = nodes_key(settings.cluster)
    serving = settings.serving
    scaled_max = serving.replicas_max if serving.autoscaling.enabled else serving.replicas_min
    shapes = model_shapes(settings.models)
    surging = surging_models(shapes, scaled_max, pool)
    warnings = []
    for i, m in enumerate(settings.models):
        if m.gpus == 0 or m.name in surging:
            continue
        needed = nodes_for_a_surge(shapes, scaled_max, pool, m.name)
        warnings.append(
            f"{key}: models[{i}] {m.name!r} has no room for a candidate beside its serving version (one more "
            f"pod of {m.gpus} GPU(s) at replicasMax does not fit {pool.reachable_nodes} node(s)): a change to what it "
            "serves rolls in place one pod at a time, each new pod taking traffic once ready, and is judged only "
            f"after the roll (a wrong version fails `up` while it serves); {key} {needed} gives it room to be judged "
            "before it takes traffic"
        )
    return [], warnings


def _small_encoders_on_gpus(settings: Settings) -> list[str]:
    """A small encoder on ``device: gpu`` next to generators holds a whole GPU the generators cannot use."""
    generators = [m.name for m in settings.models if m.encoder is None]
    if not generators:
        return []
    gpu = settings.cluster.gpu_node.gpu
    warnings = []
    for i, m in enumerate(settings.models):
        if m.encoder is None or m.on_cpu or m.weight_bytes >= gpu.memory_gib * GIB * SMALL_ON_GPU_FRACTION:
            continue
        warnings.append(
            f"models[{i}].device: gpu gives the encoder {m.name!r} ({m.weight_bytes / 2**20:.0f} MiB of ONNX weights) "
            f"a whole {gpu.name} per replica on the GPU nodes it shares with {', '.join(generators)}; "
            "device: cpu serves it on CPU nodes and leaves the GPUs to the generators"
        )
    return warnings


def _eks_warnings(settings: Settings) -> tuple[Sequence[str], Sequence[str]]:
    """Warnings about the EKS cluster: extended-support billing, alerts that go nowhere in staging; errors: alerts
    routed to receivers that do not exist, and a prod that pages nobody or has no dead-man's switch
    (:func:`components.settings.alerting.routing_problems`). Who reaches prod's API is a decision the stack states
    (``built_cluster_rules``: unstated, it is refused), so a stated ``0.0.0.0/0`` is not warned about at every
    ``up``."""
    aws_settings = settings.cluster.aws
    if aws_settings is None:
        return [], []
    warnings = eks.version_warnings(aws_settings.kubernetes_version, eks.today(), aws_settings.eks_support)
    problems: list[str] = []
    if "kube-prometheus-stack" in settings.cluster.addons:
        problems = routing_problems(
            aws_settings.alert_receivers, aws_settings.alert_routing, prod=settings.environment == "prod"
        )
    if (
        "kube-prometheus-stack" in settings.cluster.addons
        and not aws_settings.alert_receivers
        and settings.environment == "staging"
    ):
        warnings.append(
            "alertReceivers: none, so Alertmanager sends every alert nowhere; give at least one receiver "
            "(`pulumi config set --secret --path 'alertReceivers[0].name' oncall` ...)"
        )
    return problems, warnings


def _api_key_expiry(settings: Settings) -> tuple[Sequence[str], Sequence[str]]:
    """Warnings about API keys that expired (this update drops them) or expire soon, and clients left keyless."""
    ingress = settings.serving.ingress
    keys = api_keys.client_keys(ingress.api_clients, ingress.api_keys)
    return [], api_keys.expiry_warnings(keys, ingress.api_keys, eks.today())


PLAN_RULES: tuple[PlanRule, ...] = (
    PlanRule(
        "api-key-expiry",
        ("apiKeys", "apiClients"),
        f"warns about each key of `apiKeys` whose `expires` day has come (the update leaves it out of the edge's "
        f"Secret: 401) or comes within {api_keys.EXPIRY_WARNING_DAYS} days, and about a client left with no key.",
        _api_key_expiry,
    ),
    PlanRule(
        "eks-warnings",
        ("kubernetesVersion", "alertReceivers", "alertRouting", "addons"),
        "aws: warns while `kubernetesVersion` is in (or within 90 days of) EKS extended support, and when a staging "
        "kube-prometheus-stack has no `alertReceivers`; refuses "
        "`alertRouting` naming no receiver, a receiver routed nothing, and a prod kube-prometheus-stack without "
        "`alertReceivers` or without a `watchdog` (dead-man's switch) route.",
        _eks_warnings,
    ),
    PlanRule(
        "gpu-capacity",
        (
            "replicasMin",
            "replicasMax",
            "autoscaling",
            "gpuNodesMin",
            "gpuNodesMax",
            "gpuNodes",
            "gpuInstanceType",
            "models",
        ),
        "aws (and kubernetes with `gpuNodes`, a fixed count of `gpusPerNode` nodes): every GPU model's pods (TP x PP "
        "GPUs each, one per encoder; `device: cpu` models take none) packed onto `gpuInstanceType` nodes fit "
        "`gpuNodesMin` at `replicasMin` (or `gpuNodesMax`, with a warning that the first `up` waits for nodes) and "
        "`gpuNodesMax` at `replicasMax` (see `components/settings/capacity.py`); a small encoder on `device: gpu` "
        "next to generators is warned about (it holds a whole GPU).",
        _capacity,
    ),
    PlanRule(
        "judged-before-traffic",
        ("gpuNodesMax", "gpuNodes", "replicasMax", "probe", "models"),
        "aws, and kubernetes with `gpuNodes`: warns about each GPU model that has no room for a candidate beside its "
        "serving version at `replicasMax` (its rollout cannot surge): a change to what it serves rolls in place and "
        "is judged (by its judge Job, in the cluster, against its reference) only after it took traffic, so a wrong "
        "version fails `up` while it serves; the warning names the `gpuNodesMax` (`gpuNodes`) that would give it "
        "room.",
        _judged_after_traffic,
    ),
    PlanRule(
        "cpu-model-fits-cpu-node",
        ("systemInstanceType", "models"),
        "aws: one replica of each `device: cpu` model fits a `systemInstanceType` node's allocatable CPUs and memory "
        "(c, m and r types, 5th generation on; other types: a warning). kubernetes: the CPU nodes are not the "
        "stack's to know, nothing is checked.",
        lambda settings: cpu_fit_verdict(settings.cluster, settings.models),
    ),
    PlanRule(
        "reference-job-fits-cpu-node",
        ("systemInstanceType", "models"),
        "aws: each T5/GPT-2/GPT-J model's judge reference Job, and each Llama/Qwen2 model's vLLM Job (its reference "
        "step), holds every weight at fp32 on the CPU (1 GiB + 1.25 x the fp32 weights + the largest tensor) and fits "
        "a `systemInstanceType` node's memory, less 7.5 % the kubelet does not see, EKS's reservation and 512 MiB of "
        "DaemonSets (c, m and r types, 5th generation on; other types: a warning). kubernetes: the CPU nodes are not "
        "the stack's to know, nothing is checked.",
        lambda settings: reference_job_fit_verdict(settings.cluster, settings.models),
    ),
)
