"""The guardrails over `tritonft synth` output of every stack, and proof that this check fails on a broken plan."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.common.edge import AUTH_API_KEY, AUTH_LABEL, AUTH_PUBLIC, api_key_policy_spec
from policy.checks import EDGE_AUTH_API_KEY, EDGE_AUTH_LABEL, EDGE_AUTH_PUBLIC
from policy.synth_check import check_synth_output, main
from policy.tests.builders import (
    SCALE_DOWN_SLOWLY,
    container,
    hpa,
    ingress,
    manifest,
    pod_spec,
    pvc,
    workload,
)
from tests.delivery.conftest import REPO
from tests.plans import StackPlans

STACKS = sorted(p.name.split(".")[1] for p in (REPO / "stacks").glob("Pulumi.*.yaml"))
HOST = "triton.example.com"


@pytest.fixture(scope="module")
def local_plan(stack_plan: StackPlans) -> Path:
    return stack_plan("local").out


@pytest.fixture(scope="module")
def dev_plan(stack_plan: StackPlans) -> Path:
    """A plan with TLS ingresses (the rules for every environment outside `local` apply)."""
    return stack_plan("dev").out


@pytest.fixture(scope="module")
def prod_plan(stack_plan: StackPlans) -> Path:
    """The prod plan: its own model store is protected."""
    return stack_plan("prod").out


def copy_plan(plan: Path, tmp_path: Path) -> Path:
    target = tmp_path / "plan"
    subprocess.run(["cp", "-r", str(plan), str(target)], check=True)
    return target


def write_manifest(plan: Path, body: dict[str, Any]) -> Path:
    metadata = body["metadata"]
    path: Path = plan / "manifests" / metadata["namespace"] / f"{body['kind'].lower()}-{metadata['name']}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(body, sort_keys=False))
    return path


def mutate_manifest(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    body = yaml.safe_load(path.read_text())
    change(body)
    path.write_text(yaml.safe_dump(body, sort_keys=False))


def set_environment(plan: Path, environment: str) -> None:
    outputs = json.loads((plan / "outputs.json").read_text())
    outputs["environment"] = environment
    (plan / "outputs.json").write_text(json.dumps(outputs))


def serving_objects() -> list[dict[str, Any]]:
    """A compliant GPU Deployment, a conversion Job, an HPA and a TLS ingress, as synth would write them."""
    deployment = manifest(*workload("Deployment", pod_spec(container(gpus=1)), name="triton-server"))
    job = manifest(*workload("Job", pod_spec(container("convert")), name="convert-t5-small"))
    return [deployment, job, manifest(*hpa("v2", SCALE_DOWN_SLOWLY)), manifest(*ingress([HOST], [HOST]))]


@pytest.mark.parametrize("stack", STACKS)
def test_every_stack_synth_output_passes_every_guardrail(stack: str, stack_plan: StackPlans) -> None:
    findings = check_synth_output(stack_plan(stack).out)
    assert findings == [], "\n".join(str(f) for f in findings)


@pytest.fixture
def serving_plan(dev_plan: Path, tmp_path: Path) -> Path:
    """The dev synth output plus compliant serving objects (TLS required): clean before each break."""
    plan = copy_plan(dev_plan, tmp_path)
    set_environment(plan, "dev")
    for body in serving_objects():
        write_manifest(plan, body)
    assert check_synth_output(plan) == []
    return plan


def _latest(body: dict[str, Any]) -> None:
    body["spec"]["template"]["spec"]["containers"][0]["image"] = "nvcr.io/nvidia/tritonserver:latest"


def _no_toleration(body: dict[str, Any]) -> None:
    del body["spec"]["template"]["spec"]["tolerations"]


def _plain_token(body: dict[str, Any]) -> None:
    body["spec"]["template"]["spec"]["containers"][0]["env"] = [{"name": "HF_TOKEN", "value": "hf_plaintext"}]


def _no_limits(body: dict[str, Any]) -> None:
    del body["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]


def _no_behavior(body: dict[str, Any]) -> None:
    del body["spec"]["behavior"]


def _no_tls(body: dict[str, Any]) -> None:
    del body["spec"]["tls"]


BREAKS: dict[str, tuple[str, Callable[[dict[str, Any]], None]]] = {
    # rule: (manifest broken, how)
    "images-pinned-by-digest": ("triton/deployment-triton-server.yaml", _latest),
    "gpu-pods-tolerate-and-limit": ("triton/deployment-triton-server.yaml", _no_toleration),
    "no-plain-secret-env": ("triton/job-convert-t5-small.yaml", _plain_token),
    "requests-and-limits": ("triton/job-convert-t5-small.yaml", _no_limits),
    "autoscaler-has-behavior": ("triton/horizontalpodautoscaler-triton.yaml", _no_behavior),
    "ingress-tls-outside-local": ("triton/ingress-triton.yaml", _no_tls),
}


def test_a_route_without_the_api_key_label_in_a_prod_plan_fails_the_check(prod_plan: Path, tmp_path: Path) -> None:
    """Closed by default (issue 51): the API-key policy attaches by label, so a route made without the label would be
    open; the guardrail refuses it, and a redirect route (no backend) stays allowed."""
    plan = copy_plan(prod_plan, tmp_path)
    routes = sorted((plan / "manifests").rglob("httproute-*.yaml"))
    with_backend = [r for r in routes if "backendRefs" in r.read_text()]
    assert with_backend and len(with_backend) < len(routes), "prod has API routes and the HTTPS redirect"
    route = with_backend[0]
    mutate_manifest(route, lambda body: body["metadata"]["labels"].pop("triton-ft.io/edge-auth"))
    findings = check_synth_output(plan)
    assert [(f.rule, f.source) for f in findings] == [("edge-routes-authenticated", str(route.relative_to(plan)))]


def test_an_exemption_policy_retargeted_at_the_gateway_in_a_prod_plan_fails_the_check(
    prod_plan: Path, tmp_path: Path
) -> None:
    """The one credential-less SecurityPolicy of the plan exempts the routes labelled public; pointed at the Gateway
    (or a route by name) it would open every route it covers, and the guardrail refuses it."""
    plan = copy_plan(prod_plan, tmp_path)
    policies = [
        p
        for p in sorted((plan / "manifests").rglob("securitypolicy-*.yaml"))
        if "apiKeyAuth" not in yaml.safe_load(p.read_text())["spec"]
    ]
    assert len(policies) == 1, "prod exempts its public routes with one policy"
    (exemption,) = policies

    def at_the_gateway(body: dict[str, Any]) -> None:
        del body["spec"]["targetSelectors"]
        body["spec"]["targetRefs"] = [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "prod-edge"}]

    mutate_manifest(exemption, at_the_gateway)
    findings = check_synth_output(plan)
    assert [(f.rule, f.source) for f in findings] == [("edge-exemptions-by-label", str(exemption.relative_to(plan)))]


@pytest.mark.parametrize("rule", sorted(BREAKS))
def test_breaking_a_synthesized_manifest_fails_the_check_with_that_rule(serving_plan: Path, rule: str) -> None:
    relative, breaks = BREAKS[rule]
    mutate_manifest(serving_plan / "manifests" / relative, breaks)
    findings = check_synth_output(serving_plan)
    assert [(f.rule, f.source) for f in findings] == [(rule, f"manifests/{relative}")]


def test_latest_image_in_a_synthesized_manifest_is_reported_with_object_and_file(serving_plan: Path) -> None:
    mutate_manifest(serving_plan / "manifests/triton/deployment-triton-server.yaml", _latest)
    [finding] = check_synth_output(serving_plan)
    assert str(finding) == (
        "[images-pinned-by-digest] Deployment triton/triton-server (manifests/triton/deployment-triton-server.yaml): "
        "container 'triton': image 'nvcr.io/nvidia/tritonserver:latest' uses the moving tag ':latest'; "
        "pin it by digest (repo@sha256:<64 hex digits>)"
    )


def _add_resource(plan: Path, typ: str, props: dict[str, Any], protect: bool) -> None:
    records = json.loads((plan / "resources.json").read_text())
    stack = records[0]["urn"].split("::")[0].removeprefix("urn:pulumi:")
    records.append(
        {
            "type": typ,
            "name": "model-store",
            "urn": f"urn:pulumi:{stack}::triton-ft::{typ}::model-store",
            "options": {"protect": True} if protect else {},
            "inputs": props,
        }
    )
    (plan / "resources.json").write_text(json.dumps(records))


def test_unprotected_model_store_in_a_prod_plan_fails_the_check(prod_plan: Path, tmp_path: Path) -> None:
    plan = copy_plan(prod_plan, tmp_path)
    set_environment(plan, "prod")
    _add_resource(plan, *pvc(), protect=False)
    assert [(f.rule, f.source) for f in check_synth_output(plan)] == [
        ("prod-model-storage-protected", "resources.json")
    ]


def test_protected_model_store_in_a_prod_plan_passes(prod_plan: Path, tmp_path: Path) -> None:
    plan = copy_plan(prod_plan, tmp_path)
    set_environment(plan, "prod")
    _add_resource(plan, *pvc(), protect=True)
    assert check_synth_output(plan) == []


def test_a_violation_in_both_resources_and_manifest_is_reported_once(local_plan: Path, tmp_path: Path) -> None:
    plan = copy_plan(local_plan, tmp_path)
    typ, props = workload("Job", pod_spec(container(image="busybox")), name="convert", namespace="triton-local")
    records = json.loads((plan / "resources.json").read_text())
    records.append({"type": typ, "name": "convert", "urn": "urn:pulumi:local::triton-ft::x::convert", "inputs": props})
    (plan / "resources.json").write_text(json.dumps(records))
    write_manifest(plan, manifest(typ, props))
    findings = check_synth_output(plan)
    assert [(f.rule, f.subject) for f in findings] == [("images-pinned-by-digest", "Job triton-local/convert")]


def test_command_line_exit_status_follows_the_findings(serving_plan: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(serving_plan)]) == 0
    mutate_manifest(serving_plan / "manifests/triton/ingress-triton.yaml", _no_tls)
    assert main([str(serving_plan)]) == 1
    out = capsys.readouterr()
    assert "[ingress-tls-outside-local] Ingress triton/triton" in out.out
    assert "1 violation(s) of 9 rules" in out.err


def test_command_line_reports_a_missing_plan_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path / "nothing")]) == 2
    assert "resources.json not found; run `tritonft synth --stack <name>" in capsys.readouterr().err


def test_module_runs_as_a_script_from_the_repository_root(serving_plan: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "policy.synth_check", str(serving_plan)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip().endswith("0 violation(s) of 9 rules")


def test_the_guardrail_reads_the_labels_the_edge_policies_select() -> None:
    assert (EDGE_AUTH_LABEL, EDGE_AUTH_API_KEY, EDGE_AUTH_PUBLIC) == (AUTH_LABEL, AUTH_API_KEY, AUTH_PUBLIC)
    selectors = api_key_policy_spec("keys", None)["targetSelectors"]  # on a cluster's own Gateway
    assert all(s["matchLabels"] == {EDGE_AUTH_LABEL: EDGE_AUTH_API_KEY} for s in selectors)
