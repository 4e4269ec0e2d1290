"""Ingress (TLS + auth by default, HTTP and gRPC) and the NetworkPolicy around Triton."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pulumi
import pytest

from components.common.ingress import IngressArgs, validate_ingress
from tests.components.fixtures import T5_SMALL, secure_ingress, serve
from tritonft.errors import UserError
from tritonft.synth.engine import RecordingMocks, Registered, run_program

INGRESS = "kubernetes:networking.k8s.io/v1:Ingress"
NGINX = "nginx.ingress.kubernetes.io"


def _ingresses(mocks: RecordingMocks, ingress: IngressArgs) -> dict[str, Registered]:
    run_program(lambda: serve("m", T5_SMALL, ingress=ingress))
    return {r.inputs["metadata"]["name"]: r for r in mocks.of_type(INGRESS)}


def test_secure_is_the_default():
    assert IngressArgs(host="a.example.com").secure is True


def test_a_secure_ingress_without_tls_or_auth_is_refused_naming_both(mocks):
    problems = validate_ingress(IngressArgs(host="a.example.com"))
    assert any("no TLS source" in p for p in problems)
    assert any("no authentication" in p for p in problems)
    with pytest.raises(UserError, match="no TLS source"):
        run_program(lambda: serve("m", T5_SMALL, ingress=IngressArgs(host="a.example.com")))


def test_http_and_grpc_ingresses_share_the_host_and_certificate(mocks):
    ings = _ingresses(mocks, secure_ingress("m.example.com"))
    assert set(ings) == {"m-http", "m-grpc"}
    for ing in ings.values():
        assert ing.inputs["spec"]["ingressClassName"] == "nginx"
        assert ing.inputs["spec"]["tls"] == [{"hosts": ["m.example.com"], "secretName": "m-tls"}]


def test_only_the_grpc_ingress_speaks_grpc_to_the_backend(mocks):
    ings = _ingresses(mocks, secure_ingress("m.example.com"))
    assert ings["m-grpc"].inputs["metadata"]["annotations"][f"{NGINX}/backend-protocol"] == "GRPC"
    assert f"{NGINX}/backend-protocol" not in ings["m-http"].inputs["metadata"]["annotations"]
    (path,) = ings["m-grpc"].inputs["spec"]["rules"][0]["http"]["paths"]
    assert path["path"] == "/inference.GRPCInferenceService"
    assert path["backend"]["service"]["port"] == {"name": "grpc"}


def test_a_streaming_models_http_ingress_passes_its_events_unbuffered(mocks):
    run_program(lambda: serve("m", replace(T5_SMALL, decoupled=True), ingress=secure_ingress("m.example.com")))
    ings = {r.inputs["metadata"]["name"]: r for r in mocks.of_type(INGRESS)}
    assert ings["m-http"].inputs["metadata"]["annotations"][f"{NGINX}/proxy-buffering"] == "off"
    assert f"{NGINX}/proxy-buffering" not in ings["m-grpc"].inputs["metadata"]["annotations"]


def test_an_unstreamed_models_ingress_keeps_the_proxy_buffering(mocks):
    ings = _ingresses(mocks, secure_ingress("m.example.com"))
    assert all(f"{NGINX}/proxy-buffering" not in i.inputs["metadata"]["annotations"] for i in ings.values())


def test_cert_manager_issues_the_certificate_once(mocks):
    ings = _ingresses(mocks, secure_ingress("m.example.com"))
    issuers = [i.inputs["metadata"]["annotations"].get("cert-manager.io/cluster-issuer") for i in ings.values()]
    assert sorted(filter(None, issuers)) == ["letsencrypt"]


def test_basic_auth_protects_both_ingresses_from_a_secret(mocks):
    ings = _ingresses(mocks, secure_ingress("m.example.com"))
    (secret,) = mocks.of_type("kubernetes:core/v1:Secret")
    for ing in ings.values():
        ann = ing.inputs["metadata"]["annotations"]
        assert ann[f"{NGINX}/auth-type"] == "basic"
        assert ann[f"{NGINX}/auth-secret"] == secret.inputs["metadata"]["name"]


def test_oidc_auth_uses_the_auth_proxy_annotations(mocks):
    oidc = IngressArgs(
        host="m.example.com",
        tls_secret="wildcard-tls",
        oidc_auth_url="https://auth.example.com/oauth2/auth",
        oidc_signin_url="https://auth.example.com/oauth2/start?rd=$escaped_request_uri",
    )
    ings = _ingresses(mocks, oidc)
    ann = ings["m-http"].inputs["metadata"]["annotations"]
    assert ann[f"{NGINX}/auth-url"] == "https://auth.example.com/oauth2/auth"
    assert "cert-manager.io/cluster-issuer" not in ann
    assert ings["m-http"].inputs["spec"]["tls"][0]["secretName"] == "wildcard-tls"


def test_an_insecure_local_ingress_has_http_only_and_no_grpc(mocks):
    ings = _ingresses(mocks, IngressArgs(host="m.localtest.me", secure=False))
    assert set(ings) == {"m-http"}
    assert "tls" not in ings["m-http"].inputs["spec"]
    assert f"{NGINX}/auth-type" not in ings["m-http"].inputs["metadata"]["annotations"]


def test_the_public_endpoints_are_exported(mocks):
    seen: list[tuple[str, str]] = []

    def build():
        svc = serve("m", T5_SMALL, ingress=secure_ingress("m.example.com"))
        return pulumi.Output.all(svc.endpoint, svc.grpc_endpoint).apply(lambda v: seen.append((v[0], v[1])))

    run_program(build)
    assert seen == [("https://m.example.com", "m.example.com:443")]


def _netpol(mocks: RecordingMocks, **kwargs: Any) -> dict[str, Any]:
    run_program(lambda: serve("m", T5_SMALL, **kwargs))
    (policy,) = [p for p in mocks.of_type("kubernetes:networking.k8s.io/v1:NetworkPolicy") if p.name == "m-netpol"]
    return dict(policy.inputs["spec"])


def _sources(rule: dict[str, Any]) -> list[str]:
    return [peer["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"] for peer in rule["from"]]


def test_only_the_ingress_controller_reaches_http_and_grpc(mocks):
    spec = _netpol(mocks, ingress=secure_ingress("m.example.com"))
    (serving,) = [r for r in spec["ingress"] if {"port": 8000, "protocol": "TCP"} in r["ports"]]
    assert _sources(serving) == ["ingress-nginx"]
    assert {p["port"] for p in serving["ports"]} == {8000, 8001}


def test_only_prometheus_reaches_the_metrics_port(mocks):
    spec = _netpol(mocks, ingress=secure_ingress("m.example.com"))
    (metrics,) = [r for r in spec["ingress"] if {"port": 8002, "protocol": "TCP"} in r["ports"]]
    assert _sources(metrics) == ["monitoring"]
    assert [p["port"] for p in metrics["ports"]] == [8002]


def test_without_an_ingress_nobody_but_prometheus_gets_in(mocks):
    spec = _netpol(mocks)
    assert all(8000 not in [p["port"] for p in r["ports"]] for r in spec["ingress"])
    assert all(r["from"] for r in spec["ingress"])  # an empty `from` would admit everyone
