"""The stack's edge through Gateway API on Envoy Gateway (pure): the Gateway, the routes, the API-key policy.

Why Envoy Gateway: a maintained, conformant Gateway API implementation (HTTPRoute, GRPCRoute, weighted
``backendRefs``) that also implements the Gateway API Inference Extension (``InferencePool`` backends), with its own
authentication in a ``SecurityPolicy`` (API keys read from a Secret, the OpenAI clients' ``Authorization: Bearer``
token) and per-client rate limits in a ``BackendTrafficPolicy``; it replaces ingress-nginx, retired in March 2026.

What reaches the edge (and nothing else):

* the OpenAI gateway, ``/v1`` on the stack's base host;
* per **encoder** (ONNX Runtime on a current Triton, :func:`exposes_triton`), on ``<model>.<host>``: only Triton's
  inference routes (KServe V2 health, metadata, config and ``infer`` of that model; over gRPC the same methods of
  ``inference.GRPCInferenceService``). Triton's repository control, shared-memory registration, logging and trace
  settings and statistics never do: they are where Triton's known remote exploits start (shared-memory regions,
  log and trace files), and no client of the stack needs them.

A FasterTransformer model's Triton (23.04: CVE-2025-23310/23311 reachable through any of its HTTP endpoints, and
a gRPC ``ModelInfer`` that names the Python-backend ``preprocessing`` model in its body) and a vLLM model's (a raw
``generate`` would bypass every limit the gateway applies) get no route of any protocol, no judge route either:
the OpenAI gateway is their only door, and their NetworkPolicy admits only its pods (``docs/security/reach.md``).

Closed by default: on the Gateway the stack makes, the API-key ``SecurityPolicy`` and the ``BackendTrafficPolicy``
(rate limit, concurrency cap, timeout) target the **Gateway itself**, so every route attached to it, one made later
by hand included, asks for a key. Only routes that carry :data:`AUTH_LABEL` = :data:`AUTH_PUBLIC` are exempted, by a
second ``SecurityPolicy`` that selects them and asks nothing (Envoy Gateway applies the most specific policy: a
route's own wins over its Gateway's): the HTTPS redirect (it reaches no backend) and cert-manager's HTTP-01
challenge routes (labelled through the solver's ``labels``). A route that reaches a backend never carries that
label (the policy pack's ``edge-routes-authenticated`` refuses it), and the cluster refuses it too: a
``ValidatingAdmissionPolicy`` (:func:`public_route_admission_policy_spec`) bound to the stack's namespace admits the
label only on the redirect's and cert-manager's solver's shapes, so whoever may write routes there cannot publish a
backend without a key. On a cluster's own Gateway (``gatewayName``),
which other routes share and which may live in another namespace, the policies select the stack's routes by
:data:`AUTH_LABEL` = :data:`AUTH_API_KEY` instead, and the policy pack refuses a route without it.

The API keys live in one Secret: each data key a key id (the client's name, or ``<client>.<key>`` for another key of
that client: ``components.settings.api_keys.key_id``), its value that key (Envoy Gateway's ``apiKeyAuth`` format);
Envoy forwards the key id in :data:`CLIENT_HEADER` (logged by the proxy and the OpenAI gateway) and strips the key
before the request goes on.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, time
from typing import Any

from components.common.triton import GRPC_PORT, HTTP_PORT
from components.common.workload import ENVOY_PROXY_PODS
from components.settings.alerting import with_runbooks
from components.settings.api_keys import EXPIRY_WARNING_DAYS, ApiKey
from tritonft.gateway.limits import MAX_BODY_BYTES, key_expired
from tritonft.spec import ModelSpec

GATEWAY_API = "gateway.networking.k8s.io/v1"
GATEWAY_GROUP = "gateway.networking.k8s.io"
ENVOY_GATEWAY_API = "gateway.envoyproxy.io/v1alpha1"
ENVOY_GATEWAY_CONTROLLER = "gateway.envoyproxy.io/gatewayclass-controller"
GATEWAY_CLASS = "envoy-gateway"
"""The GatewayClass the stack registers for Envoy Gateway on a cluster it builds."""
AUTH_LABEL = "triton-ft.io/edge-auth"
"""Label of every route of the stack: :data:`AUTH_API_KEY` (asks for a key) or :data:`AUTH_PUBLIC` (exempted)."""
AUTH_API_KEY = "api-key"
AUTH_PUBLIC = "public"
"""Exempted from the API key on the stack's Gateway: only routes that reach no backend of the stack (the HTTPS
redirect) and cert-manager's ACME HTTP-01 challenge routes."""
CLIENT_HEADER = "x-tritonft-client"
"""Header Envoy sets to the accepted key's id (the Secret's data key: ``<client>`` or ``<client>.<key>``)."""
AUTHORIZATION = "authorization"
"""Where the key is read: OpenAI clients send ``Authorization: Bearer <key>``; Envoy drops the ``Bearer `` prefix."""
HTTP_LISTENER = "http"
API_LISTENER = "https-api"
GRPC_SERVICE = "inference.GRPCInferenceService"
GRPC_METHODS = (
    "ServerLive",
    "ServerReady",
    "ServerMetadata",
    "ModelReady",
    "ModelMetadata",
    "ModelConfig",
    "ModelInfer",
)
"""The gRPC methods of an encoder's Triton that reach the edge: health, metadata and inference; no stream (an
encoder is not decoupled), repository, shared-memory, statistics, trace or logging method."""


def exposes_triton(model: ModelSpec) -> bool:
    """Whether ``model``'s own Triton gets routes at the edge: only an encoder (ONNX Runtime on the current Triton,
    whose ``infer`` takes a bounded batch of token ids and generates nothing). Never a FasterTransformer model
    (Triton 23.04, unpatchable) nor a vLLM model (its raw ``generate`` bypasses the gateway's limits on
    ``max_tokens``, ``n`` and ``logprobs``): both are reached through the OpenAI gateway only."""
    return model.family.is_encoder


@dataclass(frozen=True)
class GatewayRef:
    """The Gateway every route of the stack attaches to."""

    name: str
    namespace: str | None = None
    """None = the routes' own namespace."""


@dataclass(frozen=True)
class EdgeArgs:
    """How one host of the stack is exposed through Gateway API (the lead maps settings onto this)."""

    gateway: GatewayRef
    host: str
    """Public DNS name of this route (``<model>.<base>`` for a model, ``<base>`` for the OpenAI gateway)."""
    listener: str | None
    """The Gateway's listener the route attaches to (its HTTPS listener for ``host``); None = any listener that
    accepts the host (a user's own Gateway whose listener names the stack does not know)."""
    tls: bool = True
    """Clients reach the host over HTTPS (and gRPC over TLS); False only for a local cluster."""
    api_key_auth: bool = True
    """The route is labelled for the stack's API-key ``SecurityPolicy``."""
    request_timeout_seconds: int = 300
    """Longest request, a stream included (Envoy's own default, 15 s, would cut long generations)."""
    grpc: bool = True
    """Also a GRPCRoute for the model (only over TLS: HTTP/2 reaches the listener through ALPN)."""
    controller_namespace: str = "envoy-gateway-system"
    """Namespace of the Envoy proxies (Envoy Gateway runs them beside its controller)."""
    controller_pods: dict[str, str] = field(default_factory=lambda: dict(ENVOY_PROXY_PODS))
    """Labels of the Envoy proxy pods: the only pods of ``controller_namespace`` the NetworkPolicy lets reach an
    exposed backend."""

    @property
    def grpc_exposed(self) -> bool:
        return self.grpc and self.tls


@dataclass(frozen=True)
class WeightedBackend:
    """One Service behind a route and its share of the traffic (the canary split of a judged rollout)."""

    service: str
    weight: int = 1


def validate_edge(args: EdgeArgs) -> list[str]:
    """Every problem with ``args``, each naming the field and the fix (empty when valid)."""
    problems: list[str] = []
    if not args.host or "." not in args.host:
        problems.append(f"edge.host {args.host!r} is not a DNS name: give the endpoint's public host name")
    if not args.gateway.name:
        problems.append("edge.gateway: name the Gateway the routes attach to")
    if args.request_timeout_seconds < 1:
        problems.append("edge.request_timeout_seconds must be at least 1")
    return problems


def model_listener(model: str) -> str:
    """The HTTPS listener of a model's host on the stack's Gateway."""
    return f"https-m-{model}"


def certificate_secret(listener: str) -> str:
    """The Secret cert-manager writes a listener's certificate into (in the Gateway's namespace)."""
    return f"edge-{listener}-tls"


def endpoint_urls(args: EdgeArgs) -> tuple[str, str | None]:
    """(HTTP base URL, gRPC target ``host:443`` or None) as clients outside the cluster see them."""
    http = f"{'https' if args.tls else 'http'}://{args.host}"
    return http, (f"{args.host}:443" if args.grpc_exposed else None)


REDIRECT_LABELS = {AUTH_LABEL: AUTH_PUBLIC}
"""The HTTPS redirect's route is exempted from the key (it reaches no backend)."""


def route_labels(args: EdgeArgs, base: dict[str, str]) -> dict[str, str]:
    """The route's labels: the component's, plus :data:`AUTH_LABEL` = :data:`AUTH_API_KEY` when the stack asks for
    keys (the policies select routes by it on a cluster's own Gateway; the policy pack asks it of every route that
    reaches a backend)."""
    return {**base, **({AUTH_LABEL: AUTH_API_KEY} if args.api_key_auth else {})}


def _parent_ref(args: EdgeArgs) -> dict[str, Any]:
    ref: dict[str, Any] = {"group": GATEWAY_GROUP, "kind": "Gateway", "name": args.gateway.name}
    if args.gateway.namespace:
        ref["namespace"] = args.gateway.namespace
    if args.listener:
        ref["sectionName"] = args.listener
    return ref


HSTS = "max-age=31536000; includeSubDomains"
"""``Strict-Transport-Security`` on every answer of a TLS host: a client that once reached it never falls back to
plain HTTP (where the API key would travel in clear before the redirect)."""


def _hsts_filters(args: EdgeArgs) -> list[dict[str, Any]]:
    if not args.tls:
        return []
    header = {"name": "Strict-Transport-Security", "value": HSTS}
    return [{"type": "ResponseHeaderModifier", "responseHeaderModifier": {"set": [header]}}]


def _backend_refs(backends: Sequence[WeightedBackend], port: int) -> list[dict[str, Any]]:
    if not backends:
        raise ValueError("a route needs at least one backend")
    return [{"kind": "Service", "name": b.service, "port": port, "weight": b.weight} for b in backends]


def triton_paths(model: str) -> tuple[str, ...]:
    """The KServe V2 paths of an encoder that reach the edge (exact: nothing under them is implied; no ``generate``:
    an encoder generates nothing, and no generator's Triton has a route at all, :func:`exposes_triton`)."""
    m = f"/v2/models/{model}"
    return (
        "/v2",
        "/v2/health/live",
        "/v2/health/ready",
        m,
        f"{m}/ready",
        f"{m}/config",
        f"{m}/infer",
    )


def triton_path_pattern(model: str) -> str:
    """One RE2 pattern that matches exactly :func:`triton_paths` of ``model`` (Envoy matches a route's regular
    expression against the whole path). One match, so one Envoy route and one rate-limit bucket per key for the
    model's host, where seven exact matches made seven."""
    name = re.escape(model)
    return rf"(/v2(/health/(live|ready))?|/v2/models/{name}(/(ready|config|infer))?)"


def grpc_method_pattern() -> tuple[str, str]:
    """(service, method) RE2 patterns matching exactly :data:`GRPC_METHODS` of :data:`GRPC_SERVICE` (Envoy Gateway
    matches ``/<service>/<method>`` against the whole path): one match, one Envoy route, one bucket per key."""
    return re.escape(GRPC_SERVICE), f"({'|'.join(GRPC_METHODS)})"


def model_http_route_spec(args: EdgeArgs, model: str, backends: Sequence[WeightedBackend]) -> dict[str, Any]:
    """Triton's inference routes of ``model`` on its host (:func:`triton_path_pattern`), to its Service's HTTP port.

    Streams (``generate_stream`` events) go out as Triton writes them: Envoy does not buffer a response body, so
    nothing needs switching off, unlike ingress-nginx's ``proxy-buffering``; nor does it cap a request body.
    """
    return {
        "parentRefs": [_parent_ref(args)],
        "hostnames": [args.host],
        "rules": [
            {
                "matches": [{"path": {"type": "RegularExpression", "value": triton_path_pattern(model)}}],
                "backendRefs": _backend_refs(backends, HTTP_PORT),
                "timeouts": {"request": f"{args.request_timeout_seconds}s"},
                **({"filters": _hsts_filters(args)} if args.tls else {}),
            }
        ],
    }


def model_grpc_route_spec(args: EdgeArgs, backends: Sequence[WeightedBackend]) -> dict[str, Any]:
    """The inference methods of Triton's gRPC service on the model's host (:func:`grpc_method_pattern`), to its
    Service's gRPC port (Envoy balances per request, not per connection)."""
    service, method = grpc_method_pattern()
    return {
        "parentRefs": [_parent_ref(args)],
        "hostnames": [args.host],
        "rules": [
            {
                "matches": [{"method": {"type": "RegularExpression", "service": service, "method": method}}],
                "backendRefs": _backend_refs(backends, GRPC_PORT),
            }
        ],
    }


def api_http_route_spec(args: EdgeArgs, service: str, port: int, path: str) -> dict[str, Any]:
    """The OpenAI gateway's ``path`` (``/v1``) on the base host; its SSE streams go out unbuffered."""
    return {
        "parentRefs": [_parent_ref(args)],
        "hostnames": [args.host],
        "rules": [
            {
                "matches": [{"path": {"type": "PathPrefix", "value": path}}],
                "backendRefs": _backend_refs([WeightedBackend(service)], port),
                "timeouts": {"request": f"{args.request_timeout_seconds}s"},
                **({"filters": _hsts_filters(args)} if args.tls else {}),
            }
        ],
    }


# -- the stack's own Gateway (a cluster it builds, or edge objects it makes on an existing cluster) ---------------


@dataclass(frozen=True)
class Listener:
    name: str
    host: str


def gateway_listeners(base_host: str, models: Sequence[str], *, api: bool) -> tuple[Listener, ...]:
    """One HTTPS listener per host: the base host (the OpenAI gateway) and each model's ``<model>.<base>``.

    One host each, not a wildcard: ACME's HTTP-01 challenge cannot issue a wildcard certificate, and each
    listener's certificate is issued for exactly the host it serves.
    """
    api_listener = (Listener(API_LISTENER, base_host),) if api else ()
    return (*api_listener, *(Listener(model_listener(m), f"{m}.{base_host}") for m in models))


def gateway_class_spec() -> dict[str, Any]:
    return {"controllerName": ENVOY_GATEWAY_CONTROLLER}


def gateway_spec(
    listeners: Sequence[Listener], *, tls: bool, class_name: str = GATEWAY_CLASS, proxy_config: str | None = None
) -> dict[str, Any]:
    """HTTP on 80 (the HTTPS redirect, and ACME's HTTP-01 challenges) and, with TLS, one HTTPS listener per host on
    443 terminating with the certificate cert-manager issues into :func:`certificate_secret`. Routes only from the
    Gateway's own namespace (the stack's). ``proxy_config``: the ``EnvoyProxy`` (same namespace) its proxies follow."""
    same = {"namespaces": {"from": "Same"}}
    out: list[dict[str, Any]] = [{"name": HTTP_LISTENER, "protocol": "HTTP", "port": 80, "allowedRoutes": same}]
    if tls:
        out += [
            {
                "name": lst.name,
                "protocol": "HTTPS",
                "port": 443,
                "hostname": lst.host,
                "tls": {
                    "mode": "Terminate",
                    "certificateRefs": [{"kind": "Secret", "name": certificate_secret(lst.name)}],
                },
                "allowedRoutes": same,
            }
            for lst in listeners
        ]
    spec: dict[str, Any] = {"gatewayClassName": class_name, "listeners": out}
    if proxy_config:
        spec["infrastructure"] = {
            "parametersRef": {"group": "gateway.envoyproxy.io", "kind": "EnvoyProxy", "name": proxy_config}
        }
    return spec


def gateway_annotations(cluster_issuer: str | None) -> dict[str, str]:
    """cert-manager's Gateway API support issues every HTTPS listener's certificate from ``cluster_issuer``."""
    return {"cert-manager.io/cluster-issuer": cluster_issuer} if cluster_issuer else {}


def https_redirect_route_spec(gateway: GatewayRef) -> dict[str, Any]:
    """Plain HTTP on the Gateway answers with a redirect to HTTPS; cert-manager's challenge routes (exact paths)
    are more specific and win. It reaches no backend, so it is labelled :data:`AUTH_PUBLIC`
    (:data:`REDIRECT_LABELS`): a client that tries ``http://`` gets the redirect, not a 401."""
    parent = _parent_ref(EdgeArgs(gateway=gateway, host="-.-", listener=HTTP_LISTENER))
    return {
        "parentRefs": [parent],
        "rules": [
            {"filters": [{"type": "RequestRedirect", "requestRedirect": {"scheme": "https", "statusCode": 301}}]}
        ],
    }


def _selectors(kinds: Sequence[str], value: str) -> list[dict[str, Any]]:
    return [{"group": GATEWAY_GROUP, "kind": kind, "matchLabels": {AUTH_LABEL: value}} for kind in kinds]


def policy_targets(gateway: GatewayRef | None) -> dict[str, Any]:
    """Where the stack's API-key and traffic policies attach. ``gateway``: the Gateway the stack makes (in the
    policies' namespace), targeted whole, so every route on it is covered, one made later included (closed by
    default). None: a cluster's own Gateway, which the stack may not cover whole: the routes labelled
    :data:`AUTH_API_KEY`."""
    if gateway is not None:
        return {"targetRefs": [{"group": GATEWAY_GROUP, "kind": "Gateway", "name": gateway.name}]}
    return {"targetSelectors": _selectors(("HTTPRoute", "GRPCRoute"), AUTH_API_KEY)}


def api_key_policy_spec(credentials_secret: str, gateway: GatewayRef | None) -> dict[str, Any]:
    """Envoy Gateway's API-key authentication on every route of the stack's Gateway (or every labelled route of a
    cluster's own, :func:`policy_targets`): the key from ``Authorization: Bearer``, checked against the Secret's
    values; the key's id forwarded in :data:`CLIENT_HEADER`, the key stripped."""
    return {
        **policy_targets(gateway),
        "apiKeyAuth": {
            "credentialRefs": [{"group": "", "kind": "Secret", "name": credentials_secret}],
            "extractFrom": [{"headers": [AUTHORIZATION]}],
            "forwardClientIDHeader": CLIENT_HEADER,
            "sanitize": True,
        },
    }


def public_routes_policy_spec() -> dict[str, Any]:
    """The one exemption from the Gateway's API key: a ``SecurityPolicy`` that asks nothing, on the HTTPRoutes
    labelled :data:`AUTH_PUBLIC` (the HTTPS redirect, cert-manager's challenge routes). Envoy Gateway applies a
    route's own policy instead of its Gateway's (the most specific scope wins), so these routes, and only these, are
    served without a key."""
    return {"targetSelectors": _selectors(("HTTPRoute",), AUTH_PUBLIC)}


PUBLIC_REQUEST_BUFFER_BYTES = 1024
"""The most a public route's request may carry (:func:`public_routes_traffic_policy_spec`): the HTTPS redirect and
cert-manager's challenges are answered to bodiless GETs, so 1 KiB is room for any such request and no more."""


def public_routes_traffic_policy_spec() -> dict[str, Any]:
    """The public routes' own ``BackendTrafficPolicy``: a request buffer of :data:`PUBLIC_REQUEST_BUFFER_BYTES`
    instead of the Gateway's 1 MiB (:func:`rate_limit_policy_spec`).

    Envoy Gateway v1.9's HTTP filters run API-key auth (7) before Buffer (12) and Lua (13+): on a keyed route a request
    without a key is refused at its headers, before any body is held; on a public route nothing refuses it, so the
    Gateway's buffer would hold up to 1 MiB of anyone's body per request before the redirect answers. Envoy Gateway
    applies a route's own ``BackendTrafficPolicy`` instead of its Gateway's: with ``mergeType`` unset "no merging
    occurs, and only the most specific configuration takes effect" (``api/v1alpha1/backendtrafficpolicy_types.go``,
    ``BackendTrafficPolicySpec.MergeType``, v1.9.1), so these routes get this buffer and none of the Gateway's other
    settings, which they do not need (their rate-limit rule counts only keyed requests; they reach no backend of the
    stack). The label is the exemption's own (:func:`public_routes_policy_spec`), so a route that escapes the key
    never escapes this cap."""
    return {
        "targetSelectors": _selectors(("HTTPRoute",), AUTH_PUBLIC),
        "requestBuffer": {"limit": str(PUBLIC_REQUEST_BUFFER_BYTES)},
    }


CONNECTION_LIMIT = 1024
"""Most connections one Gateway listener of one proxy replica holds at once (:func:`client_traffic_policy_spec`)."""


def client_traffic_policy_spec(gateway: GatewayRef, connection_limit: int = CONNECTION_LIMIT) -> dict[str, Any]:
    """The ``ClientTrafficPolicy`` of the stack's Gateway: each of its listeners holds at most ``connection_limit``
    connections per proxy replica (Envoy's ``connection_limit`` network filter on the listener's filter chain); one
    beyond is closed at once. Each connection holds up to Envoy Gateway's default connection buffer (32 KiB), so
    connections opened by anyone, with no key, cannot grow a proxy's memory past what :data:`ENVOY_MEMORY_LIMIT`
    allows (the sizing: ``docs/security/edge.md``)."""
    return {
        "targetRefs": [{"group": GATEWAY_GROUP, "kind": "Gateway", "name": gateway.name}],
        "connection": {"connectionLimit": {"value": connection_limit}},
    }


# -- the exemption held in the cluster: who may carry the public label ---------------------------------------------

ADMISSION_API = "admissionregistration.k8s.io/v1"
"""ValidatingAdmissionPolicy and its binding: GA since Kubernetes 1.30 (the API server evaluates the CEL itself, no
webhook to run)."""
ACME_CHALLENGE_PREFIX = "/.well-known/acme-challenge/"
ACME_SOLVER_SERVICE_PREFIX = "cm-acme-http-solver-"
"""cert-manager's solver Service of a challenge: ``generateName`` ``cm-acme-http-solver-``, port
:data:`ACME_SOLVER_PORT` (``pkg/issuer/acme/http``: the route it makes has one exact path, the challenge's token, to
that Service, named with the challenge's namespace, the route's own)."""
ACME_SOLVER_PORT = 8089
CERT_MANAGER_USER = "system:serviceaccount:cert-manager:cert-manager"
"""Who makes the solver routes: cert-manager's controller, as its chart installs it (release ``cert-manager`` in the
namespace ``cert-manager``: the service account ``cert-manager``), on a cluster the stack builds
(``components.platform.aws.charts.CERT_MANAGER``) as in cert-manager's own default install."""
PUBLIC_ROUTE_MESSAGE = (
    f"an HTTPRoute labelled {AUTH_LABEL}={AUTH_PUBLIC} is served without an API key, so only the HTTPS redirect (no "
    f"backendRefs, RequestRedirect filters to the same URL over https only: no hostname, path or port) and "
    f"cert-manager's ACME HTTP-01 solver routes, made by cert-manager itself ({CERT_MANAGER_USER}: Exact "
    f"{ACME_CHALLENGE_PREFIX}<token> paths to a {ACME_SOLVER_SERVICE_PREFIX}* Service on port {ACME_SOLVER_PORT}, "
    f"no filters) may carry it: label this route {AUTH_LABEL}={AUTH_API_KEY} (clients send their key)"
)
"""What the API server answers a route that carries :data:`AUTH_PUBLIC` and is neither (issue 51)."""

_HTTPS_REDIRECT = (
    "(f.type == 'RequestRedirect' && has(f.requestRedirect) && has(f.requestRedirect.scheme)"
    " && f.requestRedirect.scheme == 'https' && !has(f.requestRedirect.hostname) && !has(f.requestRedirect.path)"
    " && !has(f.requestRedirect.port))"
)
"""A redirect filter that changes the scheme to https and nothing else (``statusCode`` aside): no ``hostname``,
``path`` or ``port``, so a public route can send a client only to the same URL over HTTPS, never elsewhere (an open
redirect on the stack's host, published without a key by anyone who may write routes)."""
_REDIRECT_RULE = (
    "((!has(r.backendRefs) || size(r.backendRefs) == 0)"
    " && (!has(r.filters) || r.filters.all(f, " + _HTTPS_REDIRECT + ")))"
)
_SOLVER_BACKEND = (
    "((!has(b.group) || b.group == '') && (!has(b.kind) || b.kind == 'Service')"
    " && (!has(b.namespace) || b.namespace == object.metadata.namespace)"
    f" && b.name.startsWith('{ACME_SOLVER_SERVICE_PREFIX}') && has(b.port) && b.port == {ACME_SOLVER_PORT}"
    " && (!has(b.filters) || size(b.filters) == 0))"
)
_SOLVER_MATCH = f"(has(m.path) && m.path.type == 'Exact' && m.path.value.startsWith('{ACME_CHALLENGE_PREFIX}'))"
_SOLVER_RULE = (
    "(has(r.backendRefs) && size(r.backendRefs) > 0 && r.backendRefs.all(b, "
    + _SOLVER_BACKEND
    + ") && (!has(r.filters) || size(r.filters) == 0) && has(r.matches) && size(r.matches) > 0 && r.matches.all(m, "
    + _SOLVER_MATCH
    + "))"
)
PUBLIC_LABEL_CONDITION = (
    f"has(object.metadata.labels) && '{AUTH_LABEL}' in object.metadata.labels"
    f" && object.metadata.labels['{AUTH_LABEL}'] == '{AUTH_PUBLIC}'"
)
_BY_THE_SOLVER = (
    f"(request.userInfo.username == '{CERT_MANAGER_USER}'"
    " || (request.operation == 'UPDATE' && oldObject.spec == object.spec"
    f" && {PUBLIC_LABEL_CONDITION.replace('object.', 'oldObject.')}))"
)
"""A solver route is cert-manager's own: made (or changed) by its controller's service account. Anyone may still
change what the exemption does not read of a route already public (its finalizers, owner references, annotations:
the garbage collector's and Envoy Gateway's writes), never its rules or its label: the shape alone (a Service named
``cm-acme-http-solver-*`` on port 8089) is one that whoever may write Services in the namespace could give any pod."""
PUBLIC_ROUTE_EXPRESSION = (
    f"!has(object.spec.rules) || object.spec.rules.all(r, {_REDIRECT_RULE})"
    f" || (object.spec.rules.all(r, {_REDIRECT_RULE} || {_SOLVER_RULE}) && {_BY_THE_SOLVER})"
)
"""Every rule of the route is the redirect's (reaches no backend: no ``backendRefs``, no filter but the scheme's change
to https (:data:`_HTTPS_REDIRECT`), so no mirror, no extension and no redirect elsewhere), or each is the redirect's
or a solver's (only exact challenge paths, only solver Services of the route's namespace on the solver's port, no
filter that could rewrite or mirror) and cert-manager sent it (:data:`_BY_THE_SOLVER`, evaluated once per request)."""


def public_route_admission_policy_spec() -> dict[str, Any]:
    """A ``ValidatingAdmissionPolicy`` that refuses an HTTPRoute labelled :data:`AUTH_PUBLIC` unless it is one the
    stack intends (:data:`PUBLIC_ROUTE_EXPRESSION`): the exemption (:func:`public_routes_policy_spec`) selects by
    label, and anyone who may create or label HTTPRoutes in the namespace could otherwise publish a backend without
    a key; the policy pack sees only Pulumi's plan. CREATE and UPDATE alike, on the object as it would be stored:
    the label added later to a route, or a backend added later to a labelled one, is refused too. ``Fail``: a route
    the API server cannot judge is refused."""
    return {
        "failurePolicy": "Fail",
        "matchConstraints": {
            "resourceRules": [
                {
                    "apiGroups": [GATEWAY_GROUP],
                    "apiVersions": ["*"],
                    "operations": ["CREATE", "UPDATE"],
                    "resources": ["httproutes"],
                }
            ]
        },
        "matchConditions": [{"name": "labelled-public", "expression": PUBLIC_LABEL_CONDITION}],
        "validations": [
            {"expression": PUBLIC_ROUTE_EXPRESSION, "message": PUBLIC_ROUTE_MESSAGE, "reason": "Forbidden"}
        ],
    }


def public_route_admission_binding_spec(policy: str, namespace: str) -> dict[str, Any]:
    """The policy denies (not only warns or audits) in the stack's namespace: the one whose routes the Gateway admits
    and the exemption's ``SecurityPolicy`` selects."""
    return {
        "policyName": policy,
        "validationActions": ["Deny"],
        "matchResources": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}},
    }


def rate_limit_policy_spec(
    requests_per_minute: int,
    max_concurrent_requests: int,
    gateway: GatewayRef | None,
    request_timeout_seconds: int = 300,
    *,
    shared: bool = False,
    max_body_bytes: int = MAX_BODY_BYTES,
) -> dict[str, Any]:
    """Each API key at most ``requests_per_minute`` requests a minute: one rule whose bucket is per distinct
    :data:`CLIENT_HEADER` value, which only the auth filter sets, so every key, one added later included, is limited
    without a rule of its own. By default a local limit (no rate-limit service), whose buckets Envoy Gateway keeps
    per route and proxy replica. ``shared`` (Envoy Gateway's rate-limit service runs, ``rateLimitRedis``): its
    global limit with ``shared: true``, one bucket per key for every route the policy covers (the whole Gateway)
    and every replica, counted in Redis.

    At most ``max_concurrent_requests`` requests reach one backend at once from one proxy replica, as many again
    wait, and beyond that Envoy answers 503 at once (its circuit breaker: ``maxConnections`` for HTTP/1.1,
    ``maxParallelRequests`` for HTTP/2 and gRPC, ``maxPendingRequests`` the wait): a flood of long streams cannot pile
    up on the gateway or Triton.

    The same policy sets every route's request timeout, GRPCRoutes included: Gateway API's GRPCRoute has no
    ``timeouts`` field, and Envoy's 15 s default would cut a long call; Envoy Gateway applies
    ``timeout.http.requestTimeout`` of a BackendTrafficPolicy to the GRPCRoutes it targets
    (https://gateway.envoyproxy.io/latest/tasks/traffic/grpc-timeouts/).

    And every request body is held to ``max_body_bytes``, the OpenAI gateway's own cap, before it reaches a backend
    (``requestBuffer``: Envoy receives the whole request, and answers 413 beyond): an encoder's own routes take text
    that its tokenizer reads whole, and would otherwise take any size. No route streams a request (``/v1``'s streams
    are answers; no gRPC stream is routed), so nothing waits on the buffer."""
    rule: dict[str, Any] = {
        "clientSelectors": [{"headers": [{"name": CLIENT_HEADER, "type": "Distinct"}]}],
        "limit": {"requests": requests_per_minute, "unit": "Minute"},
        **({"shared": True} if shared else {}),
    }
    return {
        **policy_targets(gateway),
        "timeout": {"http": {"requestTimeout": f"{request_timeout_seconds}s"}},
        "circuitBreaker": {
            "maxConnections": max_concurrent_requests,
            "maxParallelRequests": max_concurrent_requests,
            "maxPendingRequests": max_concurrent_requests,
        },
        "rateLimit": {"global" if shared else "local": {"rules": [rule]}},
        "requestBuffer": {"limit": str(max_body_bytes)},
    }


def api_key_expiry_rule_spec(
    keys: Sequence[ApiKey], warn_days: int = EXPIRY_WARNING_DAYS, *, edge_check: bool = True
) -> dict[str, Any] | None:
    """Alerts for the keys the edge accepts that carry an ``expires`` day (None when none does): ``ApiKeyExpiringSoon``
    from ``warn_days`` before it (hand the client its next key), ``ApiKeyExpired`` from the day itself. With
    ``edge_check`` (the stack's own Gateway) the edge refuses the key from that day on every route
    (:func:`key_expiry_lua`; the OpenAI gateway too, ``tritonft gateway --api-key-expires``), so a client still
    sending it gets 401; without (a cluster's own Envoy Gateway, whose Lua the stack does not control) the OpenAI
    gateway does, but an encoder's own routes accept it until a ``pulumi up`` leaves it out of the Secret. Either
    way this rule, rendered by that ``up`` with the live keys only, goes with it. Both read only the clock, so they
    fire with no ``up`` and no traffic."""
    rules: list[dict[str, Any]] = []
    for key in keys:
        at = expires_at(key)
        if key.expires is None or at is None:
            continue
        labels = {"severity": "warning", "service": "edge", "api_key": key.id, "expires": key.expires.isoformat()}
        rules += [
            {
                "alert": "ApiKeyExpiringSoon",
                "expr": f"vector(time()) >= {at - warn_days * 86400}",
                "for": "0m",
                "labels": labels,
                "annotations": {
                    "summary": f"API key {key.id} expires on {key.expires.isoformat()}",
                    "description": (
                        f"The edge refuses API key {key.id} from {key.expires.isoformat()} (apiKeys): give the client "
                        "its next key now, beside this one."
                    ),
                },
            },
            {
                "alert": "ApiKeyExpired",
                "expr": f"vector(time()) >= {at}",
                "for": "0m",
                "labels": labels,
                "annotations": {
                    "summary": f"API key {key.id} expired on {key.expires.isoformat()}"
                    + (": the edge refuses it" if edge_check else " but the edge still accepts it"),
                    "description": (
                        f"API key {key.id} expired on {key.expires.isoformat()}: every route of the edge answers it "
                        f"401 (gRPC: UNAUTHENTICATED); a client still sending it shows as client={key.id} in Envoy's "
                        "access log. Its entry stays in the edge's Secret until a `pulumi up` of the stack leaves it "
                        "out, which ends this alert."
                        if edge_check
                        else f"API key {key.id} expired on {key.expires.isoformat()}; the OpenAI gateway refuses it "
                        "(401), but Envoy accepts it on an encoder's own routes until a `pulumi up` of the stack "
                        "leaves it out of the edge's Secret: run one."
                    ),
                },
            },
        ]
    if not rules:
        return None
    return with_runbooks({"groups": [{"name": "triton-ft.edge.api-keys", "rules": rules}]})


def expires_at(key: ApiKey) -> int | None:
    """The Unix time the key is refused from: 00:00 UTC of its ``expires`` day (None: it never expires)."""
    if key.expires is None:
        return None
    return int(datetime.combine(key.expires, time(), UTC).timestamp())


def _lua_string(text: str) -> str:
    """``text`` as a Lua string literal (a JSON string is one for the printable ASCII the stack writes)."""
    if not text.isascii() or not text.isprintable():
        raise ValueError(f"{text!r}: only printable ASCII goes into the edge's Lua")
    return json.dumps(text)


KEY_EXPIRY_GRPC_STATUS = 16
"""gRPC ``UNAUTHENTICATED``: what a gRPC call with an expired key gets (its trailers-only answer)."""


def key_expiry_lua(keys: Sequence[ApiKey]) -> str | None:
    """Envoy's Lua filter that refuses each key of ``keys`` that carries an ``expires`` day from 00:00 UTC of that
    day, on every route of the edge, with no ``up`` (None when no key carries a day).

    Envoy Gateway's API-key authentication has no expiry, and the credentials Secret changes only at an ``up``. Its
    filter chain runs ``api_key_auth`` before any route's Lua (``internal/xds/translator/httpfilters.go`` in v1.9:
    order 7, then Buffer 12, then Lua 13+), so the script reads the key id the auth filter forwarded in
    :data:`CLIENT_HEADER` (set from the key it accepted, never the caller's) and compares the proxy's clock
    (``os.time()``: Envoy opens Lua's standard libraries) with the key's day. A refused HTTP request gets the OpenAI
    gateway's own 401 body (``tritonft.gateway.limits.key_expired``); a gRPC call (``content-type:
    application/grpc...``) the trailers-only status ``UNAUTHENTICATED`` with the same message. A request without the
    header (the public routes) passes.
    Buffer runs before Lua, so an expired key's request body is received whole (at most the Gateway's 1 MiB
    ``requestBuffer``, :func:`rate_limit_policy_spec`) before this refusal."""
    entries: list[str] = []
    for key in keys:
        if key.expires is None:
            continue
        error = key_expired(key.id, key.expires)
        body = json.dumps(error.body(), separators=(",", ":"))
        at, message = expires_at(key), _lua_string(error.message)
        entries.append(f"  [{_lua_string(key.id)}] = {{{at}, {message}, {_lua_string(body)}}},")
    if not entries:
        return None
    return "\n".join(
        [
            "-- triton-ft (components/common/edge.py, key_expiry_lua): each API key is refused from its expires day.",
            "-- key id = {first refused second (00:00 UTC of the day), message, HTTP answer}",
            "local EXPIRED = {",
            *entries,
            "}",
            "",
            "function envoy_on_request(handle)",
            "  local headers = handle:headers()",
            f"  local id = headers:get({_lua_string(CLIENT_HEADER)})",
            "  if id == nil then return end",
            "  local key = EXPIRED[id]",
            "  if key == nil or os.time() < key[1] then return end",
            '  local kind = headers:get("content-type") or ""',
            '  if string.find(kind, "application/grpc", 1, true) == 1 then',
            '    handle:respond({[":status"] = "200", ["content-type"] = "application/grpc",',
            f'      ["grpc-status"] = "{KEY_EXPIRY_GRPC_STATUS}", ["grpc-message"] = key[2]}}, "")',
            "  else",
            '    handle:respond({[":status"] = "401", ["content-type"] = "application/json"}, key[3])',
            "  end",
            "end",
            "",
        ]
    )


def key_expiry_policy_spec(script: str, gateway: GatewayRef) -> dict[str, Any]:
    """The ``EnvoyExtensionPolicy`` that runs :func:`key_expiry_lua` on every route of the stack's own Gateway (as the
    API-key policy covers it: :func:`policy_targets`). Only there: Envoy Gateway v1.9 runs Lua policies only where its
    configuration turns them on (``extensionApis.enableLua``, which the stack sets on the Envoy Gateway it installs),
    and otherwise answers 500 on every route such a policy targets; a cluster's own Envoy Gateway is not the stack's
    to configure."""
    return {**policy_targets(gateway), "lua": [{"type": "Inline", "inline": script}]}


ENVOY_CPU_REQUEST = "100m"
ENVOY_MEMORY_REQUEST = "512Mi"
"""What a proxy replica is scheduled with: Envoy Gateway's own default request (100m, 512Mi), which ``resources``
replaces whole, so both are stated: Envoy's own ~100 MiB, its connections' buffers and a few hundred requests' bodies
in flight (``docs/security/edge.md``)."""
ENVOY_MEMORY_LIMIT = "1Gi"
"""A proxy replica's memory ceiling. It also turns on Envoy's overload manager: Envoy Gateway v1.9 gives Envoy a heap
monitor of 80% of the container's memory limit (``calculateMaxHeapSizeBytes``), past 98% of which Envoy stops
accepting requests; past the limit itself the kernel ends that replica (the other serves; the PDB and the spread keep
one), not the node under it. The sizing: ``docs/security/edge.md``."""


def envoy_proxy_spec(service_annotations: dict[str, str], drain_timeout_seconds: int) -> dict[str, Any]:
    """The proxy fleet of the stack's Gateway: two replicas behind an internet-facing NLB, an access log line per
    request naming the authenticated client (never a header that carries a key), and a drain as long as the longest
    request the edge allows (``drain_timeout_seconds``: the routes' request timeout), so a proxy pod replaced by an
    Envoy Gateway upgrade or a node drain lets its streams end (Envoy Gateway's default drain is 60 s). The Envoy
    container asks :data:`ENVOY_MEMORY_REQUEST` and may use no more than :data:`ENVOY_MEMORY_LIMIT` (Envoy Gateway
    sets neither by default)."""
    log_format = (
        '[%START_TIME%] "%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %PROTOCOL%" %RESPONSE_CODE% '
        f"%RESPONSE_FLAGS% client=%REQ({CLIENT_HEADER.upper()})% host=%REQ(:AUTHORITY)% "
        '%BYTES_RECEIVED% %BYTES_SENT% %DURATION% "%UPSTREAM_HOST%"\n'
    )
    return {
        "provider": {
            "type": "Kubernetes",
            "kubernetes": {
                "envoyDeployment": {
                    "replicas": 2,
                    "container": {
                        "resources": {
                            "requests": {"cpu": ENVOY_CPU_REQUEST, "memory": ENVOY_MEMORY_REQUEST},
                            "limits": {"memory": ENVOY_MEMORY_LIMIT},
                        }
                    },
                },
                "envoyService": {"type": "LoadBalancer", "annotations": dict(service_annotations)},
            },
        },
        "shutdown": {"drainTimeout": f"{drain_timeout_seconds}s"},
        "telemetry": {
            "accessLog": {
                "settings": [
                    {
                        "format": {"type": "Text", "text": log_format},
                        "sinks": [{"type": "File", "file": {"path": "/dev/stdout"}}],
                    }
                ]
            }
        },
    }


# -- certificates: the ClusterIssuer the stack makes (cert-manager) ------------------------------------------------

LETSENCRYPT_PRODUCTION = "https://acme-v02.api.letsencrypt.org/directory"
"""The one ACME directory a stack's issuer uses, in every environment: its certificates chain to ISRG Root X1, which
every client trusts (the in-`up` probes and judges verify TLS with the system roots, as a user's client does).
Let's Encrypt's staging directory signs with roots no client trusts, so a dev or staging stack issued by it could
never pass its own probe."""


@dataclass(frozen=True)
class AcmeIssuer:
    """A ClusterIssuer made by the stack: Let's Encrypt's production directory, HTTP-01 through the edge."""

    name: str
    email: str


def acme_issuer_spec(issuer: AcmeIssuer, solver: dict[str, Any]) -> dict[str, Any]:
    """The ACME account (its key in a Secret cert-manager writes itself) and the one solver of every challenge."""
    return {
        "acme": {
            "server": LETSENCRYPT_PRODUCTION,
            "email": issuer.email,
            "privateKeySecretRef": {"name": f"{issuer.name}-account-key"},
            "solvers": [solver],
        }
    }


def gateway_http01_solver(gateway: GatewayRef) -> dict[str, Any]:
    """HTTP-01 answered on the Gateway's plain HTTP listener: cert-manager adds a route per challenge (the exact path
    ``/.well-known/acme-challenge/<token>`` to its solver pod), labelled :data:`AUTH_PUBLIC` so that the ACME server
    reaches it without a key (:func:`public_routes_policy_spec`)."""
    ref: dict[str, Any] = {"kind": "Gateway", "name": gateway.name, "sectionName": HTTP_LISTENER}
    if gateway.namespace:
        ref["namespace"] = gateway.namespace
    return {"http01": {"gatewayHTTPRoute": {"parentRefs": [ref], "labels": {AUTH_LABEL: AUTH_PUBLIC}}}}


def ingress_http01_solver(ingress_class: str) -> dict[str, Any]:
    """HTTP-01 answered through the Ingress controller (the Ingress edge)."""
    return {"http01": {"ingress": {"ingressClassName": ingress_class}}}
