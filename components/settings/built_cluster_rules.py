"""Stack rules for a cluster this stack builds itself (platform ``aws``): it starts empty, so nothing the stack does
not install or create can be relied on.

* **An ingress nobody serves.** The only ingress controller the stack installs is ingress-nginx (the
  ``ingress-nginx`` add-on, ``components/platform/aws``), registered under the stack's ``ingressClass``; every
  Ingress the stack writes carries ingress-nginx's annotations (``components/common/ingress.py``). Without the
  add-on no controller serves any class: every Ingress stays without an address and the probe times out.
* **TLS that names a Secret nothing creates.** With TLS on and no ``tlsIssuer``, the ingresses point at
  ``tlsSecretName`` (default ``<namespace>-triton-tls``), a Secret that cannot exist on a cluster created by the
  same ``up``: ingress-nginx then serves its self-signed "Kubernetes Ingress Controller Fake Certificate". With
  ``tlsIssuer`` cert-manager issues the certificate into the Secret the Ingress names.

On ``kubernetes`` (an existing cluster) the controller and the Secret may well exist already; these rules do not apply.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from components.settings.facts import Problem, StackFacts

INGRESS_NGINX = "ingress-nginx"


@dataclass(frozen=True)
class BuiltClusterRule:
    """A stack rule (see :class:`components.settings.rules.StackRule`) that applies on platform ``aws``."""

    id: str
    keys: tuple[str, ...]
    doc: str
    check: Callable[[StackFacts], Iterable[Problem]]


def _ingress_needs_controller(f: StackFacts) -> Iterable[Problem]:
    if f.platform != "aws" or INGRESS_NGINX in f.get("addons", []):
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
    if f.platform != "aws" or not f.tls or f.get("tlsIssuer"):
        return
    fix = (
        "set tlsIssuer (a cert-manager ClusterIssuer, with `cert-manager` in `addons`: cert-manager issues the "
        "certificate into the Secret the Ingress names) or ingressTls: false"
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


BUILT_CLUSTER_RULES: tuple[BuiltClusterRule, ...] = (
    BuiltClusterRule(
        "built-cluster-ingress-needs-controller",
        ("ingressClass", "addons"),
        "aws: the `ingress-nginx` add-on is in `addons` (the only ingress controller the stack installs, serving "
        "`ingressClass`).",
        _ingress_needs_controller,
    ),
    BuiltClusterRule(
        "built-cluster-tls-secret-is-created",
        ("ingressTls", "environment", "tlsIssuer", "tlsSecretName", "namespace"),
        "aws: TLS on (`ingressTls`, default outside `local`) takes `tlsIssuer`; a `tlsSecretName` (or its default) "
        "would name a Secret nothing creates on a new cluster.",
        _tls_secret_must_be_created,
    ),
)
