"""Every manifest the Kubernetes components produce is schema-valid (1.29 and 1.33, strict) and passes checkov.

Two full services (T5 TP=1 with HPA; GPT-J TP=4 with KEDA scale-to-zero) and the OpenAI gateway in front of both,
monitoring on, secure ingress, HF token.
ServiceMonitor, PrometheusRule and ScaledObject have no bundled schema in kubernetes-validate: they are checked
structurally (tests/components/validation.py) and by checkov.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from components.gateway import Gateway, GatewayArgs, GatewayBackend
from components.gateway.spec import gateway_selector
from tests.components.fixtures import GPTJ_6B, T5_SMALL, TOOLS_IMAGE, make_target, secure_ingress, serve
from tests.components.validation import (
    K8S_VERSIONS,
    CheckovFailure,
    CheckovMissingError,
    check_custom_resource,
    run_checkov,
    validate_manifest,
    write_manifests,
)
from tritonft.synth.engine import RecordingMocks, run_program
from tritonft.synth.manifests import manifests_of

CUSTOM_KINDS = {"ServiceMonitor", "PrometheusRule", "ScaledObject"}


def _both_services() -> None:
    target = make_target()
    pods = gateway_selector("gateway")
    t5 = serve(
        "t5", T5_SMALL, target=target, ingress=secure_ingress("t5.example.com"), hf_token="hf_t5", gateway_pods=pods
    )
    gptj = serve(
        "gptj",
        GPTJ_6B,
        target=target,
        ingress=secure_ingress("gptj.example.com"),
        autoscaler="keda",
        min_replicas=0,
        hf_token="hf_gptj",
        gateway_pods=pods,
    )
    backends = (GatewayBackend(T5_SMALL, t5), GatewayBackend(GPTJ_6B, gptj))
    gateway = GatewayArgs(target, TOOLS_IMAGE, backends, ingress=secure_ingress("example.com"), monitoring=True)
    Gateway("gateway", gateway)


@pytest.fixture
def bodies(mocks: RecordingMocks) -> list[dict[str, Any]]:
    run_program(_both_services)
    return [m.body for m in manifests_of(mocks.resources)]


def test_the_stack_produces_every_expected_kind(bodies):
    kinds = {b["kind"] for b in bodies}
    assert kinds >= {
        "PersistentVolumeClaim",
        "ConfigMap",
        "Secret",
        "Job",
        "NetworkPolicy",
        "Deployment",
        "Service",
        "PodDisruptionBudget",
        "Ingress",
        "HorizontalPodAutoscaler",
        *CUSTOM_KINDS,
    }


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_every_builtin_manifest_is_strictly_schema_valid(bodies, version):
    builtin = [b for b in bodies if b["kind"] not in CUSTOM_KINDS]
    problems = [p for b in builtin for p in validate_manifest(b, (version,))]
    assert problems == []
    assert len(builtin) >= 20


def test_custom_resources_are_structurally_valid(bodies):
    custom = [b for b in bodies if b["kind"] in CUSTOM_KINDS]
    assert {b["kind"] for b in custom} == CUSTOM_KINDS
    assert [p for b in custom for p in check_custom_resource(b)] == []


def test_the_structural_check_catches_a_broken_custom_resource():
    broken = {"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject", "metadata": {"name": "x"}, "spec": {}}
    problems = check_custom_resource(broken)
    assert any("metadata.namespace" in p for p in problems)
    assert any("spec.triggers" in p for p in problems)


def test_the_schema_check_catches_an_unknown_field():
    bad = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {}, "bogus": 1}
    assert validate_manifest(bad) != []


def test_no_secret_value_reaches_a_manifest(bodies):
    text = repr(bodies)
    for secret in ("hf_t5", "hf_gptj", "$apr1$abc$def"):
        assert secret not in text


def _checkov(directory: Path) -> tuple[int, list[CheckovFailure]]:
    try:
        return run_checkov(directory)
    except CheckovMissingError as exc:  # a missing scanner is a failure, never a skip
        pytest.fail(str(exc))


def test_checkov_reports_no_failed_check(bodies, tmp_path: Path):
    write_manifests(bodies, tmp_path)
    passed, failures = _checkov(tmp_path)
    assert [str(f) for f in failures] == []
    assert passed > 100


def test_checkov_flags_a_privileged_root_pod(tmp_path: Path):
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "bad", "namespace": "triton"},
        "spec": {"containers": [{"name": "c", "image": "busybox", "securityContext": {"privileged": True}}]},
    }
    write_manifests([pod], tmp_path)
    _, failures = _checkov(tmp_path)
    assert "CKV_K8S_16" in {f.check_id for f in failures}  # "Container should not be privileged"
