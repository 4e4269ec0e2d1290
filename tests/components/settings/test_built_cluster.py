"""On a cluster the stack builds itself (platform ``aws``) nothing exists before ``up``: every object a route, a
listener or a pod refers to (the Gateway and its implementation, an ingress controller, the ClusterIssuer, a Secret)
must be made by the plan, or the stack is refused before any resource, naming the key and the fix
(``components/settings/built_cluster_rules.py``). On an existing cluster (``kubernetes``) they may exist already."""

from __future__ import annotations

from typing import Any

import pytest

from components.settings import load_settings
from tests.components.settings.test_validation import (
    as_cli,
    aws_ingress_stack,
    aws_stack,
    ingress_stack,
    kubernetes_stack,
    problems_of,
)

HTPASSWD = ("ingressHtpasswd",)


def settings_of(values: dict[str, Any], secret_keys: tuple[str, ...] = ()) -> Any:
    return load_settings(as_cli(values), project="triton-ft", stack="test", secret_keys=secret_keys)


def without(values: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in values.items() if k not in keys}


# -- the Gateway API edge (the default on aws) ----------------------------------------------------------------------


def test_an_aws_stack_defaults_to_the_gateway_edge_with_api_keys() -> None:
    ingress = settings_of(aws_stack()).serving.ingress

    assert (ingress.edge, ingress.auth, ingress.gateway_name) == ("gateway", "apiKey", None)


@pytest.mark.parametrize("addons", [["cert-manager"], ["cert-manager", "ingress-nginx"]])
def test_a_gateway_edge_without_envoy_gateway_is_refused_naming_addons(addons: list[str]) -> None:
    (problem,) = problems_of(aws_stack(addons=addons))

    assert problem.startswith("addons: edge: gateway on the cluster this stack builds")
    assert "add `envoy-gateway` to `addons`" in problem


def test_an_issuer_named_but_not_made_is_refused_naming_it() -> None:
    (problem,) = problems_of(aws_stack(acmeEmail=None, tlsIssuer="corp-ca"))

    assert problem.startswith("tlsIssuer: 'corp-ca' names a ClusterIssuer nothing creates")
    assert "set acmeEmail" in problem


def test_the_issuer_the_stack_makes_may_be_named() -> None:
    assert settings_of(aws_stack(tlsIssuer="le")).serving.ingress.tls_issuer == "le"


def test_tls_on_the_stacks_gateway_without_an_acme_email_is_refused() -> None:
    (problem,) = problems_of(aws_stack(acmeEmail=None))

    assert problem.startswith("acmeEmail: TLS on the Gateway this stack builds needs its listeners' certificates")


def test_a_plain_http_gateway_needs_no_issuer() -> None:
    settings = settings_of(aws_stack(acmeEmail=None, ingressTls=False, ingressAuth="apiKey"))

    assert not settings.serving.ingress.tls and settings.serving.ingress.tls_issuer is None


def test_a_basic_auth_secret_cannot_exist_on_a_new_cluster() -> None:
    (problem,) = problems_of(aws_ingress_stack(ingressHtpasswd=None, basicAuthSecretName="creds"))

    assert problem.startswith("basicAuthSecretName: 'creds' names a Secret nothing creates")


# -- the Ingress edge kept (edge: ingress) --------------------------------------------------------------------------


@pytest.mark.parametrize("addons", [["cert-manager"], ["cert-manager", "kube-prometheus-stack"]])
def test_an_ingress_edge_without_the_ingress_controller_is_refused_naming_addons(addons: list[str]) -> None:
    (problem,) = problems_of(aws_ingress_stack(addons=addons), HTPASSWD)

    assert problem.startswith("addons: no ingress controller serves ingressClass 'nginx' on the cluster this stack")
    assert "add `ingress-nginx` to `addons`" in problem


def test_a_stated_ingress_class_with_no_controller_is_refused_naming_the_class() -> None:
    (problem,) = problems_of(aws_ingress_stack(addons=["cert-manager"], ingressClass="alb"), HTPASSWD)

    # refused for either reason it has: no controller serves the class, and an ALB ignores basic auth (issue 51)
    assert problem.startswith("ingressClass: ") and "'alb'" in problem


@pytest.mark.parametrize("ingress_class", ["nginx", "internal-nginx"])
def test_the_installed_controller_serves_whatever_class_the_stack_names(ingress_class: str) -> None:
    settings = settings_of(aws_ingress_stack(ingressClass=ingress_class), HTPASSWD)

    assert settings.cluster.ingress_class == ingress_class and "ingress-nginx" in settings.cluster.addons


def test_an_existing_cluster_needs_no_ingress_add_on_of_this_stack() -> None:
    assert settings_of(kubernetes_stack(ingressClass="traefik")).cluster.ingress_class == "traefik"


def test_default_tls_without_an_issuer_is_refused_naming_the_default_secret() -> None:
    (problem,) = problems_of(aws_ingress_stack(acmeEmail=None), HTPASSWD)

    assert problem.startswith("ingressTls: TLS is on by default outside `local`, but without tlsIssuer the ingresses")
    assert "'triton-triton-tls', which nothing creates" in problem and problem.endswith("or ingressTls: false")


def test_tls_turned_on_explicitly_without_an_issuer_says_so() -> None:
    (problem,) = problems_of(aws_ingress_stack(acmeEmail=None, ingressTls=True, namespace="llm"), HTPASSWD)

    assert problem.startswith("ingressTls: ingressTls: true, but without tlsIssuer")
    assert "'llm-triton-tls'" in problem


def test_a_named_tls_secret_is_refused_naming_it() -> None:
    (problem,) = problems_of(aws_ingress_stack(acmeEmail=None, tlsSecretName="wildcard-cert"), HTPASSWD)

    assert problem.startswith("tlsSecretName: 'wildcard-cert' names a Secret nothing creates: the cluster this stack")
    assert "set acmeEmail" in problem


def test_a_named_secret_next_to_an_issuer_is_one_problem_not_two() -> None:
    assert problems_of(aws_ingress_stack(tlsIssuer="le", tlsSecretName="wildcard-cert"), HTPASSWD) == [
        "tlsSecretName: give tlsIssuer (cert-manager signs) or tlsSecretName (an existing Secret), not both"
    ]


def test_tls_through_the_stacks_issuer_or_no_tls_is_accepted() -> None:
    issued = settings_of(aws_ingress_stack(environment="prod"), HTPASSWD)
    plain = settings_of(aws_ingress_stack(acmeEmail=None, ingressTls=False), HTPASSWD)

    assert issued.serving.ingress.tls and issued.serving.ingress.tls_issuer == "letsencrypt-prod"
    assert not plain.serving.ingress.tls


def test_an_existing_cluster_may_hold_the_tls_secret() -> None:
    settings = settings_of(ingress_stack(tlsSecretName="wildcard-cert"))

    assert settings.serving.ingress.tls_secret_name == "wildcard-cert"


def test_an_existing_cluster_attaches_to_its_own_gateway() -> None:
    values = ingress_stack(edge="gateway", gatewayName="shared", gatewayNamespace="edge", basicAuthSecretName=None)
    ingress = settings_of(values | {"ingressAuth": "apiKey", "existingAddons": ["envoy-gateway"]}).serving.ingress

    assert (ingress.edge, ingress.gateway_name, ingress.gateway_namespace) == ("gateway", "shared", "edge")


# -- DNS ------------------------------------------------------------------------------------------------------------


def test_an_aws_stack_without_a_hosted_zone_is_refused_naming_dns_zone() -> None:
    (problem,) = problems_of(without(aws_stack(), "dnsZone"))

    assert problem.startswith("dnsZone: the hosts of the cluster this stack builds (platform aws)")
    assert "set dnsZone to the Route53 public hosted zone that holds ingressHost" in problem


@pytest.mark.parametrize("zone", ["triton.local", "test.triton.local"])
def test_the_zone_may_be_the_host_itself_or_hold_it(zone: str) -> None:
    assert settings_of(aws_stack(dnsZone=zone)).serving.ingress.dns_zone == zone
