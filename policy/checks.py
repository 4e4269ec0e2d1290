"""The guardrails as pure functions: one resource (type token + wire-format inputs) in, violation messages out.

The same rules run in two places:

- inside ``pulumi preview``/``up`` as a CrossGuard policy pack (``policy/rules.py`` wraps each :class:`Rule`
  into a ``ResourceValidationPolicy``), on the real engine's resource inputs;
- in the test suite and CI over ``tritonft synth`` output (``policy/synth_check.py``), without Pulumi.

So this module imports nothing but the standard library, and reads properties only through ``Mapping`` and
``Sequence`` (the policy SDK hands rules read-only proxies, not dicts and lists). Property names are Pulumi's wire
names, which for Kubernetes resources are the manifest's own camelCase keys.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

ENVIRONMENTS = ("local", "dev", "staging", "prod", "review")
UNKNOWN_ENVIRONMENT = "unknown"
"""A stack whose environment cannot be told: treated as "not local" (TLS required) and "not prod"."""

GPU_RESOURCE = "nvidia.com/gpu"
SECRET_PLACEHOLDER = "[secret]"
"""How ``tritonft synth`` writes a Pulumi secret; seeing it in a plain env value means a secret was inlined."""

POD_SPEC_PATHS: dict[str, tuple[str, ...]] = {
    "kubernetes:core/v1:Pod": ("spec",),
    "kubernetes:apps/v1:Deployment": ("spec", "template", "spec"),
    "kubernetes:apps/v1:StatefulSet": ("spec", "template", "spec"),
    "kubernetes:apps/v1:DaemonSet": ("spec", "template", "spec"),
    "kubernetes:apps/v1:ReplicaSet": ("spec", "template", "spec"),
    "kubernetes:batch/v1:Job": ("spec", "template", "spec"),
    "kubernetes:batch/v1:CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}
"""Where each workload kind keeps its pod spec."""

STORAGE_TYPES: dict[str, str] = {
    "kubernetes:core/v1:PersistentVolumeClaim": "PersistentVolumeClaim",
    "aws:efs/fileSystem:FileSystem": "EFS file system",
}
"""Resources that hold the model store."""

INGRESS_TYPES = frozenset(
    {
        "kubernetes:networking.k8s.io/v1:Ingress",
        "kubernetes:networking.k8s.io/v1beta1:Ingress",
        "kubernetes:extensions/v1beta1:Ingress",
    }
)
HPA_WITH_BEHAVIOR = frozenset(
    {
        "kubernetes:autoscaling/v2:HorizontalPodAutoscaler",
        "kubernetes:autoscaling/v2beta2:HorizontalPodAutoscaler",
    }
)
HPA_WITHOUT_BEHAVIOR = "kubernetes:autoscaling/v1:HorizontalPodAutoscaler"
KEDA_SCALED_OBJECT = "kubernetes:keda.sh/v1alpha1:ScaledObject"

_DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")
_SECRET_WORDS = frozenset({"TOKEN", "PASSWORD", "PASSWD", "SECRET", "HTPASSWD", "KEY", "APIKEY", "CREDENTIALS"})
_LOCATION_WORDS = frozenset({"FILE", "PATH", "DIR"})
"""``HF_TOKEN_FILE=/secrets/token`` names where a secret is mounted, not the secret itself."""
_RESOURCE_KEYS = ("requests.cpu", "requests.memory", "limits.cpu", "limits.memory")


@dataclass(frozen=True)
class Resource:
    """What a rule sees of one resource."""

    type: str
    """Pulumi type token, e.g. ``kubernetes:apps/v1:Deployment``."""
    name: str
    props: Mapping[str, Any]
    """The resource inputs in wire format (camelCase)."""
    protect: bool | None = None
    """The ``protect`` resource option; None when unknown (a bare manifest carries no resource options)."""
    environment: str = UNKNOWN_ENVIRONMENT
    """The stack's environment tier (one of :data:`ENVIRONMENTS`, or :data:`UNKNOWN_ENVIRONMENT`)."""


@dataclass(frozen=True)
class Rule:
    """One guardrail: a name (the policy name in Pulumi), what it demands, how to fix it, and the check."""

    name: str
    description: str
    remediation: str
    check: Callable[[Resource], list[str]]
    uses_environment: bool = False


# --- reading helpers -------------------------------------------------------------------------------------------


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _items(value: Any) -> list[Any]:
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return list(value)
    return []


def _dig(props: Mapping[str, Any], path: tuple[str, ...]) -> Mapping[str, Any] | None:
    node: Any = props
    for key in path:
        if not isinstance(node, Mapping) or key not in node:
            return None
        node = node[key]
    return node if isinstance(node, Mapping) else None


def pod_spec(resource: Resource) -> Mapping[str, Any] | None:
    """The pod spec of a workload resource, or None for anything that does not run pods."""
    path = POD_SPEC_PATHS.get(resource.type)
    return _dig(resource.props, path) if path else None


def containers(spec: Mapping[str, Any], *, ephemeral: bool = True) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """``(label, container)`` for every init, regular and (optionally) ephemeral container of a pod spec."""
    fields = ("initContainers", "containers", "ephemeralContainers") if ephemeral else ("initContainers", "containers")
    for field in fields:
        for index, container in enumerate(_items(spec.get(field))):
            body = _mapping(container)
            name = body.get("name") or f"#{index}"
            yield f"{field[:-1]} '{name}'", body


def _quantity(container: Mapping[str, Any], section: str, key: str) -> Any:
    return _mapping(_mapping(container.get("resources")).get(section)).get(key)


# --- image pinning ---------------------------------------------------------------------------------------------


def image_problem(image: Any) -> str | None:
    """Why an image reference is not pinned by digest, or None when it is (``repo[:tag]@sha256:<64 hex>``)."""
    if not isinstance(image, str) or not image.strip():
        return "has no image"
    if _DIGEST.search(image):
        return None
    if "@" in image:
        return "has a malformed digest (expected @sha256: and 64 lower-case hex digits)"
    last = image.rsplit("/", 1)[-1]
    tag = last.split(":", 1)[1] if ":" in last else None
    if tag is None:
        return "has neither tag nor digest (it means ':latest', which moves)"
    if tag == "latest":
        return "uses the moving tag ':latest'"
    return f"is pinned by tag only (':{tag}' can be re-pushed)"


def check_images_pinned(resource: Resource) -> list[str]:
    spec = pod_spec(resource)
    if spec is None:
        return []
    out = []
    for label, container in containers(spec):
        problem = image_problem(container.get("image"))
        if problem:
            out.append(
                f"{label}: image {container.get('image')!r} {problem}; pin it by digest (repo@sha256:<64 hex digits>)"
            )
    return out


# --- GPU pods --------------------------------------------------------------------------------------------------


def _gpus(container: Mapping[str, Any], section: str) -> Any:
    return _quantity(container, section, GPU_RESOURCE)


def _wants_gpu(container: Mapping[str, Any]) -> bool:
    return any(str(_gpus(container, section) or "0") not in ("0", "") for section in ("requests", "limits"))


def tolerates_gpu_taint(toleration: Mapping[str, Any]) -> bool:
    """True when the toleration lets a pod onto nodes tainted ``nvidia.com/gpu[=...]:NoSchedule``."""
    key = toleration.get("key")
    operator = toleration.get("operator") or "Equal"
    effect = toleration.get("effect") or ""
    if effect not in ("", "NoSchedule"):
        return False
    if key in (None, ""):
        return operator == "Exists"  # an empty key with Exists tolerates every taint
    return key == GPU_RESOURCE


def check_gpu_pods(resource: Resource) -> list[str]:
    spec = pod_spec(resource)
    if spec is None:
        return []
    gpu_containers = [(label, c) for label, c in containers(spec, ephemeral=False) if _wants_gpu(c)]
    if not gpu_containers:
        return []
    out = []
    if not any(tolerates_gpu_taint(_mapping(t)) for t in _items(spec.get("tolerations"))):
        out.append(
            f"pod requests {GPU_RESOURCE} but has no toleration for the GPU nodes' taint; add "
            f"{{key: {GPU_RESOURCE}, operator: Exists, effect: NoSchedule}} to spec.tolerations"
        )
    for label, container in gpu_containers:
        limit, request = _gpus(container, "limits"), _gpus(container, "requests")
        if limit is None:
            out.append(f"{label}: requests {GPU_RESOURCE} without a limit; set resources.limits['{GPU_RESOURCE}']")
        elif request is not None and str(request) != str(limit):
            out.append(
                f"{label}: {GPU_RESOURCE} request {request} differs from its limit {limit}; GPUs cannot be "
                "overcommitted, so set them equal (or only the limit)"
            )
    return out


# --- protected prod storage ------------------------------------------------------------------------------------


def check_prod_storage_protected(resource: Resource) -> list[str]:
    label = STORAGE_TYPES.get(resource.type)
    if label is None or resource.environment != "prod" or resource.protect is None or resource.protect:
        return []
    return [
        f"{label} '{resource.name}' holds the prod model store but is not protected; set `protectStorage: true` "
        "(resource option protect=True) so `pulumi destroy` cannot delete converted models"
    ]


# --- ingress TLS -----------------------------------------------------------------------------------------------


def _host_covered(host: str, tls_hosts: set[str]) -> bool:
    if host in tls_hosts:
        return True
    parent = host.split(".", 1)[1] if "." in host else ""
    return bool(parent) and f"*.{parent}" in tls_hosts


def check_ingress_tls(resource: Resource) -> list[str]:
    if resource.type not in INGRESS_TYPES or resource.environment == "local":
        return []
    spec = _mapping(resource.props.get("spec"))
    tls = [_mapping(entry) for entry in _items(spec.get("tls"))]
    where = f"in environment '{resource.environment}'"
    if not tls:
        return [
            f"ingress has no spec.tls {where}; serve it over TLS (ingressTls: true with tlsIssuer or tlsSecretName)"
        ]
    tls_hosts = {str(h) for entry in tls for h in _items(entry.get("hosts"))}
    hosts = [str(_mapping(r).get("host")) for r in _items(spec.get("rules")) if _mapping(r).get("host")]
    uncovered = [h for h in hosts if not _host_covered(h, tls_hosts)]
    if uncovered:
        return [f"host(s) {', '.join(uncovered)} not listed in any spec.tls[].hosts {where}; add them to the TLS entry"]
    return []


# --- edge routes closed by default ------------------------------------------------------------------------------

ROUTE_TYPES = frozenset(
    {
        "kubernetes:gateway.networking.k8s.io/v1:HTTPRoute",
        "kubernetes:gateway.networking.k8s.io/v1:GRPCRoute",
    }
)
EDGE_AUTH_LABEL = "triton-ft.io/edge-auth"
EDGE_AUTH_API_KEY = "api-key"
"""The label every route of the stack carries (``components.common.edge.AUTH_LABEL``): the API-key SecurityPolicy
selects routes by it on a cluster's own Gateway; on the stack's own it attaches to the Gateway itself."""
EDGE_AUTH_PUBLIC = "public"
"""The label's value the exemption policy selects (``components.common.edge.AUTH_PUBLIC``): the route asks no key."""
SECURITY_POLICY = "kubernetes:gateway.envoyproxy.io/v1alpha1:SecurityPolicy"
CREDENTIALS = ("apiKeyAuth", "basicAuth", "jwt", "oidc", "extAuth")
"""The SecurityPolicy fields that ask a client for a credential."""


def check_edge_routes_authenticated(resource: Resource) -> list[str]:
    """A Gateway API route that sends traffic to a backend, outside ``local``, carries the label the API-key policy
    selects (on a cluster's own Gateway the policy attaches by it), and so never the exemption's value."""
    if resource.type not in ROUTE_TYPES or resource.environment == "local":
        return []
    spec = _mapping(resource.props.get("spec"))
    if not any(_items(_mapping(rule).get("backendRefs")) for rule in _items(spec.get("rules"))):
        return []  # a redirect (HTTP -> HTTPS) reaches no backend
    labels = _mapping(_mapping(resource.props.get("metadata")).get("labels"))
    if labels.get(EDGE_AUTH_LABEL) == EDGE_AUTH_API_KEY:
        return []
    return [
        f"route reaches a backend without the label {EDGE_AUTH_LABEL}={EDGE_AUTH_API_KEY} in environment "
        f"'{resource.environment}': no API key would be asked of its clients"
    ]


def check_edge_exemptions_by_label(resource: Resource) -> list[str]:
    """Outside ``local``, a SecurityPolicy that asks no credential (it would replace the Gateway's API key on what it
    targets: the most specific policy wins) targets nothing but routes labelled as exempted, and only by that
    label: never a Gateway, a listener or a route by name. With ``edge-routes-authenticated`` (no route that reaches
    a backend carries that label), no route of the plan that reaches a backend is served without a key."""
    if resource.type != SECURITY_POLICY or resource.environment == "local":
        return []
    spec = _mapping(resource.props.get("spec"))
    if any(spec.get(field) is not None for field in CREDENTIALS):
        return []
    problems: list[str] = []
    if spec.get("targetRef") is not None or _items(spec.get("targetRefs")):
        problems.append(
            "a SecurityPolicy that asks no credential targets by name (targetRef/targetRefs): it would serve its "
            "targets without a key; select only routes labelled "
            f"{EDGE_AUTH_LABEL}={EDGE_AUTH_PUBLIC} with targetSelectors"
        )
    for selector in (_mapping(s) for s in _items(spec.get("targetSelectors"))):
        if _mapping(selector.get("matchLabels")).get(EDGE_AUTH_LABEL) != EDGE_AUTH_PUBLIC or selector.get(
            "matchExpressions"
        ):
            problems.append(
                f"a SecurityPolicy that asks no credential selects {selector.get('kind')} other than by "
                f"{EDGE_AUTH_LABEL}={EDGE_AUTH_PUBLIC}: it would serve them without a key"
            )
    return problems


# --- secrets in env --------------------------------------------------------------------------------------------


def looks_secret(env_name: str) -> bool:
    """True for names like ``HF_TOKEN``, ``DB_PASSWORD``, ``AWS_SECRET_ACCESS_KEY``, ``HTPASSWD``.

    ``*_FILE``, ``*_PATH`` and ``*_DIR`` names point at a mounted secret and are not secrets themselves.
    """
    words = [w for w in re.split(r"[^A-Z0-9]+", env_name.upper()) if w]
    if not words or words[-1] in _LOCATION_WORDS:
        return False
    return any(word in _SECRET_WORDS for word in words)


def check_no_plain_secret_env(resource: Resource) -> list[str]:
    spec = pod_spec(resource)
    if spec is None:
        return []
    out = []
    for label, container in containers(spec):
        for entry in (_mapping(e) for e in _items(container.get("env"))):
            name = str(entry.get("name") or "")
            from_secret = "secretKeyRef" in _mapping(entry.get("valueFrom"))
            if entry.get("value") == SECRET_PLACEHOLDER:
                out.append(f"{label}: env {name} holds a Pulumi secret in plain text; use valueFrom.secretKeyRef")
            elif looks_secret(name) and not from_secret:
                out.append(
                    f"{label}: env {name} looks secret but is not read from a Secret; "
                    "use valueFrom.secretKeyRef (a Kubernetes Secret) instead of a literal value"
                )
    return out


# --- requests and limits ---------------------------------------------------------------------------------------


def check_requests_and_limits(resource: Resource) -> list[str]:
    spec = pod_spec(resource)
    if spec is None:
        return []
    out = []
    for label, container in containers(spec, ephemeral=False):
        missing = [
            f"resources.{key}" for key in _RESOURCE_KEYS if _quantity(container, *key.split(".", 1)) in (None, "")
        ]
        if missing:
            out.append(f"{label}: missing {', '.join(missing)}; every container needs cpu/memory requests and limits")
    return out


# --- autoscaler behavior ---------------------------------------------------------------------------------------


def check_hpa_behavior(resource: Resource) -> list[str]:
    if resource.type == HPA_WITHOUT_BEHAVIOR:
        return ["autoscaling/v1 cannot express scaling behavior; use autoscaling/v2 with spec.behavior"]
    if resource.type in HPA_WITH_BEHAVIOR:
        behavior = _dig(resource.props, ("spec", "behavior"))
        where = "spec.behavior"
    elif resource.type == KEDA_SCALED_OBJECT:
        behavior = _dig(resource.props, ("spec", "advanced", "horizontalPodAutoscalerConfig", "behavior"))
        where = "spec.advanced.horizontalPodAutoscalerConfig.behavior"
    else:
        return []
    if not behavior or not ({"scaleUp", "scaleDown"} & set(behavior)):
        return [
            f"autoscaler has no {where} (scaleUp/scaleDown); without a scale-down stabilization window it removes "
            "replicas whose replacement takes minutes to load the model"
        ]
    return []


RULES: tuple[Rule, ...] = (
    Rule(
        "images-pinned-by-digest",
        "Every container image in a pod spec or Job is pinned by digest (no :latest, no tag-only references).",
        "Reference images as repo@sha256:<digest> (the TritonImage component outputs digest references).",
        check_images_pinned,
    ),
    Rule(
        "gpu-pods-tolerate-and-limit",
        "Every pod that requests nvidia.com/gpu tolerates the GPU taint and sets a GPU limit on its GPU containers.",
        "Add the nvidia.com/gpu toleration to the pod spec and resources.limits['nvidia.com/gpu'] to the container.",
        check_gpu_pods,
    ),
    Rule(
        "prod-model-storage-protected",
        "In prod, the model store (PersistentVolumeClaim or EFS file system) is protected from deletion.",
        "Set `protectStorage: true` in the prod stack so the resource is registered with protect=True.",
        check_prod_storage_protected,
        uses_environment=True,
    ),
    Rule(
        "ingress-tls-outside-local",
        "Every Ingress outside the local environment serves TLS for all of its hosts.",
        "Set ingressTls: true with tlsIssuer (cert-manager) or tlsSecretName in the stack.",
        check_ingress_tls,
        uses_environment=True,
    ),
    Rule(
        "edge-routes-authenticated",
        "Every Gateway API route outside the local environment that reaches a backend carries the API-key policy's "
        "label triton-ft.io/edge-auth=api-key (never the exemption's, public).",
        "Create routes with components.common.edge.route_labels (ingressAuth: apiKey), never a bare route.",
        check_edge_routes_authenticated,
        uses_environment=True,
    ),
    Rule(
        "edge-exemptions-by-label",
        "Outside the local environment, a SecurityPolicy that asks no credential selects only routes labelled "
        "triton-ft.io/edge-auth=public, by that label: never a Gateway, a listener or a route by name.",
        "Exempt a route that reaches no backend by labelling it (components.common.edge.REDIRECT_LABELS); "
        "never add a credential-less SecurityPolicy of your own.",
        check_edge_exemptions_by_label,
        uses_environment=True,
    ),
    Rule(
        "no-plain-secret-env",
        "No secret value sits in a plain container env var: secret-looking names use valueFrom.secretKeyRef.",
        "Store the value in a Kubernetes Secret and reference it with env[].valueFrom.secretKeyRef.",
        check_no_plain_secret_env,
    ),
    Rule(
        "requests-and-limits",
        "Every container of a Deployment, Job, StatefulSet, DaemonSet or Pod sets cpu and memory requests and limits.",
        "Set resources.requests and resources.limits (cpu and memory) on every container and init container.",
        check_requests_and_limits,
    ),
    Rule(
        "autoscaler-has-behavior",
        "Every HorizontalPodAutoscaler is autoscaling/v2 with spec.behavior (KEDA: the HPA config's behavior).",
        "Set spec.behavior.scaleDown.stabilizationWindowSeconds (scaleDownStabilizationSeconds in the stack).",
        check_hpa_behavior,
    ),
)


def rule_named(name: str) -> Rule:
    for rule in RULES:
        if rule.name == name:
            return rule
    raise KeyError(f"no rule named {name!r}; known: {', '.join(r.name for r in RULES)}")


def check(resource: Resource, rules: Sequence[Rule] = RULES) -> list[tuple[str, str]]:
    """``(rule name, message)`` for every violation of ``rules`` by ``resource``."""
    return [(rule.name, message) for rule in rules for message in rule.check(resource)]


# --- environment -----------------------------------------------------------------------------------------------


def stack_of_urn(urn: str) -> str:
    """``urn:pulumi:<stack>::<project>::<type>::<name>`` -> ``<stack>``."""
    if not urn.startswith("urn:pulumi:") or "::" not in urn:
        raise ValueError(f"not a Pulumi URN: {urn!r}")
    return urn[len("urn:pulumi:") :].split("::", 1)[0]


def environment_of_stack(stack: str) -> str:
    """The environment a stack name implies: ``prod``/``prod-eu`` -> prod, ``pr-42`` -> review, else unknown."""
    name = stack.rsplit("/", 1)[-1].lower()
    if re.fullmatch(r"pr-\d+", name):
        return "review"
    for environment in ENVIRONMENTS:
        if name == environment or name.startswith(f"{environment}-"):
            return environment
    return UNKNOWN_ENVIRONMENT


def resolve_environment(configured: Any, urn: str) -> str:
    """The configured environment when given (and valid), else the one the URN's stack name implies."""
    if configured in (None, ""):
        return environment_of_stack(stack_of_urn(urn))
    if configured not in ENVIRONMENTS:
        raise ValueError(f"policy config environment={configured!r} is not one of {', '.join(ENVIRONMENTS)}")
    return str(configured)
