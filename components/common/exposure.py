"""The edge's resources shared by the Triton services and the gateway.

Ingress path: the basic-auth Secret (same auth everywhere). Gateway API path: each model's and the OpenAI gateway's
routes, and the stack-wide :class:`EdgeObjects` (API keys, credentials Secret, policies, the stack's own Gateway).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pulumi_random

from components.common.edge import (
    ENVOY_GATEWAY_API,
    GATEWAY_API,
    REDIRECT_LABELS,
    AcmeIssuer,
    EdgeArgs,
    GatewayRef,
    WeightedBackend,
    acme_issuer_spec,
    api_http_route_spec,
    api_key_expiry_rule_spec,
    api_key_policy_spec,
    client_traffic_policy_spec,
    envoy_proxy_spec,
    gateway_annotations,
    gateway_listeners,
    gateway_spec,
    https_redirect_route_spec,
    key_expiry_lua,
    key_expiry_policy_spec,
    model_grpc_route_spec,
    model_http_route_spec,
    public_route_admission_binding_spec,
    public_route_admission_policy_spec,
    public_routes_policy_spec,
    public_routes_traffic_policy_spec,
    rate_limit_policy_spec,
    route_labels,
)
from components.common.edge_availability import with_proxy_availability
from components.common.ingress import BASIC_AUTH_KEY, IngressArgs
from components.common.layout import SKIP_AWAIT, as_input, dns_label, labels, object_meta
from components.common.target import ClusterTarget
from components.settings.api_keys import DEFAULT_KEY, ApiKey

PROBE_CLIENT = "probe"
"""The integration probe's own API key."""
API_KEY_LENGTH = 48
API_KEY_PREFIX = "sk-tft-"
"""Keys look like OpenAI's (``sk-``), so clients and secret scanners treat them as keys."""


def basic_auth_secret(
    name: str,
    *,
    base: str,
    namespace: Any,
    labels: dict[str, str],
    ingress: IngressArgs,
    opts: pulumi.ResourceOptions,
) -> str | None:
    """The basic-auth Secret an Ingress names: the existing one, or ``<base>-basic-auth`` created here from the
    htpasswd lines (a Pulumi secret); None without basic auth."""
    if ingress.basic_auth_htpasswd is None:
        return ingress.basic_auth_secret
    secret = f"{base}-basic-auth"
    k8s.core.v1.Secret(
        f"{name}-basic-auth",
        metadata=object_meta(secret, namespace, labels),
        type="Opaque",
        string_data={BASIC_AUTH_KEY: pulumi.Output.secret(ingress.basic_auth_htpasswd)},
        opts=opts,
    )
    return secret


# -- Gateway API (components/common/edge.py) ----------------------------------------------------------------------


def custom_resource(
    name: str, kind: str, api_version: str, metadata: Any, spec: Any, *, opts: pulumi.ResourceOptions
) -> k8s.apiextensions.CustomResource:
    """A Gateway API / Envoy Gateway object (created after the charts that install its CRDs: ``opts``)."""
    return k8s.apiextensions.CustomResource(
        name, api_version=api_version, kind=kind, metadata=metadata, spec=spec, opts=opts
    )


def model_route_refs(base: str, edge: EdgeArgs) -> tuple[tuple[str, str], ...]:
    """(kind, name) of a model's routes: its HTTPRoute and, over TLS, its GRPCRoute."""
    return (("HTTPRoute", f"{base}-http"), *((("GRPCRoute", f"{base}-grpc"),) if edge.grpc_exposed else ()))


def model_routes(
    name: str,
    *,
    base: str,
    namespace: Any,
    labels: dict[str, str],
    edge: EdgeArgs,
    model: str,
    backends: Sequence[WeightedBackend],
    opts: pulumi.ResourceOptions,
    annotations: dict[str, str] | None = None,
) -> tuple[str, ...]:
    """A model's HTTPRoute (Triton's inference paths) and, over TLS, its GRPCRoute; returns their names."""
    meta_labels = route_labels(edge, labels)
    specs = {
        "HTTPRoute": model_http_route_spec(edge, model, backends),
        "GRPCRoute": model_grpc_route_spec(edge, backends),
    }
    suffixes = {"HTTPRoute": "httproute", "GRPCRoute": "grpcroute"}
    made = model_route_refs(base, edge)
    for kind, route in made:
        custom_resource(
            f"{name}-{suffixes[kind]}",
            kind,
            GATEWAY_API,
            object_meta(route, namespace, meta_labels, annotations or None),
            specs[kind],
            opts=opts,
        )
    return tuple(route for _, route in made)


def api_route(
    name: str,
    *,
    base: str,
    namespace: Any,
    labels: dict[str, str],
    edge: EdgeArgs,
    service: str,
    port: int,
    path: str,
    opts: pulumi.ResourceOptions,
) -> str:
    """The OpenAI gateway's HTTPRoute; returns its name."""
    custom_resource(
        f"{name}-httproute",
        "HTTPRoute",
        GATEWAY_API,
        object_meta(base, namespace, route_labels(edge, labels)),
        api_http_route_spec(edge, service, port, path),
        opts=opts,
    )
    return base


@dataclass(frozen=True)
class EdgeObjectsArgs:
    """The stack-wide edge objects (one set per stack)."""

    target: ClusterTarget
    gateway: GatewayRef
    """The Gateway every route attaches to (made here when ``make_gateway``)."""
    base_host: str
    models: tuple[str, ...]
    """Each model's host ``<model>.<base_host>`` gets a listener on a Gateway made here."""
    api: bool
    """The OpenAI gateway is served on ``base_host``."""
    tls: bool = True
    make_gateway: bool = True
    """The stack makes its Gateway (a cluster it builds); False = the user's own, named in the settings."""
    cluster_issuer: str | None = None
    """cert-manager ClusterIssuer of the listeners' certificates (a Gateway made here)."""
    load_balancer_annotations: dict[str, str] = field(default_factory=dict)
    """Annotations of the proxies' LoadBalancer Service (a Gateway made here)."""
    api_key_auth: bool = True
    keys: tuple[ApiKey, ...] = (ApiKey(PROBE_CLIENT),)
    """The keys the edge accepts (the probe's ``default`` among them; expired ones already left out)."""
    rotation: int = 0
    """Changing it replaces every key (``apiKeyRotation``)."""
    requests_per_minute: int = 600
    """Per key (and Envoy replica, and route)."""
    max_concurrent_requests: int = 256
    """Per backend and Envoy replica (``maxConcurrentRequests``)."""
    global_rate_limit: bool = False
    """Envoy Gateway runs its rate-limit service (``rateLimitRedis``): one bucket per key for the whole stack."""
    monitoring: bool = False
    """The Prometheus operator runs: the keys' expiry alerts (``api_key_expiry_rule_spec``) are made."""
    monitoring_labels: dict[str, str] = field(default_factory=lambda: {"release": "kube-prometheus-stack"})
    request_timeout_seconds: int = 300
    """Longest request on every route, a gRPC call included (``rate_limit_policy_spec``)."""
    issuer: AcmeIssuer | None = None
    """The ClusterIssuer the stack makes (a cluster it builds), answering challenges with ``issuer_solver``."""
    issuer_solver: dict[str, Any] = field(default_factory=dict)


def key_resource_name(name: str, key: ApiKey) -> str:
    """The key's ``RandomPassword``: a client's ``default`` keeps the name it had before ``apiKeys`` existed (so an
    upgrade replaces no key); another key is ``...-<client>.<key>-random`` (a dot: no two keys share a name)."""
    if key.name == DEFAULT_KEY:
        return f"{name}-apikey-{key.client}-random"
    return f"{name}-apikey-{key.client}.{key.name}-random"


class EdgeObjects(pulumi.ComponentResource):
    """The stack's edge: its API keys (generated, secret, stable across ``up``s, rotated when ``rotation``
    changes), the credentials Secret, the API-key and traffic policies (on the stack's own Gateway, attached to the
    Gateway, with the public routes' exemption), and on a cluster the stack builds, its Gateway, the proxies'
    configuration, the HTTPS redirect and the ClusterIssuer of the certificates."""

    api_keys: pulumi.Output[dict[str, str]]
    """Key id (``<client>`` or ``<client>.<key>``) -> API key (a secret output)."""
    credentials_secret: str

    def __init__(self, name: str, args: EdgeObjectsArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("triton-ft:common:EdgeObjects", name, {}, opts)
        target = args.target
        ns = target.namespace
        meta_labels = labels("edge", name)
        child = pulumi.ResourceOptions(parent=self, provider=target.provider)
        crds = pulumi.ResourceOptions(parent=self, provider=target.provider, depends_on=list(target.crd_installers))
        base = dns_label(name)
        self.credentials_secret = f"{base}-api-keys"
        keys: dict[str, pulumi.Output[str]] = {}
        # The stack's own Gateway is covered whole (closed by default); a cluster's own, by the routes' label.
        own_gateway = args.gateway if args.make_gateway else None
        if args.api_key_auth:
            for api_key in args.keys:
                key = pulumi_random.RandomPassword(
                    key_resource_name(name, api_key),
                    length=API_KEY_LENGTH,
                    special=False,
                    keepers={"rotation": str(args.rotation)},
                    opts=pulumi.ResourceOptions(parent=self),
                )
                keys[api_key.id] = key.result.apply(lambda r: API_KEY_PREFIX + r)
            secret = k8s.core.v1.Secret(
                f"{name}-api-keys",
                metadata=object_meta(self.credentials_secret, ns, meta_labels),
                type="Opaque",
                string_data=self._secret_keys(keys),
                opts=child,
            )
            custom_resource(
                f"{name}-auth",
                "SecurityPolicy",
                ENVOY_GATEWAY_API,
                object_meta(f"{base}-api-keys", ns, meta_labels),
                api_key_policy_spec(self.credentials_secret, own_gateway),
                opts=pulumi.ResourceOptions.merge(crds, pulumi.ResourceOptions(depends_on=[secret])),
            )
            # Envoy Gateway's keys have no expiry: a Lua check after the key's, on every route of the stack's Gateway
            # (only the Envoy Gateway the stack installs runs Lua policies: key_expiry_policy_spec).
            script = key_expiry_lua(args.keys) if own_gateway is not None else None
            if script is not None and own_gateway is not None:
                custom_resource(
                    f"{name}-key-expiry",
                    "EnvoyExtensionPolicy",
                    ENVOY_GATEWAY_API,
                    object_meta(f"{base}-api-keys-expiry", ns, meta_labels),
                    key_expiry_policy_spec(script, own_gateway),
                    opts=crds,
                )
            expiry = api_key_expiry_rule_spec(args.keys, edge_check=script is not None)
            if args.monitoring and expiry is not None:
                custom_resource(
                    f"{name}-api-key-expiry",
                    "PrometheusRule",
                    "monitoring.coreos.com/v1",
                    object_meta(f"{base}-api-key-expiry", ns, {**meta_labels, **args.monitoring_labels}),
                    expiry,
                    opts=crds,
                )
            if own_gateway is not None:
                custom_resource(
                    f"{name}-public",
                    "SecurityPolicy",
                    ENVOY_GATEWAY_API,
                    object_meta(f"{base}-public-routes", ns, meta_labels),
                    public_routes_policy_spec(),
                    opts=crds,
                )
                # The Gateway's 1 MiB buffer would hold any body on the routes no key guards: theirs is 1 KiB.
                custom_resource(
                    f"{name}-public-traffic",
                    "BackendTrafficPolicy",
                    ENVOY_GATEWAY_API,
                    object_meta(f"{base}-public-routes", ns, meta_labels),
                    public_routes_traffic_policy_spec(),
                    opts=crds,
                )
                self._public_route_admission(name, base, ns, meta_labels, child)
            custom_resource(
                f"{name}-rate-limit",
                "BackendTrafficPolicy",
                ENVOY_GATEWAY_API,
                object_meta(f"{base}-rate-limit", ns, meta_labels),
                rate_limit_policy_spec(
                    args.requests_per_minute,
                    args.max_concurrent_requests,
                    own_gateway,
                    args.request_timeout_seconds,
                    shared=args.global_rate_limit,
                ),
                opts=crds,
            )
        if args.issuer is not None:
            custom_resource(
                f"{name}-issuer",
                "ClusterIssuer",
                "cert-manager.io/v1",
                {"name": args.issuer.name, "labels": meta_labels},
                acme_issuer_spec(args.issuer, args.issuer_solver),
                opts=crds,
            )
        if args.make_gateway:
            proxy = f"{base}-proxy"
            custom_resource(
                f"{name}-proxy",
                "EnvoyProxy",
                ENVOY_GATEWAY_API,
                object_meta(proxy, ns, meta_labels),
                pulumi.Output.from_input(ns).apply(
                    lambda namespace: with_proxy_availability(
                        envoy_proxy_spec(args.load_balancer_annotations, args.request_timeout_seconds),
                        args.gateway.name,
                        namespace,
                    )
                ),
                opts=crds,
            )
            custom_resource(
                f"{name}-connections",
                "ClientTrafficPolicy",
                ENVOY_GATEWAY_API,
                object_meta(f"{base}-connections", ns, meta_labels),
                client_traffic_policy_spec(args.gateway),
                opts=crds,
            )
            listeners = gateway_listeners(args.base_host, args.models, api=args.api)
            custom_resource(
                f"{name}-gateway",
                "Gateway",
                GATEWAY_API,
                # The Gateway's address (the load balancer) can take long; the probe checks the endpoints for real.
                object_meta(
                    args.gateway.name, ns, meta_labels, {**gateway_annotations(args.cluster_issuer), SKIP_AWAIT: "true"}
                ),
                gateway_spec(listeners, tls=args.tls, proxy_config=proxy),
                opts=crds,
            )
            if args.tls:
                custom_resource(
                    f"{name}-https-redirect",
                    "HTTPRoute",
                    GATEWAY_API,
                    object_meta(f"{base}-https-redirect", ns, {**meta_labels, **REDIRECT_LABELS}),
                    https_redirect_route_spec(args.gateway),
                    opts=crds,
                )
        self.api_keys = self._secret_keys(keys)
        self.register_outputs({"api_keys": self.api_keys})

    @staticmethod
    def _public_route_admission(
        name: str, base: str, namespace: Any, meta_labels: dict[str, str], opts: pulumi.ResourceOptions
    ) -> None:
        """The cluster holds the exemption to the routes the stack intends (``public_route_admission_policy_spec``):
        a ValidatingAdmissionPolicy (cluster-scoped, named for the stack) bound to the stack's namespace."""
        policy = f"{base}-public-routes"
        made = k8s.admissionregistration.v1.ValidatingAdmissionPolicy(
            f"{name}-public-routes-admission",
            metadata={"name": policy, "labels": meta_labels},
            spec=as_input(public_route_admission_policy_spec()),
            opts=opts,
        )
        binding: Any = pulumi.Output.from_input(namespace).apply(
            lambda ns: public_route_admission_binding_spec(policy, ns)
        )
        k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding(
            f"{name}-public-routes-admission-binding",
            metadata={"name": policy, "labels": meta_labels},
            spec=binding,
            opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[made])),
        )

    @staticmethod
    def _secret_keys(keys: dict[str, pulumi.Output[str]]) -> pulumi.Output[dict[str, str]]:
        resolved: pulumi.Output[dict[str, str]] = pulumi.Output.all(**keys).apply(dict)
        return pulumi.Output.secret(resolved)

    def authorization(self, client: str) -> pulumi.Output[str]:
        """The ``Authorization`` header ``client`` sends with its ``default`` key (a secret)."""
        return pulumi.Output.secret(self.api_keys.apply(lambda keys: f"Bearer {keys[client]}"))
