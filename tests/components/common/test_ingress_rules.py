"""Ingress settings validation (components.common.ingress): every problem named with its fix, all at once."""

from __future__ import annotations

from components.common.ingress import IngressArgs, endpoint_urls, grpc_exposed, ingress_annotations, validate_ingress


def test_a_complete_secure_configuration_has_no_problems():
    args = IngressArgs(host="a.example.com", cluster_issuer="le", basic_auth_secret="htpasswd")
    assert validate_ingress(args) == []


def test_a_host_that_is_not_a_dns_name_is_refused():
    problems = validate_ingress(IngressArgs(host="localhost", secure=False))
    assert problems == ["ingress.host 'localhost' is not a DNS name: give the endpoint's public host name"]


def test_two_tls_sources_are_refused():
    args = IngressArgs(host="a.example.com", cluster_issuer="le", tls_secret="t", basic_auth_secret="h")
    assert validate_ingress(args) == ["ingress: give cluster_issuer or tls_secret, not both"]


def test_basic_and_oidc_together_are_refused():
    args = IngressArgs(
        host="a.example.com", tls_secret="t", basic_auth_secret="h", oidc_auth_url="u", oidc_signin_url="s"
    )
    assert validate_ingress(args) == ["ingress: choose one authentication: basic auth or OIDC, not both"]


def test_half_an_oidc_configuration_is_refused():
    args = IngressArgs(host="a.example.com", tls_secret="t", oidc_auth_url="u")
    assert validate_ingress(args) == ["ingress: OIDC needs both oidc_auth_url and oidc_signin_url"]


def test_every_problem_is_reported_at_once():
    problems = validate_ingress(IngressArgs(host="bad", request_timeout_seconds=0))
    assert len(problems) == 4


def test_grpc_needs_tls_to_be_exposed():
    assert not grpc_exposed(IngressArgs(host="a.example.com", secure=False))
    assert grpc_exposed(IngressArgs(host="a.example.com", tls_secret="t"))
    assert endpoint_urls(IngressArgs(host="a.example.com", secure=False)) == ("http://a.example.com", None)


def test_long_generations_are_not_cut_by_the_proxy_timeout():
    ann = ingress_annotations(
        IngressArgs(host="a.example.com", request_timeout_seconds=900), None, grpc=False, issue_certificate=False
    )
    assert ann["nginx.ingress.kubernetes.io/proxy-read-timeout"] == "900"
    assert ann["nginx.ingress.kubernetes.io/proxy-send-timeout"] == "900"
