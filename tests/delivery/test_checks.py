"""Each guardrail of ``policy/checks.py``, called directly with passing and failing resources."""

from __future__ import annotations

from typing import Any

import pytest

from policy.checks import (
    RULES,
    Resource,
    environment_of_stack,
    image_problem,
    looks_secret,
    resolve_environment,
    rule_named,
    stack_of_urn,
)
from policy.tests.builders import (
    DIGEST,
    GPU,
    GPU_TOLERATION,
    PINNED_IMAGE,
    SCALE_DOWN_SLOWLY,
    WORKLOAD_KINDS,
    Typed,
    container,
    efs,
    hpa,
    ingress,
    pod_spec,
    pvc,
    secret_env,
    workload,
)


def run(rule: str, typed: Typed, **kwargs: Any) -> list[str]:
    typ, props = typed
    return rule_named(rule).check(Resource(type=typ, name="r", props=props, **kwargs))


def test_rule_names_are_unique_and_pulumi_compatible() -> None:
    names = [r.name for r in RULES]
    assert len(set(names)) == len(names) == 9
    assert all(n.replace("-", "").isalnum() and n.islower() for n in names)


# images-pinned-by-digest


@pytest.mark.parametrize("kind", sorted(WORKLOAD_KINDS))
def test_digest_pinned_images_pass_in_every_workload_kind(kind: str) -> None:
    assert run("images-pinned-by-digest", workload(kind, pod_spec(container()))) == []


@pytest.mark.parametrize("kind", sorted(WORKLOAD_KINDS))
def test_latest_image_is_reported_in_every_workload_kind(kind: str) -> None:
    found = run("images-pinned-by-digest", workload(kind, pod_spec(container(image="nvcr.io/x/triton:latest"))))
    assert found == [
        "container 'triton': image 'nvcr.io/x/triton:latest' uses the moving tag ':latest'; "
        "pin it by digest (repo@sha256:<64 hex digits>)"
    ]


def test_init_container_with_tag_only_image_is_reported() -> None:
    spec = pod_spec(container(), init=[container("fetch", image="ghcr.io/acme/tools:1.2.3")])
    found = run("images-pinned-by-digest", workload("Job", spec))
    assert len(found) == 1
    assert found[0].startswith("initContainer 'fetch': image 'ghcr.io/acme/tools:1.2.3' is pinned by tag only")


@pytest.mark.parametrize(
    ("image", "problem"),
    [
        (PINNED_IMAGE, None),
        (f"localhost:5000/triton-ft/server@sha256:{DIGEST}", None),
        ("localhost:5000/triton-ft/server", "has neither tag nor digest (it means ':latest', which moves)"),
        ("localhost:5000/triton-ft/server:latest", "uses the moving tag ':latest'"),
        ("localhost:5000/triton-ft/server:23.04", "is pinned by tag only (':23.04' can be re-pushed)"),
        ("repo@sha256:abc", "has a malformed digest (expected @sha256: and 64 lower-case hex digits)"),
        ("", "has no image"),
    ],
)
def test_image_reference_classification(image: str, problem: str | None) -> None:
    assert image_problem(image) == problem


def test_images_rule_ignores_resources_without_pods() -> None:
    assert run("images-pinned-by-digest", ingress(["a.example.com"], None)) == []


# gpu-pods-tolerate-and-limit


def test_gpu_pod_with_toleration_and_limit_passes() -> None:
    assert run("gpu-pods-tolerate-and-limit", workload("Deployment", pod_spec(container(gpus=1)))) == []


def test_gpu_pod_without_toleration_is_reported() -> None:
    found = run("gpu-pods-tolerate-and-limit", workload("Deployment", pod_spec(container(gpus=4), tolerations=[])))
    assert len(found) == 1
    assert "no toleration for the GPU nodes' taint" in found[0]


def test_toleration_for_another_taint_does_not_count() -> None:
    other = [{"key": "dedicated", "operator": "Equal", "value": "infra", "effect": "NoSchedule"}]
    found = run("gpu-pods-tolerate-and-limit", workload("Job", pod_spec(container(gpus=1), tolerations=other)))
    assert len(found) == 1


def test_catch_all_exists_toleration_counts_as_gpu_toleration() -> None:
    spec = pod_spec(container(gpus=1), tolerations=[{"operator": "Exists"}])
    assert run("gpu-pods-tolerate-and-limit", workload("Pod", spec)) == []


def test_gpu_request_without_limit_is_reported() -> None:
    resources = {
        "requests": {"cpu": "1", "memory": "1Gi", GPU: "1"},
        "limits": {"cpu": "1", "memory": "1Gi"},
    }
    spec = pod_spec(container(resources=resources), tolerations=[dict(GPU_TOLERATION)])
    found = run("gpu-pods-tolerate-and-limit", workload("Deployment", spec))
    assert found == [f"container 'triton': requests {GPU} without a limit; set resources.limits['{GPU}']"]


def test_gpu_request_different_from_limit_is_reported() -> None:
    resources = {"requests": {GPU: 1}, "limits": {GPU: 2}}
    spec = pod_spec(container(resources=resources))
    found = run("gpu-pods-tolerate-and-limit", workload("Deployment", spec))
    assert found == [
        f"container 'triton': {GPU} request 1 differs from its limit 2; GPUs cannot be overcommitted, "
        "so set them equal (or only the limit)"
    ]


def test_cpu_only_pod_needs_no_gpu_toleration() -> None:
    assert run("gpu-pods-tolerate-and-limit", workload("Job", pod_spec(container(), tolerations=[]))) == []


# prod-model-storage-protected


@pytest.mark.parametrize("typed", [pvc(), efs()], ids=["pvc", "efs"])
def test_protected_prod_storage_passes(typed: Typed) -> None:
    assert run("prod-model-storage-protected", typed, protect=True, environment="prod") == []


@pytest.mark.parametrize("typed", [pvc(), efs()], ids=["pvc", "efs"])
def test_unprotected_prod_storage_is_reported(typed: Typed) -> None:
    found = run("prod-model-storage-protected", typed, protect=False, environment="prod")
    assert len(found) == 1
    assert "holds the prod model store but is not protected; set `protectStorage: true`" in found[0]


@pytest.mark.parametrize("environment", ["local", "dev", "staging", "review", "unknown"])
def test_unprotected_storage_outside_prod_passes(environment: str) -> None:
    assert run("prod-model-storage-protected", pvc(), protect=False, environment=environment) == []


def test_storage_with_unknown_protection_is_not_judged() -> None:
    assert run("prod-model-storage-protected", pvc(), protect=None, environment="prod") == []


# ingress-tls-outside-local


def test_ingress_with_tls_for_every_host_passes_in_prod() -> None:
    hosts = ["triton.example.com", "grpc.triton.example.com"]
    assert run("ingress-tls-outside-local", ingress(hosts, hosts), environment="prod") == []


def test_wildcard_tls_host_covers_subdomains() -> None:
    typed = ingress(["grpc.example.com"], ["*.example.com"])
    assert run("ingress-tls-outside-local", typed, environment="dev") == []


@pytest.mark.parametrize("environment", ["dev", "staging", "prod", "review", "unknown"])
def test_ingress_without_tls_is_reported_outside_local(environment: str) -> None:
    found = run("ingress-tls-outside-local", ingress(["triton.example.com"], None), environment=environment)
    assert found == [
        f"ingress has no spec.tls in environment '{environment}'; serve it over TLS "
        "(ingressTls: true with tlsIssuer or tlsSecretName)"
    ]


def test_ingress_host_missing_from_tls_is_reported() -> None:
    typed = ingress(["triton.example.com", "grpc.example.org"], ["triton.example.com"])
    found = run("ingress-tls-outside-local", typed, environment="staging")
    assert len(found) == 1
    assert found[0].startswith("host(s) grpc.example.org not listed in any spec.tls[].hosts")


def test_ingress_without_tls_passes_in_local() -> None:
    assert run("ingress-tls-outside-local", ingress(["triton.local"], None), environment="local") == []


# no-plain-secret-env


def test_secret_looking_env_from_secret_key_ref_passes() -> None:
    spec = pod_spec(container(env=[secret_env("HF_TOKEN"), {"name": "MODEL_NAME", "value": "t5-small"}]))
    assert run("no-plain-secret-env", workload("Job", spec)) == []


@pytest.mark.parametrize("name", ["HF_TOKEN", "DB_PASSWORD", "AWS_SECRET_ACCESS_KEY", "API_KEY", "HTPASSWD"])
def test_secret_looking_env_with_literal_value_is_reported(name: str) -> None:
    spec = pod_spec(container(env=[{"name": name, "value": "hunter2"}]))
    found = run("no-plain-secret-env", workload("Deployment", spec))
    assert found == [
        f"container 'triton': env {name} looks secret but is not read from a Secret; "
        "use valueFrom.secretKeyRef (a Kubernetes Secret) instead of a literal value"
    ]


def test_secret_looking_env_from_config_map_is_reported() -> None:
    entry = {"name": "HF_TOKEN", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "token"}}}
    assert len(run("no-plain-secret-env", workload("Job", pod_spec(container(env=[entry]))))) == 1


def test_pulumi_secret_inlined_into_any_env_is_reported() -> None:
    spec = pod_spec(container(env=[{"name": "EXTRA_ARGS", "value": "[secret]"}]))
    found = run("no-plain-secret-env", workload("Job", spec))
    assert found == [
        "container 'triton': env EXTRA_ARGS holds a Pulumi secret in plain text; use valueFrom.secretKeyRef"
    ]


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("HF_TOKEN", True),
        ("hf_token", True),
        ("PULUMI_ACCESS_TOKEN", True),
        ("SSH_KEY", True),
        ("HF_TOKEN_FILE", False),
        ("PASSWORD_PATH", False),
        ("MODEL_NAME", False),
        ("TOKENIZER_DIR", False),
        ("MAX_TOKENS", False),
    ],
)
def test_secret_looking_names(name: str, secret: bool) -> None:
    assert looks_secret(name) is secret


# requests-and-limits


@pytest.mark.parametrize("kind", sorted(WORKLOAD_KINDS))
def test_containers_with_requests_and_limits_pass(kind: str) -> None:
    assert run("requests-and-limits", workload(kind, pod_spec(container()))) == []


@pytest.mark.parametrize("kind", sorted(WORKLOAD_KINDS))
def test_container_without_resources_is_reported(kind: str) -> None:
    found = run("requests-and-limits", workload(kind, pod_spec(container(resources={}))))
    assert found == [
        "container 'triton': missing resources.requests.cpu, resources.requests.memory, resources.limits.cpu, "
        "resources.limits.memory; every container needs cpu/memory requests and limits"
    ]


def test_init_container_missing_memory_limit_is_reported() -> None:
    init = container("convert", resources={"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1"}})
    found = run("requests-and-limits", workload("Job", pod_spec(container(), init=[init])))
    assert found == [
        "initContainer 'convert': missing resources.limits.memory; every container needs cpu/memory requests and limits"
    ]


# autoscaler-has-behavior


def test_v2_hpa_with_behavior_passes() -> None:
    assert run("autoscaler-has-behavior", hpa("v2", SCALE_DOWN_SLOWLY)) == []


def test_v2_hpa_without_behavior_is_reported() -> None:
    found = run("autoscaler-has-behavior", hpa("v2", None))
    assert len(found) == 1
    assert found[0].startswith("autoscaler has no spec.behavior (scaleUp/scaleDown)")


def test_v2_hpa_with_empty_behavior_is_reported() -> None:
    assert len(run("autoscaler-has-behavior", hpa("v2", {}))) == 1


def test_v1_hpa_is_reported_because_it_cannot_express_behavior() -> None:
    assert run("autoscaler-has-behavior", hpa("v1", None)) == [
        "autoscaling/v1 cannot express scaling behavior; use autoscaling/v2 with spec.behavior"
    ]


def test_keda_scaled_object_needs_hpa_behavior() -> None:
    typ = "kubernetes:keda.sh/v1alpha1:ScaledObject"
    bare = {"spec": {"scaleTargetRef": {"name": "triton"}}}
    tuned = {"spec": {"advanced": {"horizontalPodAutoscalerConfig": {"behavior": SCALE_DOWN_SLOWLY}}}}
    assert len(run("autoscaler-has-behavior", (typ, bare))) == 1
    assert run("autoscaler-has-behavior", (typ, tuned)) == []


# environment


def test_stack_name_is_read_from_the_urn() -> None:
    urn = "urn:pulumi:prod::triton-ft::triton-ft:store:ModelStore$kubernetes:core/v1:PersistentVolumeClaim::store"
    assert stack_of_urn(urn) == "prod"


@pytest.mark.parametrize(
    ("stack", "environment"),
    [
        ("local", "local"),
        ("acme/triton-ft/prod", "prod"),
        ("prod-eu", "prod"),
        ("staging", "staging"),
        ("pr-42", "review"),
        ("production", "unknown"),
        ("feature", "unknown"),
    ],
)
def test_environment_implied_by_stack_name(stack: str, environment: str) -> None:
    assert environment_of_stack(stack) == environment


def test_configured_environment_wins_over_the_stack_name() -> None:
    assert (
        resolve_environment("prod", "urn:pulumi:pr-7::triton-ft::kubernetes:core/v1:PersistentVolumeClaim::s") == "prod"
    )


def test_configured_environment_must_be_known() -> None:
    with pytest.raises(ValueError, match="environment='production' is not one of local, dev, staging, prod, review"):
        resolve_environment("production", "urn:pulumi:prod::p::t::n")
