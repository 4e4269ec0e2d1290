"""The four stacks' plans, read as a new user reads them: on the clusters the stack builds no Ingress is left; every
Gateway, GatewayClass, EnvoyProxy, ClusterIssuer and Secret a route, listener, policy or pod refers to is in the
plan (or written by cert-manager from an issuer in the plan); every host has its DNS path; no generated credential
appears in any output or file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.settings.stack_file import settings_from_stack_file
from tests.plans import StackPlans, deploy_secrets

REPO = Path(__file__).resolve().parents[3]
BUILT = ("dev", "staging", "prod")
"""The stacks that build their cluster (platform aws)."""


@pytest.fixture(scope="module")
def plans(stack_plan: StackPlans) -> dict[str, Path]:
    return {stack: stack_plan(stack).out for stack in (*BUILT, "local")}


def manifests(plan: Path) -> list[dict[str, Any]]:
    return [d for p in sorted((plan / "manifests").rglob("*.yaml")) for d in yaml.safe_load_all(p.read_text()) if d]


def named(objs: list[dict[str, Any]], kind: str) -> set[str]:
    return {o["metadata"]["name"] for o in objs if o["kind"] == kind}


@pytest.mark.parametrize("stack", BUILT)
def test_no_ingress_is_left_on_a_cluster_the_stack_builds(plans: dict[str, Path], stack: str) -> None:
    objs = manifests(plans[stack])
    assert named(objs, "Ingress") == set()
    charts = [r for r in json.loads((plans[stack] / "resources.json").read_text()) if r["type"].endswith(":Chart")]
    assert not any(r["inputs"]["chart"] == "ingress-nginx" for r in charts)
    assert named(objs, "HTTPRoute") and named(objs, "Gateway")


def test_the_local_stack_keeps_its_ingress_on_the_existing_cluster(plans: dict[str, Path]) -> None:
    objs = manifests(plans["local"])
    assert named(objs, "Ingress") and not named(objs, "Gateway")


@pytest.mark.parametrize("stack", BUILT)
def test_every_object_a_route_listener_or_policy_refers_to_is_in_the_plan(plans: dict[str, Path], stack: str) -> None:
    objs = manifests(plans[stack])
    gateways = named(objs, "Gateway")
    for route in (o for o in objs if o["kind"] in ("HTTPRoute", "GRPCRoute")):
        assert {p["name"] for p in route["spec"]["parentRefs"]} <= gateways, route["metadata"]["name"]
    (gateway,) = (o for o in objs if o["kind"] == "Gateway")
    assert gateway["spec"]["gatewayClassName"] in named(objs, "GatewayClass")
    assert gateway["spec"]["infrastructure"]["parametersRef"]["name"] in named(objs, "EnvoyProxy")
    issuer = gateway["metadata"]["annotations"]["cert-manager.io/cluster-issuer"]
    assert issuer in named(objs, "ClusterIssuer"), "the listeners' certificates come from an issuer the plan makes"
    listeners = [lst for lst in gateway["spec"]["listeners"] if lst["protocol"] == "HTTPS"]
    assert all(lst["tls"]["certificateRefs"] for lst in listeners), "cert-manager writes them from that issuer"
    secrets = named(objs, "Secret")
    for policy in (o for o in objs if o["kind"] == "SecurityPolicy" and "apiKeyAuth" in o["spec"]):
        assert {r["name"] for r in policy["spec"]["apiKeyAuth"]["credentialRefs"]} <= secrets
    for policy in (o for o in objs if o["kind"] in ("SecurityPolicy", "BackendTrafficPolicy", "ClientTrafficPolicy")):
        assert {t["name"] for t in policy["spec"].get("targetRefs", [])} <= gateways
    # The one kind of Secret a stack names instead of making: a model's `hfTokenSecret` (its token, created by hand).
    secrets |= set(settings_from_stack_file(REPO, stack, deploy_secrets(stack)).token_secrets.values())
    for pod_spec in (o["spec"]["template"]["spec"] for o in objs if o["kind"] in ("Deployment", "Job")):
        for container in pod_spec.get("containers", []) + pod_spec.get("initContainers", []):
            for env in container.get("env", []):
                ref = env.get("valueFrom", {}).get("secretKeyRef")
                assert ref is None or ref["name"] in secrets, ref
        for volume in pod_spec.get("volumes", []):
            assert "secret" not in volume or volume["secret"]["secretName"] in secrets


@pytest.mark.parametrize("stack", BUILT)
def test_every_host_has_its_dns_path(plans: dict[str, Path], stack: str) -> None:
    objs = manifests(plans[stack])
    settings = settings_from_stack_file(REPO, stack, deploy_secrets(stack))
    zone = settings.serving.ingress.dns_zone
    assert zone
    hosts = {h for o in objs if o["kind"] in ("HTTPRoute", "GRPCRoute") for h in o["spec"].get("hostnames", [])}
    outputs = json.loads((plans[stack] / "outputs.json").read_text())["edgeHosts"]
    assert hosts == set(outputs)
    assert all(h.endswith(f".{zone}") for h in hosts)
    assert all(path.startswith(f"Route53 zone {zone}: record kept by external-dns") for path in outputs.values())
    resources = json.loads((plans[stack] / "resources.json").read_text())
    assert any(r["type"].endswith(":Chart") and r["inputs"]["chart"] == "external-dns" for r in resources)


@pytest.mark.parametrize("stack", BUILT)
def test_no_generated_credential_reaches_an_output_or_a_file(plans: dict[str, Path], stack: str) -> None:
    outputs = json.loads((plans[stack] / "outputs.json").read_text())
    assert outputs["apiKeys"] == "[secret]"
    keys = [r for r in json.loads((plans[stack] / "resources.json").read_text()) if r["type"].startswith("random:")]
    assert keys, "the stack generates its keys"
    for path in plans[stack].rglob("*"):
        if path.is_file():
            assert "mockkey" not in path.read_text(errors="replace"), f"a generated key in {path}"
