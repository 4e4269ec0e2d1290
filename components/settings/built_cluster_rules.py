"""Stack rules for a cluster this stack builds itself (platform ``aws``): it starts empty, so nothing the stack does
not install or create can be relied on. The closure: every object a route, a listener or a pod refers to (the
Gateway and its implementation, the ClusterIssuer, each Secret) is made by the plan; otherwise a refusal naming the
key and the fix.

* **A Gateway nobody serves.** ``edge: gateway`` (the default on aws) needs Envoy Gateway (the ``envoy-gateway``
  add-on), which the stack installs with its GatewayClass.
* **An issuer nobody makes.** ``tlsIssuer`` is the ClusterIssuer the stack makes from ``acmeEmail``; a name alone
  would point every certificate at nothing.
* **A basic-auth Secret nobody makes.** ``basicAuthSecretName`` cannot exist on a new cluster.
* **A token Secret nothing creates.** A model's ``hfTokenSecret`` names a Secret in the stack's namespace, which
  the same ``up`` creates: nothing can make the Secret first, and the download Job, whose volume needs it, would
  wait in ``ContainerCreating`` until its deadline (hours). The token is the stack's ``hfToken`` secret, from which
  the stack makes the Secret the Job mounts.
* **A host nothing resolves.** ``dnsZone`` names the hosted zone that holds ``ingressHost``; external-dns keeps the
  records of every host of the edge there.

* **An ingress nobody serves.** The only ingress controller the stack installs is ingress-nginx (the
  ``ingress-nginx`` add-on, ``components/platform/aws``), registered under the stack's ``ingressClass``; every
  Ingress the stack writes carries ingress-nginx's annotations (``components/common/ingress.py``). Without the
  add-on no controller serves any class: every Ingress stays without an address and the probe times out.
* **TLS that names a Secret nothing creates.** With TLS on and no ``tlsIssuer``, the ingresses point at
  ``tlsSecretName`` (default ``<namespace>-triton-tls``), a Secret that cannot exist on a cluster created by the
  same ``up``: ingress-nginx then serves its self-signed "Kubernetes Ingress Controller Fake Certificate". With
  ``tlsIssuer`` cert-manager issues the certificate into the Secret the Ingress names.

* **A prod API nobody decided about.** prod's Kubernetes API endpoint is stated, not defaulted: with
  ``apiEndpoint: public`` the stack writes ``apiPublicAccessCidrs`` (its runners' and operators' egress ranges, or
  ``0.0.0.0/0`` written out when CI runs on GitHub-hosted runners, whose addresses are not fixed), and
  ``adminPrincipalArns`` names who besides the creator administers the cluster: prod is created by CI's deploy role,
  so without it no operator could reach the cluster during an incident.

On ``kubernetes`` (an existing cluster) the controller and the Secret may well exist already; these rules do not apply.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from components.settings.facts import Problem, StackFacts

INGRESS_NGINX = "ingress-nginx"
ENVOY_GATEWAY = "envoy-gateway"


@dataclass(frozen=True)
class BuiltClusterRule:
    """A stack rule (see :class:`components.settings.rules.StackRule`) that applies on platform ``aws``."""

    id: str
    keys: tuple[str, ...]
    doc: str
    check: Callable[[StackFacts], Iterable[Problem]]


def _gateway_needs_implementation(f: StackFacts) -> Iterable[Problem]:
    if f.platform != "aws" or f.edge != "gateway" or ENVOY_GATEWAY in f.get("addons", []):
        return
    yield (
        "addons",
        "edge: gateway on the cluster this stack builds (platform aws) needs the implementation the stack installs: "
        "add `envoy-gateway` to `addons` (its Gateway, routes and API-key policy are Envoy Gateway's), or set "
        "edge: ingress",
    )


def _issuer_is_made(f: StackFacts) -> Iterable[Problem]:
    issuer = f.get("tlsIssuer")
    if f.platform != "aws" or not f.tls or not issuer or f.get("acmeEmail"):
        return
    yield (
        "tlsIssuer",
        f"{issuer!r} names a ClusterIssuer nothing creates on the cluster this stack builds (platform aws): no "
        "certificate would ever be issued; set acmeEmail (the stack then makes it, on Let's Encrypt's production "
        "directory)",
    )


def _basic_auth_secret_is_made(f: StackFacts) -> Iterable[Problem]:
    name = f.get("basicAuthSecretName")
    if f.platform != "aws" or not name:
        return
    yield (
        "basicAuthSecretName",
        f"{name!r} names a Secret nothing creates on the cluster this stack builds (platform aws), which starts empty: "
        "every request would be refused; remove it and set the secret `ingressHtpasswd` (the stack makes the "
        "Secret), or use edge: gateway with ingressAuth: apiKey (keys the stack generates)",
    )


def _gateway_certificates_are_issued(f: StackFacts) -> Iterable[Problem]:
    if f.platform != "aws" or f.edge != "gateway" or not f.tls or f.issuer:
        return
    yield (
        "acmeEmail",
        "TLS on the Gateway this stack builds needs its listeners' certificates issued: set acmeEmail (the stack makes "
        "the ClusterIssuer and cert-manager issues each host's certificate), or ingressTls: false",
    )


def _token_secret_is_made(f: StackFacts) -> Iterable[Problem]:
    if f.platform != "aws":
        return
    namespace = f.get("namespace", "triton")
    for m in f.models:
        name = m.get("hfTokenSecret")
        if name:
            yield (
                "models",
                f"models[{m.index}].hfTokenSecret: {name!r} names a Secret in namespace {namespace!r}, which this same "
                "`up` creates on the cluster it builds (platform aws): nothing can make the Secret first, and the "
                "model's download Job would wait for it until its deadline; remove hfTokenSecret and set the stack's "
                "token, `pulumi config set --secret hfToken hf_...` (in CI: the HF_TOKEN repository secret, which "
                ".github/scripts/stack-config.sh sets): the stack makes the Secret the Job mounts from it",
            )


def _hosts_have_dns(f: StackFacts) -> Iterable[Problem]:
    if f.platform != "aws":
        return
    zone = f.get("dnsZone")
    host = f.ingress_host
    if not zone:
        yield (
            "dnsZone",
            f"the hosts of the cluster this stack builds (platform aws), {host} and <model>.{host}, would resolve to "
            "nothing, and ACME could not reach them: set dnsZone to the Route53 public hosted zone that holds "
            "ingressHost (external-dns keeps their records)",
        )
    elif host != zone and not host.endswith(f".{zone}"):
        yield (
            "dnsZone",
            f"{zone!r} does not hold ingressHost {host!r}: give the zone {host} is in, or change ingressHost",
        )


def _ingress_needs_controller(f: StackFacts) -> Iterable[Problem]:
    if f.platform != "aws" or f.edge != "ingress" or INGRESS_NGINX in f.get("addons", []):
        return
    ingress_class = f.get("ingressClass", "nginx")
    key = "ingressClass" if "ingressClass" in f.present else "addons"
    yield (
        key,
        f"no ingress controller serves ingressClass {ingress_class!r} on the cluster this stack builds (platform "
        "aws): every Ingress would stay without an address and the probe would time out; add `ingress-nginx` to "
        "`addons` (the controller this stack installs, under ingressClass, and whose annotations its Ingresses "
        "carry)",
    )


def _tls_secret_must_be_created(f: StackFacts) -> Iterable[Problem]:
    if f.platform != "aws" or not f.tls or f.issuer or (f.edge == "gateway" and not f.get("tlsSecretName")):
        return
    fix = (
        "set acmeEmail (the stack makes the ClusterIssuer `tlsIssuer`, with `cert-manager` in `addons`: cert-manager "
        "issues the certificate into the Secret the edge names) or ingressTls: false"
    )
    name = f.get("tlsSecretName")
    if name:
        yield (
            "tlsSecretName",
            f"{name!r} names a Secret nothing creates: the cluster this stack builds (platform aws) starts empty, so "
            f"ingress-nginx would serve its self-signed fake certificate; {fix}",
        )
        return
    default = f"{f.get('namespace', 'triton')}-triton-tls"
    why = "ingressTls: true" if f.values.get("ingressTls") is not None else "TLS is on by default outside `local`"
    yield (
        "ingressTls",
        f"{why}, but without tlsIssuer the ingresses would use the Secret {default!r}, which nothing creates on the "
        f"cluster this stack builds (platform aws): ingress-nginx would serve its self-signed fake certificate; "
        f"{fix}",
    )


def _prod_api_access_is_stated(f: StackFacts) -> Iterable[Problem]:
    if f.platform != "aws" or f.environment != "prod":
        return
    if f.get("apiEndpoint", "public") == "public" and "apiPublicAccessCidrs" not in f.present:
        yield (
            "apiPublicAccessCidrs",
            "prod's public Kubernetes API endpoint would default to the whole internet (0.0.0.0/0): state who reaches "
            "it, your CI runners' and operators' egress CIDRs (GitHub's larger runners can have static ranges), or "
            '`apiEndpoint: private` with runners inside the VPC; `["0.0.0.0/0"]` written out accepts an API '
            "reachable from anywhere and guarded by IAM authentication alone (GitHub-hosted runners have no fixed "
            "addresses)",
        )
    if not f.get("adminPrincipalArns"):
        yield (
            "adminPrincipalArns",
            "prod's cluster would have a single admin, the identity that creates it (CI's deploy role): no operator "
            "could reach it with kubectl during an incident; list the operators' IAM roles (each gets "
            "AmazonEKSClusterAdminPolicy through an access entry), e.g. "
            "`[arn:aws:iam::123456789012:role/triton-ft-operators]`",
        )


BUILT_CLUSTER_RULES: tuple[BuiltClusterRule, ...] = (
    BuiltClusterRule(
        "built-cluster-gateway-needs-implementation",
        ("edge", "platform", "addons"),
        "aws: `edge: gateway` (the default) needs `envoy-gateway` in `addons` (the Gateway API implementation the "
        "stack installs).",
        _gateway_needs_implementation,
    ),
    BuiltClusterRule(
        "built-cluster-issuer-is-made",
        ("tlsIssuer", "acmeEmail", "ingressTls", "environment"),
        "aws: a `tlsIssuer` is the ClusterIssuer the stack makes from `acmeEmail`; nothing else could exist on a new "
        "cluster.",
        _issuer_is_made,
    ),
    BuiltClusterRule(
        "built-cluster-basic-auth-secret-is-made",
        ("basicAuthSecretName",),
        "aws: no `basicAuthSecretName` (an existing Secret cannot exist on a new cluster).",
        _basic_auth_secret_is_made,
    ),
    BuiltClusterRule(
        "built-cluster-gateway-certificates-are-issued",
        ("edge", "platform", "ingressTls", "environment", "tlsIssuer", "acmeEmail", "tlsSecretName"),
        "aws: TLS on the stack's Gateway takes `acmeEmail` (the issuer the stack makes signs every listener).",
        _gateway_certificates_are_issued,
    ),
    BuiltClusterRule(
        "built-cluster-token-secret-is-made",
        ("models", "namespace", "platform"),
        "aws: no model's `hfTokenSecret` (its namespace is created by the same `up`, so the Secret cannot exist "
        "first); the token is the stack's `hfToken`, from which the stack makes the Secret.",
        _token_secret_is_made,
    ),
    BuiltClusterRule(
        "built-cluster-hosts-have-dns",
        ("dnsZone", "ingressHost", "platform"),
        "aws: `dnsZone` is the hosted zone that holds `ingressHost` (external-dns keeps every host's record there).",
        _hosts_have_dns,
    ),
    BuiltClusterRule(
        "built-cluster-ingress-needs-controller",
        ("ingressClass", "addons", "edge", "platform"),
        "aws: the `ingress-nginx` add-on is in `addons` (the only ingress controller the stack installs, serving "
        "`ingressClass`).",
        _ingress_needs_controller,
    ),
    BuiltClusterRule(
        "built-cluster-tls-secret-is-created",
        ("ingressTls", "environment", "tlsIssuer", "tlsSecretName", "namespace", "acmeEmail", "edge", "platform"),
        "aws: TLS on (`ingressTls`, default outside `local`) takes `tlsIssuer`; a `tlsSecretName` (or its default) "
        "would name a Secret nothing creates on a new cluster.",
        _tls_secret_must_be_created,
    ),
    BuiltClusterRule(
        "built-cluster-prod-api-access-is-stated",
        ("environment", "apiEndpoint", "apiPublicAccessCidrs", "adminPrincipalArns", "platform"),
        "aws, prod: a public API endpoint states `apiPublicAccessCidrs` (no silent 0.0.0.0/0), and "
        "`adminPrincipalArns` names the operators (the creator, CI's deploy role, is the only admin otherwise).",
        _prod_api_access_is_stated,
    ),
)
