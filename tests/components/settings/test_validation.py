"""Stack settings validation: every problem reported at once, each with its exact key path and a fix."""

from __future__ import annotations

import json
from typing import Any

import pytest

from components.settings import load_settings
from components.settings.catalog import KNOWN_MODELS
from components.settings.gpus import AWS_GPU_INSTANCES
from tritonft.errors import UserError
from tritonft.spec import DataType, Family, parameter_count

T5_SMALL = {"name": "t5-small", "hfRepo": "google-t5/t5-small", "revision": "df1b051c49625cf57a3d0d8d3863ed4d13564fe4"}
GPT2 = {"name": "gpt2", "hfRepo": "openai-community/gpt2", "revision": "607a30d783dfa663caf39e06633721c8d4cfcd7e"}
GPTJ = {"name": "gpt-j-6b", "hfRepo": "EleutherAI/gpt-j-6b", "revision": "47e169305d2e8376be1d31e765533382721b2cc1"}
MINILM = {
    "name": "minilm",
    "hfRepo": "sentence-transformers/all-MiniLM-L6-v2",
    "revision": "1110a243fdf4706b3f48f1d95db1a4f5529b4d41",
}
"""The catalog's encoder: named by repository and revision alone."""
QWEN7B = {"name": "qwen", "hfRepo": "Qwen/Qwen2.5-7B-Instruct", "revision": "a09a35458c702b33eeacc393d103063234e8bc28"}
LLAMA8B = {
    "name": "llama",
    "hfRepo": "meta-llama/Llama-3.1-8B-Instruct",
    "revision": "0e9e39f249a16976918f6564b8830bc894c89659",
}
"""The catalog's Llama-family models (``family: llama``, served by vLLM); Llama 3.1 is gated (needs ``hfToken``)."""
SST2_ARCH = {"dModel": 384, "numHeads": 12, "numLayers": 6, "dFf": 1536, "vocabSize": 30522, "maxPositions": 512}
SST2 = {
    "name": "sentiment",
    "hfRepo": "acme/minilm-sst2",
    "revision": "0123456789abcdef0123456789abcdef01234567",
    "family": "bert",
    "architecture": SST2_ARCH,
}
"""A bert classifier outside the catalog (shaped like seed 004's sst2 model): family and architecture stated."""
SST2_CLASSIFIER = SST2 | {"task": "classify", "labels": ["negative", "positive"]}


AWS_ADDONS = ("envoy-gateway", "cert-manager")
"""What every aws stack installs for its edge: the Gateway API implementation, and cert-manager for its
certificates (from the ClusterIssuer the stack makes from ``acmeEmail``)."""


def kubernetes_stack(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "platform": "kubernetes",
        "environment": "local",
        "gpuType": "A10G",
        "imageRegistry": "localhost:5000/triton-ft",
        "models": [dict(T5_SMALL)],
    }
    return base | overrides


def aws_stack(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "platform": "aws",
        "environment": "dev",
        "awsRegion": "us-west-2",
        "gpuInstanceType": "g5.12xlarge",
        "addons": list(AWS_ADDONS),
        "dnsZone": "triton.local",
        "acmeEmail": "ops@example.com",
        "models": [dict(T5_SMALL)],
    }
    if overrides.get("environment") == "prod":  # what a prod stack must state (built-cluster-prod-api-access)
        base |= {"apiPublicAccessCidrs": ["203.0.113.0/24"], "adminPrincipalArns": [OPERATORS]}
    return base | overrides


OPERATORS = "arn:aws:iam::123456789012:role/triton-ft-operators"


def ingress_stack(**overrides: Any) -> dict[str, Any]:
    """An existing cluster that keeps its Ingress controller (the `ingress` edge, the default on kubernetes), in a
    public environment: TLS from an existing Secret, basic auth from an existing Secret."""
    base = kubernetes_stack(environment="dev", tlsSecretName="triton-tls", basicAuthSecretName="triton-basic-auth")
    return base | overrides


def aws_ingress_stack(**overrides: Any) -> dict[str, Any]:
    """A cluster the stack builds with the Ingress edge kept: ingress-nginx, the issuer from acmeEmail, basic auth
    from the secret ``ingressHtpasswd`` (pass ``("ingressHtpasswd",)`` as the secret keys)."""
    base = {"edge": "ingress", "addons": ["ingress-nginx", "cert-manager"], "ingressHtpasswd": "user:$apr1$x"}
    return aws_stack(**(base | overrides))


def as_cli(values: dict[str, Any]) -> dict[str, str]:
    """Values as the Pulumi CLI hands them to a program: strings, with objects and lists as JSON."""
    return {k: v if isinstance(v, str) else json.dumps(v) for k, v in values.items() if v is not None}


def problems_of(values: dict[str, Any], secret_keys: tuple[str, ...] = ()) -> list[str]:
    with pytest.raises(UserError) as info:
        load_settings(as_cli(values), project="triton-ft", stack="test", secret_keys=secret_keys)
    return info.value.problems


def model(**fields: Any) -> dict[str, Any]:
    return dict(T5_SMALL) | fields


INVALID: list[tuple[str, dict[str, Any], str]] = [
    ("typo in a top-level key", kubernetes_stack(replicaMax=2), "replicaMax: unknown key; did you mean `replicasMax`?"),
    ("typo in a model key", kubernetes_stack(models=[model(tensorParalel=2)]), "models[0].tensorParalel: unknown key"),
    ("platform missing", {k: v for k, v in kubernetes_stack().items() if k != "platform"}, "platform: is required"),
    ("unknown platform", kubernetes_stack(platform="gke"), "platform: must be one of kubernetes, aws"),
    (
        "integer with a unit",
        kubernetes_stack(storageSizeGiB="100Gi"),
        "storageSizeGiB: is a whole number of GiB: write 100",
    ),
    (
        "seconds as a duration",
        kubernetes_stack(probeTimeoutSeconds="10m"),
        "probeTimeoutSeconds: is a whole number of seconds",
    ),
    ("not a boolean", kubernetes_stack(autoscaling="yes"), "autoscaling: must be true or false"),
    (
        "not a quantity",
        kubernetes_stack(autoscaleTargetRatio="half"),
        "autoscaleTargetRatio: 'half' is not a Kubernetes quantity",
    ),
    (
        "tensor parallel 3",
        kubernetes_stack(models=[model(tensorParallel=3)]),
        "models[0].tensorParallel: must be one of 1, 2, 4, 8; got 3",
    ),
    (
        "tensor parallel does not divide heads",
        aws_stack(gpuInstanceType="g5.48xlarge", models=[dict(GPT2, tensorParallel=8)]),
        "models[0].tensorParallel: 8 does not divide numHeads=12 (use 1, 2, 4)",
    ),
    (
        "tensor parallel larger than the node's GPUs",
        aws_stack(gpuInstanceType="g5.2xlarge", models=[model(tensorParallel=2)]),
        "models[0].tensorParallel: 2 x pipelineParallel 1 = 2 GPUs, but a g5.2xlarge node has 1 A10G",
    ),
    (
        "GPUs per node not divisible by TP x PP",
        kubernetes_stack(gpusPerNode=6, models=[model(tensorParallel=4)]),
        "models[0].tensorParallel: TP x PP = 4 does not divide the 6 GPUs of each GPU node (gpusPerNode)",
    ),
    (
        "min replicas above max",
        kubernetes_stack(replicasMin=3, replicasMax=2),
        "replicasMin: 3 is larger than replicasMax=2",
    ),
    (
        "unknown GPU instance type",
        aws_stack(gpuInstanceType="g5.3xlarge"),
        "gpuInstanceType: 'g5.3xlarge' is not a known value; did you mean g5.xlarge",
    ),
    (
        "CPU instance as GPU type",
        aws_stack(gpuInstanceType="m6i.large"),
        "gpuInstanceType: 'm6i.large' is not a known value",
    ),
    ("unknown GPU model", kubernetes_stack(gpuType="RTX9090"), "gpuType: must be one of"),
    (
        "weights do not fit the GPU",
        kubernetes_stack(gpuType="T4", models=[dict(GPTJ) | {"dataType": "fp32"}]),
        "models[0].tensorParallel: weights need ~22.5 GiB per GPU at dataType fp32 and TP 1",
    ),
    (
        "duplicate model names",
        kubernetes_stack(models=[dict(T5_SMALL), dict(T5_SMALL)]),
        "models[1].name: 't5-small' is already used by models[0]",
    ),
    (
        "model name not a Kubernetes name",
        kubernetes_stack(models=[model(name="T5_Small")]),
        "models[0].name: 'T5_Small' is not a valid RFC 1123 label",
    ),
    (
        "namespace not a Kubernetes name",
        kubernetes_stack(namespace="Triton"),
        "namespace: 'Triton' is not a valid RFC 1123 label",
    ),
    ("branch as revision", kubernetes_stack(models=[model(revision="main")]), "models[0].revision: 'main' is a branch"),
    (
        "unknown repo without architecture",
        kubernetes_stack(models=[model(hfRepo="acme/t5-custom")]),
        "models[0].architecture: 'acme/t5-custom' is not in the catalog",
    ),
    (
        "custom architecture missing fields",
        kubernetes_stack(models=[model(hfRepo="acme/t5-custom", family="t5", architecture={"dModel": 512})]),
        "models[0].architecture: missing numHeads, numLayers, dFf, vocabSize",
    ),
    (
        "bf16 on a pre-Ampere GPU",
        kubernetes_stack(gpuType="T4", models=[model(dataType="bf16")]),
        "models[0].dataType: bf16 needs an Ampere or newer GPU",
    ),
    (
        "int8 on a T5 model",
        kubernetes_stack(models=[model(int8Mode=1)]),
        "models[0].int8Mode: weight-only int8 is supported for gpt2 only",
    ),
    (
        "preferred batch above max",
        kubernetes_stack(models=[model(maxBatchSize=8, preferredBatchSizes=[4, 16])]),
        "models[0].preferredBatchSizes: [16] must lie between 1 and maxBatchSize=8",
    ),
    (
        "key of the other platform",
        kubernetes_stack(gpuInstanceType="g5.xlarge"),
        "gpuInstanceType: applies to platform `aws` only",
    ),
    (
        "aws region missing",
        {k: v for k, v in aws_stack().items() if k != "awsRegion"},
        "awsRegion: is required for platform `aws`",
    ),
    ("GPU node min above max", aws_stack(gpuNodesMin=3, gpuNodesMax=2), "gpuNodesMin: 3 is larger than gpuNodesMax=2"),
    (
        "tag-only prebuilt image",
        kubernetes_stack(serverImage="nvcr.io/acme/triton:latest"),
        "serverImage: 'nvcr.io/acme/triton:latest' is not pinned by digest",
    ),
    (
        "tag-only engine image",
        kubernetes_stack(engineImages={"vllm": "nvcr.io/acme/triton-vllm:latest"}),
        "engineImages: vllm: 'nvcr.io/acme/triton-vllm:latest' is not pinned by digest",
    ),
    (
        "engine image of an engine without its own image",
        kubernetes_stack(engineImages={"fastertransformer": "r.example.com/s@sha256:" + "0" * 64}),
        "engineImages: 'fastertransformer' is not an engine with its own server image; the keys are onnxruntime, vllm",
    ),
    (
        "no registry for a build",
        {k: v for k, v in kubernetes_stack().items() if k != "imageRegistry"},
        "imageRegistry: required on platform kubernetes",
    ),
    (
        "GPU arch not compiled",
        kubernetes_stack(gpuType="H100", cudaArchs=["80", "86"]),
        "cudaArchs: the H100 GPUs need sm_90",
    ),
    (
        "basic auth without credentials",
        ingress_stack(basicAuthSecretName=None),
        "ingressAuth: basic needs credentials",
    ),
    ("scale to zero without KEDA", kubernetes_stack(scaleToZero=True, replicasMin=0), "scaleToZero: needs KEDA"),
    (
        "monitoring without Prometheus operator",
        kubernetes_stack(monitoring=True),
        "monitoring: needs the Prometheus operator CRDs",
    ),
    ("models not a list", kubernetes_stack(models={"name": "x"}), "models: must be a list"),
    (
        "architecture field of the wrong type",
        kubernetes_stack(
            models=[
                model(
                    hfRepo="acme/t",
                    family="t5",
                    architecture={"dModel": "big", "numHeads": 8, "numLayers": 2, "dFf": 64, "vocabSize": 100},
                )
            ]
        ),
        "models[0].architecture.dModel: must be a positive integer",
    ),
    (
        "alertFor names an alert that does not exist",
        kubernetes_stack(alertFor={"TritonQueueSaturate": "5m"}),
        "alertFor: 'TritonQueueSaturate' is not one of the alerts (did you mean TritonQueueSaturated?)",
    ),
    (
        "alertFor duration in words",
        kubernetes_stack(alertFor={"TritonRequestsPiling": "5 minutes"}),
        "alertFor: TritonRequestsPiling: '5 minutes' is not a Prometheus duration like `30s`, `5m` or `1h30m`",
    ),
    (
        "alertFor duration as a bare number",
        kubernetes_stack(alertFor={"TritonInferenceFailures": 600}),
        "alertFor: TritonInferenceFailures: 600 is not a Prometheus duration",
    ),
]


@pytest.mark.parametrize(("values", "expected"), [(v, e) for _, v, e in INVALID], ids=[i for i, _, _ in INVALID])
def test_invalid_config_names_the_key_path_and_the_fix(values: dict[str, Any], expected: str) -> None:
    problems = problems_of(values)
    assert any(expected in p for p in problems), problems


def test_every_problem_is_reported_at_once() -> None:
    values = kubernetes_stack(
        replicaMax=2, storageSizeGiB="5Gi", models=[model(tensorParallel=3), model(revision="main")]
    )
    problems = problems_of(values)
    assert len(problems) >= 4
    assert {p.split(":")[0] for p in problems} >= {
        "replicaMax",
        "storageSizeGiB",
        "models[0].tensorParallel",
        "models[1].revision",
    }


def test_secret_keys_must_be_stored_as_secrets() -> None:
    problems = problems_of(kubernetes_stack(hfToken="hf_plaintext"))
    assert any(p.startswith("hfToken: must be stored as a secret") for p in problems)
    assert not any("hf_plaintext" in p for p in problems), "the value itself must never be echoed"


def test_a_valid_local_stack_yields_typed_frozen_settings() -> None:
    settings = load_settings(as_cli(kubernetes_stack()), project="triton-ft", stack="local")
    (spec,) = settings.models
    assert spec.family is Family.T5 and spec.data_type is DataType.FP16
    assert spec.architecture == KNOWN_MODELS["google-t5/t5-small"][1]
    assert settings.cluster.gpu_node.gpu.name == "A10G"
    assert settings.serving.ingress.tls is False and settings.serving.ingress.auth == "none"
    with pytest.raises(AttributeError):
        settings.namespace = "other"  # type: ignore[misc]


def test_outside_local_tls_and_api_keys_default_on_the_gateway_edge() -> None:
    settings = load_settings(as_cli(aws_stack()), project="triton-ft", stack="dev")
    assert settings.serving.ingress.tls is True
    assert settings.serving.ingress.edge == "gateway"
    assert settings.serving.ingress.auth == "apiKey"


def test_outside_local_an_ingress_edge_defaults_to_basic_auth() -> None:
    settings = load_settings(as_cli(ingress_stack()), project="triton-ft", stack="dev")
    assert (settings.serving.ingress.edge, settings.serving.ingress.auth) == ("ingress", "basic")


def test_with_an_acme_email_every_environment_gets_the_lets_encrypt_production_issuer() -> None:
    """The probes and judges in every `up` verify TLS: a staging-directory certificate would fail dev's first probe."""
    issuers = {
        env: load_settings(
            as_cli(aws_stack(environment=env)), project="triton-ft", stack=env
        ).serving.ingress.tls_issuer
        for env in ("dev", "staging", "prod")
    }
    assert issuers == {"dev": "letsencrypt-prod", "staging": "letsencrypt-prod", "prod": "letsencrypt-prod"}


def test_prod_protects_storage_by_default() -> None:
    settings = load_settings(as_cli(aws_stack(environment="prod")), project="triton-ft", stack="prod")
    assert settings.storage.protect is True


def test_custom_architecture_is_accepted_with_a_family() -> None:
    arch = {"dModel": 256, "numHeads": 4, "numLayers": 2, "dFf": 1024, "vocabSize": 1000, "maxPositions": 1024}
    settings = load_settings(
        as_cli(kubernetes_stack(models=[model(hfRepo="acme/tiny-gpt", family="gpt2", architecture=arch)])),
        project="triton-ft",
        stack="local",
    )
    assert settings.models[0].architecture.d_model == 256
    assert settings.models[0].family is Family.GPT2


def test_a_stack_offers_exactly_the_families_the_engines_serve() -> None:
    from components.settings.schema import FAMILIES
    from tritonft.engines import ENGINES

    assert set(FAMILIES) == {str(f) for engine in ENGINES for f in engine.families}


def test_known_parameter_counts_match_the_published_sizes() -> None:
    # Published sizes: t5-small 60.5M, gpt2 124.4M, gpt-j-6b 6.05B (Hugging Face model cards).
    assert parameter_count(*KNOWN_MODELS["t5-small"]) == pytest.approx(60.5e6, rel=0.01)
    assert parameter_count(*KNOWN_MODELS["gpt2"]) == pytest.approx(124.4e6, rel=0.01)
    assert parameter_count(*KNOWN_MODELS["EleutherAI/gpt-j-6b"]) == pytest.approx(6.05e9, rel=0.01)


def test_gpu_instance_table_knows_the_four_gpu_g5_shapes() -> None:
    assert AWS_GPU_INSTANCES["g5.12xlarge"].gpus == 4
    assert AWS_GPU_INSTANCES["g5.12xlarge"].gpu.memory_gib == 24
    assert AWS_GPU_INSTANCES["p5.48xlarge"].gpu.compute_capability == 90


def test_the_generation_check_is_on_by_default_and_a_stack_can_turn_it_off() -> None:
    default = load_settings(as_cli(kubernetes_stack()), project="triton-ft", stack="local")
    off = load_settings(as_cli(kubernetes_stack(verifyGeneration=False)), project="triton-ft", stack="local")
    assert default.probe.verify_generation is True
    assert off.probe.verify_generation is False


def test_an_unknown_gpu_instance_type_gives_no_follow_on_problem() -> None:
    values = aws_stack(gpuInstanceType="g5.3xlarge")
    assert problems_of(values) == [
        "gpuInstanceType: 'g5.3xlarge' is not a known value; did you mean g5.xlarge, g5.8xlarge, g5.4xlarge?"
    ]


def test_a_missing_platform_stops_the_platform_bound_checks() -> None:
    values = {k: v for k, v in aws_stack().items() if k != "platform"}
    problems = problems_of(values)
    assert problems == [
        "platform: is required: Where the cluster comes from: an existing cluster (`kubernetes`) or EKS built by "
        "this stack (`aws`)."
    ]


def test_a_bad_model_repo_stops_the_checks_that_need_its_architecture() -> None:
    problems = problems_of(kubernetes_stack(gpusPerNode=8, models=[model(hfRepo="not a repo", tensorParallel=8)]))
    assert problems == [
        "models[0].hfRepo: 'not a repo' is not a Hugging Face repository id like `t5-small` or `org/name`"
    ]


def test_a_vpc_cidr_problem_names_the_key_as_written() -> None:
    problems = problems_of(aws_stack(vpcCidr="10.0.0.0/33"))
    assert len(problems) == 1 and problems[0].startswith("vpcCidr: '10.0.0.0/33' is not an IPv4 CIDR block")


def test_independent_problems_are_all_listed_at_once() -> None:
    values = aws_stack(
        namespace="Triton",
        gpuNodesMin=3,
        gpuNodesMax=2,
        ingressHost="triton_dev",
        models=[model(revision="df1b051"), dict(GPT2, maxInputLen=2000)],
    )
    assert sorted(p.split(":")[0] for p in problems_of(values)) == [
        "gpuNodesMin",
        "ingressHost",
        "models[0].revision",
        "models[1].maxInputLen",
        "namespace",
    ]


@pytest.mark.parametrize("revision", ["df1b051", "DF1B051C49625CF57A3D0D8D3863ED4D13564FE4", "v1.0", "main"])
def test_revision_must_be_a_full_lower_case_sha(revision: str) -> None:
    (problem,) = problems_of(kubernetes_stack(models=[model(revision=revision)]))
    assert problem.startswith(f"models[0].revision: {revision!r} ")
    assert "40" in problem


def test_a_misspelled_catalog_repo_gets_a_did_you_mean_on_hf_repo_not_an_architecture_request() -> None:
    found = problems_of(kubernetes_stack(models=[model(hfRepo="openai-community/gpt-2")]))
    assert found == [
        "models[0].hfRepo: 'openai-community/gpt-2' is not in the catalog of known models; did you mean "
        "'openai-community/gpt2'? (A model outside the catalog needs `family` and an `architecture` block.)"
    ]


def test_a_catalog_repo_in_the_wrong_case_is_named_in_the_catalogs_case() -> None:
    found = problems_of(kubernetes_stack(models=[model(hfRepo="Google-T5/t5-small")]))
    assert [p for p in found if "did you mean" in p] == [
        "models[0].hfRepo: 'Google-T5/t5-small' is not in the catalog of known models; did you mean "
        "'google-t5/t5-small'? (A model outside the catalog needs `family` and an `architecture` block.)"
    ]


def test_a_repo_far_from_every_catalog_id_still_asks_for_family_and_architecture() -> None:
    assert [p for p in problems_of(kubernetes_stack(models=[model(hfRepo="acme/t5-custom")])) if "catalog" in p] == [
        "models[0].architecture: 'acme/t5-custom' is not in the catalog of known models; add `family` and an "
        "`architecture` block (dModel, numHeads, numLayers, dFf, vocabSize)"
    ]


def test_an_ingress_class_that_ignores_ingress_nginxs_auth_annotations_is_refused_naming_the_fix() -> None:
    """Issue 51: `ingressClass: alb` would serve every host with basic auth's annotations ignored (open)."""
    (problem,) = problems_of(ingress_stack(ingressClass="alb"))
    assert problem.startswith("ingressClass: 'alb' ignores ingress-nginx's basic annotations")
    assert "edge: gateway with ingressAuth: apiKey" in problem


def test_ingress_nginx_keeps_its_basic_auth_edge() -> None:
    settings = load_settings(as_cli(ingress_stack(ingressClass="nginx")), project="triton-ft", stack="dev")
    assert settings.serving.ingress.auth == "basic"
