"""The CrossGuard policies called directly, as the analyzer calls them (pulumi-practice.md §6).

Runs in the .tools/policy venv (pulumi-policy conflicts with the project's protobuf); the project's test suite
runs this file through that interpreter (tests/delivery/test_policy_pack.py). Props are wrapped in the SDK's own
unknown-checking proxy, which is what ``Analyze`` hands to ``validate``.
"""

from __future__ import annotations

from typing import Any

import pytest
from pulumi_policy import (
    EnforcementLevel,
    PolicyCustomTimeouts,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
)
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE, UnknownValueError, unknown_checking_proxy
from rules import POLICIES, POLICY_BY_NAME

from policy.tests.builders import (
    SCALE_DOWN_SLOWLY,
    Typed,
    container,
    efs,
    hpa,
    http_route,
    ingress,
    pod_spec,
    pvc,
    secret_env,
    security_policy,
    workload,
)


def validate(
    policy: str, typed: Typed, *, stack: str = "dev", protect: bool = False, config: dict[str, Any] | None = None
) -> list[str]:
    typ, props = typed
    urn = f"urn:pulumi:{stack}::triton-ft::{typ}::r"
    opts = PolicyResourceOptions(protect, [], None, [], PolicyCustomTimeouts(0, 0, 0), [])
    args = ResourceValidationArgs(typ, unknown_checking_proxy(props), urn, "r", opts, None, config)
    reported: list[str] = []
    POLICY_BY_NAME[policy].validate(args, lambda message, urn=None: reported.append(message))
    return reported


CASES: dict[str, tuple[Typed, Typed, dict[str, Any]]] = {
    # policy: (passing resource, failing resource, validate kwargs)
    "images-pinned-by-digest": (
        workload("Deployment", pod_spec(container())),
        workload("Deployment", pod_spec(container(image="nvcr.io/nvidia/tritonserver:latest"))),
        {},
    ),
    "gpu-pods-tolerate-and-limit": (
        workload("Deployment", pod_spec(container(gpus=1))),
        workload("Deployment", pod_spec(container(gpus=1), tolerations=[])),
        {},
    ),
    "prod-model-storage-protected": (pvc(), pvc(), {"stack": "prod"}),
    "ingress-tls-outside-local": (
        ingress(["triton.example.com"], ["triton.example.com"]),
        ingress(["triton.example.com"], None),
        {"stack": "staging"},
    ),
    "no-plain-secret-env": (
        workload("Job", pod_spec(container(env=[secret_env()]))),
        workload("Job", pod_spec(container(env=[{"name": "HF_TOKEN", "value": "hf_abc"}]))),
        {},
    ),
    "requests-and-limits": (
        workload("StatefulSet", pod_spec(container())),
        workload("StatefulSet", pod_spec(container(resources={"limits": {"memory": "1Gi"}}))),
        {},
    ),
    "autoscaler-has-behavior": (hpa("v2", SCALE_DOWN_SLOWLY), hpa("v2", None), {}),
    "edge-routes-authenticated": (
        http_route({"triton-ft.io/edge-auth": "api-key"}),
        http_route({"app.kubernetes.io/name": "triton-ft"}),
        {"stack": "prod"},
    ),
    "edge-exemptions-by-label": (
        security_policy(
            targetSelectors=[
                {
                    "group": "gateway.networking.k8s.io",
                    "kind": "HTTPRoute",
                    "matchLabels": {"triton-ft.io/edge-auth": "public"},
                }
            ]
        ),
        security_policy(targetRefs=[{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": "api"}]),
        {"stack": "prod"},
    ),
}


def test_every_policy_has_a_passing_and_a_failing_case() -> None:
    assert set(CASES) == set(POLICY_BY_NAME)


def test_policies_are_mandatory_resource_validations() -> None:
    assert all(isinstance(p, ResourceValidationPolicy) for p in POLICIES)
    assert {p.enforcement_level for p in POLICIES} == {EnforcementLevel.MANDATORY}


@pytest.mark.parametrize("policy", sorted(CASES))
def test_policy_accepts_the_compliant_resource(policy: str) -> None:
    passing, _, kwargs = CASES[policy]
    protect = policy == "prod-model-storage-protected"
    assert validate(policy, passing, protect=protect, **kwargs) == []


@pytest.mark.parametrize("policy", sorted(CASES))
def test_policy_reports_the_violating_resource(policy: str) -> None:
    _, failing, kwargs = CASES[policy]
    reported = validate(policy, failing, **kwargs)
    assert len(reported) == 1
    assert reported[0]


def test_unprotected_store_passes_when_config_says_the_stack_is_not_prod() -> None:
    assert validate("prod-model-storage-protected", efs(), stack="prod", config={"environment": "staging"}) == []


def test_config_environment_prod_applies_to_any_stack_name() -> None:
    reported = validate("prod-model-storage-protected", efs(), stack="blue", config={"environment": "prod"})
    assert reported == [
        "EFS file system 'r' holds the prod model store but is not protected; set `protectStorage: true` "
        "(resource option protect=True) so `pulumi destroy` cannot delete converted models"
    ]


def test_ingress_without_tls_passes_on_the_local_stack() -> None:
    assert validate("ingress-tls-outside-local", ingress(["triton.local"], None), stack="local") == []


def test_review_stack_ingress_needs_tls() -> None:
    assert len(validate("ingress-tls-outside-local", ingress(["pr-7.example.com"], None), stack="pr-7")) == 1


def test_a_security_policy_that_asks_a_key_may_target_the_gateway_by_name() -> None:
    gateway = [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "edge"}]
    typed = security_policy(targetRefs=gateway, apiKeyAuth={"credentialRefs": [{"name": "keys"}]})
    assert validate("edge-exemptions-by-label", typed, stack="prod") == []


def test_a_credential_less_policy_selecting_routes_by_another_label_is_reported() -> None:
    selector = {"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "matchLabels": {"app": "api"}}
    assert len(validate("edge-exemptions-by-label", security_policy(targetSelectors=[selector]), stack="prod")) == 1


def test_unknown_image_during_preview_raises_the_sdk_unknown_error() -> None:
    """The analyzer turns this exception into "can't be known during preview" instead of a false verdict."""
    typed = workload("Deployment", pod_spec(container(image=UNKNOWN_STRING_VALUE)))
    with pytest.raises(UnknownValueError):
        validate("images-pinned-by-digest", typed)


def test_environment_config_schema_only_on_environment_rules() -> None:
    with_schema = sorted(p.name for p in POLICIES if p.config_schema is not None)
    assert with_schema == [
        "edge-exemptions-by-label",
        "edge-routes-authenticated",
        "ingress-tls-outside-local",
        "prod-model-storage-protected",
    ]
    schema = POLICY_BY_NAME["ingress-tls-outside-local"].config_schema
    assert schema is not None
    assert schema.properties["environment"]["enum"] == ["local", "dev", "staging", "prod", "review"]
