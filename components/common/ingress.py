"""Ingress for Triton's HTTP and gRPC endpoints through ingress-nginx, with TLS and authentication (pure).

One host, two Ingress objects: ``/v2`` goes to the HTTP port, ``/inference.GRPCInferenceService`` to the gRPC port
with ``backend-protocol: GRPC`` (an annotation applies to a whole Ingress, so gRPC needs its own). ingress-nginx
merges both into one server and balances gRPC per request across the endpoints (a plain Service balances per
connection: server#6177, #4036). TLS comes from a cert-manager issuer or an existing secret; authentication from an
htpasswd basic-auth secret or an external OIDC proxy (oauth2-proxy) through ``auth-url``. Triton has no authN of
its own (Triton deploy guide), and no anchor ships TLS + auth by default (deploy-anchors.md §2.2), so both are
required whenever ``secure`` is on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from components.common.workload import INGRESS_NGINX_PODS

NGINX = "nginx.ingress.kubernetes.io"
GRPC_SERVICE_PATH = "/inference.GRPCInferenceService"
HTTP_PATH = "/v2"
BASIC_AUTH_KEY = "auth"
"""Key of the htpasswd content in a basic-auth secret (ingress-nginx's ``auth-file`` default)."""


@dataclass(frozen=True)
class IngressArgs:
    """How the endpoint is exposed. The lead maps stack config onto this; ``secure=False`` only for ``local``."""

    host: str
    """Public DNS name of the endpoint (HTTP under ``/v2``, gRPC on the same host over TLS)."""
    secure: bool = True
    """Require TLS and authentication (default). Off only for a local cluster."""
    cluster_issuer: str | None = None
    """cert-manager ClusterIssuer that issues the certificate (into secret ``<service>-tls``)."""
    tls_secret: str | None = None
    """Existing TLS secret instead of an issuer."""
    basic_auth_htpasswd: Any = None
    """htpasswd lines (a Pulumi secret) for HTTP basic auth; stored in a Secret created by the service."""
    basic_auth_secret: str | None = None
    """Existing secret with an htpasswd file under key ``auth``."""
    oidc_auth_url: str | None = None
    """OIDC via an external auth proxy (oauth2-proxy): its ``/oauth2/auth`` URL."""
    oidc_signin_url: str | None = None
    """The proxy's sign-in URL (``/oauth2/start?rd=$escaped_request_uri``)."""
    grpc: bool = True
    """Also expose gRPC (8001) through the ingress. Needs TLS: ingress-nginx speaks HTTP/2 to clients only over
    TLS (ALPN), so without a TLS source gRPC stays in-cluster (or ``kubectl port-forward``)."""
    controller_namespace: str = "ingress-nginx"
    """Namespace of the ingress controller pods."""
    controller_pods: dict[str, str] = field(default_factory=lambda: dict(INGRESS_NGINX_PODS))
    """Labels of the controller pods: the only pods of ``controller_namespace`` the NetworkPolicy lets reach
    8000/8001 of an exposed model."""
    request_timeout_seconds: int = 300
    """Proxy read/send timeout: long generations must not be cut at nginx's 60 s default."""
    max_body_size: str = "16m"
    """Largest request body (batched inputs)."""


@dataclass(frozen=True)
class ResolvedAuth:
    """The authentication annotations' inputs after validation."""

    kind: str
    """``basic``, ``oidc`` or ``none``."""
    basic_secret: str | None = None


def validate_ingress(args: IngressArgs) -> list[str]:
    """Every problem with ``args``, each naming the field and the fix (empty when valid)."""
    problems: list[str] = []
    if not args.host or "." not in args.host:
        problems.append(f"ingress.host {args.host!r} is not a DNS name: give the endpoint's public host name")
    if args.cluster_issuer and args.tls_secret:
        problems.append("ingress: give cluster_issuer or tls_secret, not both")
    basic = args.basic_auth_htpasswd is not None or bool(args.basic_auth_secret)
    oidc = bool(args.oidc_auth_url or args.oidc_signin_url)
    if args.basic_auth_htpasswd is not None and args.basic_auth_secret:
        problems.append("ingress: give basic_auth_htpasswd or basic_auth_secret, not both")
    if basic and oidc:
        problems.append("ingress: choose one authentication: basic auth or OIDC, not both")
    if oidc and not (args.oidc_auth_url and args.oidc_signin_url):
        problems.append("ingress: OIDC needs both oidc_auth_url and oidc_signin_url")
    if args.secure:
        if not (args.cluster_issuer or args.tls_secret):
            problems.append(
                "ingress.secure is on but no TLS source: set cluster_issuer (cert-manager) or tls_secret, "
                "or set secure=False (local clusters only)"
            )
        if not (basic or oidc):
            problems.append(
                "ingress.secure is on but no authentication: set basic_auth_htpasswd / basic_auth_secret or "
                "oidc_auth_url + oidc_signin_url, or set secure=False (local clusters only)"
            )
    if args.request_timeout_seconds < 1:
        problems.append("ingress.request_timeout_seconds must be at least 1")
    return problems


def has_tls(args: IngressArgs) -> bool:
    """Whether the endpoint is served over TLS (an issuer or an existing secret is configured)."""
    return bool(args.cluster_issuer or args.tls_secret)


def tls_secret_name(args: IngressArgs, service_name: str) -> str | None:
    """The secret that holds the certificate: the given one, ``<service>-tls`` from cert-manager, or None."""
    if args.tls_secret:
        return args.tls_secret
    if args.cluster_issuer:
        return f"{service_name}-tls"
    return None


def ingress_annotations(
    args: IngressArgs, basic_secret: str | None, *, grpc: bool, issue_certificate: bool, streams: bool = False
) -> dict[str, str]:
    """ingress-nginx annotations: timeouts, body size, TLS redirect, auth, and the gRPC backend protocol.

    Only one of the two Ingresses asks cert-manager for the certificate (``issue_certificate``); both use it.
    ``streams``: the HTTP Ingress of a streaming (decoupled) model, whose HTTP clients read Triton's
    ``generate_stream`` server-sent events: proxy buffering is off so each event goes out as Triton sends it (else
    the first token waits for a full proxy buffer, and the probe's time to first token measures the proxy).
    """
    ann = {
        f"{NGINX}/proxy-read-timeout": str(args.request_timeout_seconds),
        f"{NGINX}/proxy-send-timeout": str(args.request_timeout_seconds),
        f"{NGINX}/proxy-body-size": args.max_body_size,
        # Ingress status (a load-balancer address) can take long or never come; the integration probe checks
        # the endpoint for real instead.
        "pulumi.com/skipAwait": "true",
    }
    if grpc:
        ann[f"{NGINX}/backend-protocol"] = "GRPC"
    elif streams:
        ann[f"{NGINX}/proxy-buffering"] = "off"
    if has_tls(args):
        ann[f"{NGINX}/ssl-redirect"] = "true"
        ann[f"{NGINX}/force-ssl-redirect"] = "true"
    if issue_certificate and args.cluster_issuer:
        ann["cert-manager.io/cluster-issuer"] = args.cluster_issuer
    if basic_secret:
        ann[f"{NGINX}/auth-type"] = "basic"
        ann[f"{NGINX}/auth-secret"] = basic_secret
        ann[f"{NGINX}/auth-secret-type"] = "auth-file"
        ann[f"{NGINX}/auth-realm"] = "triton-ft"
    elif args.oidc_auth_url and args.oidc_signin_url:
        ann[f"{NGINX}/auth-url"] = args.oidc_auth_url
        ann[f"{NGINX}/auth-signin"] = args.oidc_signin_url
        ann[f"{NGINX}/auth-response-headers"] = "Authorization, X-Auth-Request-User, X-Auth-Request-Email"
    return ann


def ingress_spec(
    args: IngressArgs,
    ingress_class: str,
    service_name: str,
    *,
    grpc: bool,
    tls_secret: str | None,
    path: str | None = None,
) -> dict[str, Any]:
    """One host, one path prefix (``/v2``, the gRPC service, or ``path``), one Service port (``http``/``grpc``)."""
    default_path, port = (GRPC_SERVICE_PATH, "grpc") if grpc else (HTTP_PATH, "http")
    path = path or default_path
    spec: dict[str, Any] = {
        "ingressClassName": ingress_class,
        "rules": [
            {
                "host": args.host,
                "http": {
                    "paths": [
                        {
                            "path": path,
                            "pathType": "Prefix",
                            "backend": {"service": {"name": service_name, "port": {"name": port}}},
                        }
                    ]
                },
            }
        ],
    }
    if tls_secret:
        spec["tls"] = [{"hosts": [args.host], "secretName": tls_secret}]
    return spec


def grpc_exposed(args: IngressArgs) -> bool:
    """gRPC goes through the ingress only when asked for and TLS is configured (see :attr:`IngressArgs.grpc`)."""
    return args.grpc and has_tls(args)


def endpoint_urls(args: IngressArgs) -> tuple[str, str | None]:
    """(HTTP base URL, gRPC target ``host:443`` or None) as clients outside the cluster see them."""
    secure = has_tls(args)
    http = f"{'https' if secure else 'http'}://{args.host}"
    return http, (f"{args.host}:443" if grpc_exposed(args) else None)
