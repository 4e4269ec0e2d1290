"""On a cluster the stack builds itself (platform ``aws``) nothing exists before ``up``: an ingress class no installed
controller serves, and TLS that relies on a Secret nothing creates, are refused before any resource
(``components/settings/built_cluster_rules.py``). On an existing cluster (``kubernetes``) both may exist already."""

from __future__ import annotations

from typing import Any

import pytest

from components.settings import load_settings
from tests.components.settings.test_validation import as_cli, aws_stack, kubernetes_stack, problems_of


def settings_of(values: dict[str, Any]) -> Any:
    return load_settings(as_cli(values), project="triton-ft", stack="test")


def without(values: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in values.items() if k not in keys}


# -- an ingress nobody serves ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("addons", [["cert-manager"], ["cert-manager", "kube-prometheus-stack"]])
def test_an_aws_stack_without_the_ingress_controller_is_refused_naming_addons(addons: list[str]) -> None:
    (problem,) = problems_of(aws_stack(addons=addons))

    assert problem.startswith("addons: no ingress controller serves ingressClass 'nginx' on the cluster this stack")
    assert "add `ingress-nginx` to `addons`" in problem


def test_a_stated_ingress_class_with_no_controller_is_refused_naming_the_class() -> None:
    (problem,) = problems_of(aws_stack(addons=["cert-manager"], ingressClass="alb"))

    assert problem.startswith("ingressClass: no ingress controller serves ingressClass 'alb'")


def test_without_any_add_on_the_ingress_is_the_one_problem_tls_included() -> None:
    values = without(aws_stack(addons=[]), "tlsIssuer") | {"ingressTls": False}

    assert [p.split(":", 1)[0] for p in problems_of(values)] == ["addons"]


@pytest.mark.parametrize("ingress_class", ["nginx", "internal-nginx"])
def test_the_installed_controller_serves_whatever_class_the_stack_names(ingress_class: str) -> None:
    settings = settings_of(aws_stack(ingressClass=ingress_class))

    assert settings.cluster.ingress_class == ingress_class and "ingress-nginx" in settings.cluster.addons


def test_an_existing_cluster_needs_no_ingress_add_on_of_this_stack() -> None:
    assert settings_of(kubernetes_stack(ingressClass="traefik")).cluster.ingress_class == "traefik"


# -- TLS that names a Secret nothing creates ------------------------------------------------------------------------


def test_default_tls_without_an_issuer_is_refused_naming_the_default_secret() -> None:
    (problem,) = problems_of(without(aws_stack(), "tlsIssuer"))

    assert problem.startswith("ingressTls: TLS is on by default outside `local`, but without tlsIssuer the ingresses")
    assert "'triton-triton-tls', which nothing creates" in problem and problem.endswith("or ingressTls: false")


def test_tls_turned_on_explicitly_without_an_issuer_says_so() -> None:
    (problem,) = problems_of(without(aws_stack(ingressTls=True, namespace="llm"), "tlsIssuer"))

    assert problem.startswith("ingressTls: ingressTls: true, but without tlsIssuer")
    assert "'llm-triton-tls'" in problem


def test_a_named_tls_secret_is_refused_naming_it() -> None:
    (problem,) = problems_of(without(aws_stack(tlsSecretName="wildcard-cert"), "tlsIssuer"))

    assert problem.startswith("tlsSecretName: 'wildcard-cert' names a Secret nothing creates: the cluster this stack")
    assert "set tlsIssuer" in problem


def test_a_named_secret_next_to_an_issuer_is_one_problem_not_two() -> None:
    assert problems_of(aws_stack(tlsSecretName="wildcard-cert")) == [
        "tlsSecretName: give tlsIssuer (cert-manager signs) or tlsSecretName (an existing Secret), not both"
    ]


def test_tls_through_cert_manager_or_no_tls_is_accepted() -> None:
    issued = settings_of(aws_stack())
    plain = settings_of(without(aws_stack(ingressTls=False), "tlsIssuer"))

    assert issued.serving.ingress.tls and issued.serving.ingress.tls_issuer == "letsencrypt-prod"
    assert not plain.serving.ingress.tls


def test_an_existing_cluster_may_hold_the_tls_secret() -> None:
    values = kubernetes_stack(environment="dev", tlsSecretName="wildcard-cert", ingressAuth="basic")
    settings = settings_of(values | {"basicAuthSecretName": "creds"})

    assert settings.serving.ingress.tls_secret_name == "wildcard-cert"
