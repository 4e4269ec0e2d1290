"""TritonImage: ECR repositories, builds pushed with a registry cache, deployment by digest, prebuilt refs."""

from __future__ import annotations

import json
import re

import pytest

from components.platform.build_context import build_view, context_tag
from components.platform.image import (
    SERVER_CONTEXT,
    SERVER_DOCKERFILE,
    TOOLS_CONTEXT,
    TOOLS_DOCKERFILE,
    extra_server_images,
    validate_prebuilt,
)
from tests.components.platform.aws.helpers import REPO_ROOT, build_platform_and_images, provider_ref
from tritonft.engines.fastertransformer.versions import DEFAULT_CUDA_ARCHS, FT_BACKEND_COMMIT
from tritonft.errors import UserError
from tritonft.synth.engine import RecordingMocks
from tritonft.synth.manifests import is_secret

IMAGE = "docker-build:index:Image"
REPO = "aws:ecr/repository:Repository"
DIGEST = "sha256:" + "ab" * 32


def test_both_images_are_deployed_by_digest_from_their_ecr_repository(mocks: RecordingMocks) -> None:
    built = build_platform_and_images()
    pattern = r"^123456789012\.dkr\.ecr\.us-east-1\.amazonaws\.com/triton-ft/{}@sha256:[0-9a-f]{{64}}$"
    assert re.match(pattern.format("server"), built["server_image"])
    assert re.match(pattern.format("tools"), built["tools_image"])


@pytest.mark.parametrize(("environment", "force_delete"), [("dev", True), ("staging", True), ("prod", False)])
def test_image_repositories_are_immutable_scanned_and_force_deleted_only_outside_prod(
    mocks: RecordingMocks, environment: str, force_delete: bool
) -> None:
    build_platform_and_images(environment)
    repos = {r.inputs["name"]: r for r in mocks.of_type(REPO)}
    for name in ("triton-ft/server", "triton-ft/tools"):
        assert repos[name].inputs["imageTagMutability"] == "IMMUTABLE"
        assert repos[name].inputs["imageScanningConfiguration"] == {"scanOnPush": True}
    assert {r.inputs["forceDelete"] for r in repos.values()} == {force_delete}


def test_build_cache_lives_in_its_own_mutable_repository(mocks: RecordingMocks) -> None:
    build_platform_and_images()
    cache = [r for r in mocks.of_type(REPO) if r.inputs["name"] == "triton-ft/build-cache"]
    assert cache[0].inputs["imageTagMutability"] == "MUTABLE"


def test_images_push_with_an_ecr_compatible_registry_cache(mocks: RecordingMocks) -> None:
    build_platform_and_images()
    images = mocks.of_type(IMAGE)
    assert len(images) == 2
    for image in images:
        assert image.inputs["push"] is True
        assert image.inputs["buildOnPreview"] is False
        (cache_to,) = image.inputs["cacheTo"]
        registry = cache_to["registry"]
        assert registry["imageManifest"] is True and registry["ociMediaTypes"] is True
        (cache_from,) = image.inputs["cacheFrom"]
        assert cache_from["registry"]["ref"] == registry["ref"]
        assert registry["ref"].startswith("123456789012.dkr.ecr.us-east-1.amazonaws.com/triton-ft/build-cache:")


def test_tags_are_derived_from_content_never_latest(mocks: RecordingMocks) -> None:
    build_platform_and_images()
    server = mocks.named("img-server")
    (tag,) = server.inputs["tags"]
    assert not tag.endswith(":latest")
    assert re.search(r":23\.04-ft-[0-9a-f]{20}$", tag)
    (tools_tag,) = mocks.named("img-tools").inputs["tags"]
    assert re.search(r"/triton-ft/tools:tools-[0-9a-f]{20}$", tools_tag)


def test_server_build_pins_triton_ft_commit_and_cuda_archs_including_hopper(mocks: RecordingMocks) -> None:
    build_platform_and_images()
    args = mocks.named("img-server").inputs["buildArgs"]
    assert args["TRITON_VERSION"] == "23.04"
    assert args["FT_BACKEND_COMMIT"] == FT_BACKEND_COMMIT
    assert args["CUDA_ARCHS"].split(";") == list(DEFAULT_CUDA_ARCHS)
    assert "90" in DEFAULT_CUDA_ARCHS
    assert mocks.named("img-server").inputs["dockerfile"]["location"].endswith("images/triton-ft/Dockerfile")


def test_repositories_use_the_platform_aws_provider(mocks: RecordingMocks) -> None:
    build_platform_and_images()
    ref = provider_ref(mocks, "pulumi:providers:aws")
    assert {r.provider for r in mocks.of_type(REPO)} == {ref}


def test_prebuilt_images_pinned_by_digest_skip_every_build(mocks: RecordingMocks) -> None:
    server = f"nvcr.example/triton-ft:23.04@{DIGEST}"
    tools = f"ghcr.io/acme/tritonft@{DIGEST}"
    built = build_platform_and_images(server_prebuilt=server, tools_prebuilt=tools)
    assert (built["server_image"], built["tools_image"]) == (server, tools)
    assert mocks.of_type(IMAGE) == []
    assert mocks.of_type(REPO) == []


def test_a_tag_only_prebuilt_reference_is_a_clear_error() -> None:
    with pytest.raises(UserError, match=r"images\.serverImage: 'acme/triton:23\.04' is not pinned by digest"):
        validate_prebuilt("serverImage", "acme/triton:23.04")


def test_a_digest_with_the_wrong_length_is_rejected() -> None:
    with pytest.raises(UserError):
        validate_prebuilt("toolsImage", "acme/tools@sha256:abc123")


def test_every_repository_expires_only_untagged_images(mocks: RecordingMocks) -> None:
    build_platform_and_images()
    policies = mocks.of_type("aws:ecr/lifecyclePolicy:LifecyclePolicy")
    assert {p.inputs["repository"] for p in policies} == {r.inputs["name"] for r in mocks.of_type(REPO)}
    for policy in policies:
        (rule,) = json.loads(policy.inputs["policy"])["rules"]
        assert rule["selection"]["tagStatus"] == "untagged" and rule["action"] == {"type": "expire"}


def test_the_registry_password_a_build_logs_in_with_is_a_secret_in_the_plan(mocks: RecordingMocks) -> None:
    build_platform_and_images()
    for image in mocks.of_type(IMAGE):
        registries = image.inputs["registries"]
        assert is_secret(registries), "the login (its password) is a secret input: masked in the plan and state"
        (registry,) = registries["value"]
        assert registry["password"] == "mock-ecr-password"


def test_prod_builds_neither_pull_nor_push_the_mutable_build_cache(mocks: RecordingMocks) -> None:
    build_platform_and_images("prod")
    assert "triton-ft/build-cache" not in {r.inputs["name"] for r in mocks.of_type(REPO)}
    for image in mocks.of_type(IMAGE):
        assert not image.inputs.get("cacheFrom") and not image.inputs.get("cacheTo")


def test_the_build_cache_outside_prod_is_scanned_on_push(mocks: RecordingMocks) -> None:
    build_platform_and_images("staging")
    (cache,) = [r for r in mocks.of_type(REPO) if r.inputs["name"] == "triton-ft/build-cache"]
    assert cache.inputs["imageScanningConfiguration"] == {"scanOnPush": True}


def test_repositories_are_encrypted_with_the_customer_managed_key_when_given(mocks: RecordingMocks) -> None:
    key = "arn:aws:kms:us-west-2:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    build_platform_and_images("staging", kms_key_arn=key)
    repos = mocks.of_type(REPO)
    assert repos
    for repo in repos:
        assert repo.inputs["encryptionConfigurations"] == [{"encryptionType": "KMS", "kmsKey": key}]


def test_repositories_use_aes256_without_a_key(mocks: RecordingMocks) -> None:
    build_platform_and_images("staging")
    for repo in mocks.of_type(REPO):
        assert repo.inputs["encryptionConfigurations"] == [{"encryptionType": "AES256"}]


def test_ft_models_alone_need_no_second_server_image() -> None:
    assert extra_server_images(["fastertransformer"]) == {}


def test_encoders_get_their_own_server_image_on_a_current_triton(mocks: RecordingMocks) -> None:
    built = build_platform_and_images(engines=("fastertransformer", "onnxruntime"))
    images = {r.name: r.inputs for r in mocks.of_type(IMAGE)}
    assert sorted(images) == ["img-server", "img-server-onnxruntime", "img-tools"]
    onnx = images["img-server-onnxruntime"]
    assert onnx["dockerfile"]["location"].endswith("images/triton-onnx/Dockerfile")
    assert onnx["context"]["location"].endswith("images/triton-onnx")
    assert onnx["buildArgs"]["TRITON_VERSION"] == "25.12"
    assert re.match(r"^.*/triton-ft/server-onnxruntime:onnxruntime-25\.12-[0-9a-f]{20}$", onnx["tags"][0])
    assert built["images"].engine_images.keys() == {"onnxruntime"}


def test_vllm_models_get_ngcs_vllm_release_as_their_own_server_image(mocks: RecordingMocks) -> None:
    built = build_platform_and_images(engines=("fastertransformer", "vllm"))
    images = {r.name: r.inputs for r in mocks.of_type(IMAGE)}
    assert sorted(images) == ["img-server", "img-server-vllm", "img-tools"]
    vllm = images["img-server-vllm"]
    assert vllm["dockerfile"]["location"].endswith("images/triton-vllm/Dockerfile")
    assert vllm["buildArgs"] == {"TRITON_VERSION": "26.08"}
    assert re.match(r"^.*/triton-ft/server-vllm:vllm-26\.08-[0-9a-f]{20}$", vllm["tags"][0])
    assert built["images"].engine_images.keys() == {"vllm"}


def test_an_engines_prebuilt_server_image_must_be_pinned_by_digest(mocks: RecordingMocks) -> None:
    with pytest.raises(UserError, match=r"images\.engineImages\.vllm: 'nvcr\.io/nvidia/tritonserver:26\.08-vllm"):
        build_platform_and_images(
            engines=("vllm",), engine_prebuilt={"vllm": "nvcr.io/nvidia/tritonserver:26.08-vllm-python-py3"}
        )


def test_an_engines_prebuilt_server_image_pinned_by_digest_is_not_built(mocks: RecordingMocks) -> None:
    ref = f"nvcr.io/nvidia/tritonserver:26.08-vllm-python-py3@{DIGEST}"
    build_platform_and_images(engines=("vllm",), engine_prebuilt={"vllm": ref})
    assert sorted(r.name for r in mocks.of_type(IMAGE)) == ["img-server", "img-tools"]


def test_an_unknown_engine_is_named() -> None:
    with pytest.raises(UserError, match=r"no serving engine named \['tensorrt'\]"):
        extra_server_images(["tensorrt"])


def test_a_tag_names_what_the_provider_would_rebuild_from(mocks: RecordingMocks) -> None:
    """The tag of each built image is the content tag of its context, Dockerfile and diffed inputs."""
    build_platform_and_images()
    for resource, context, dockerfile in (
        ("img-server", SERVER_CONTEXT, SERVER_DOCKERFILE),
        ("img-tools", TOOLS_CONTEXT, TOOLS_DOCKERFILE),
    ):
        image = mocks.named(resource)
        assert image.inputs["context"]["location"] == context
        assert image.inputs["dockerfile"]["location"] == dockerfile
        (tag,) = image.inputs["tags"]
        view = build_view(REPO_ROOT / context, REPO_ROOT / dockerfile)
        inputs = {**image.inputs.get("buildArgs", {}), "platform": "linux/amd64", "cache": resource}
        assert tag.rsplit(":", 1)[1] == context_tag(view, inputs, prefix=tag.rsplit(":", 1)[1].rsplit("-", 1)[0])
