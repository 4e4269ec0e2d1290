"""Base images by digest: every ``FROM`` of every Dockerfile goes through an ``ARG`` a stack can pin, the bases the
repository could verify are pinned in the Dockerfile, and a prod build refuses a base left a tag alone."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from components.platform.base_images import (
    REQUIRE_PINNED_BASE,
    BaseImage,
    base_build_args,
    dockerfile_bases,
    pinned_base_args,
    unpinned_bases,
    unpinned_message,
)
from tests.components.platform.aws.helpers import REPO_ROOT, build_platform_and_images
from tests.components.platform.test_dockerfiles import HADOLINT
from tritonft.errors import UserError
from tritonft.synth.engine import RecordingMocks

DOCKERFILES = sorted((REPO_ROOT / "images").glob("*/Dockerfile"))
IMAGE = "docker-build:index:Image"
DIGEST = "sha256:" + "5e" * 32
PYTHON = "python:3.11.7-slim-bookworm@sha256:d11b9bd5e49ea7401753d78f4d3b56f3aec952b85b49bcae88981f0452818e0b"


def ids(path: Path) -> str:
    return path.parent.name


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=ids)
def test_every_base_is_named_through_an_arg_a_stack_can_pin(dockerfile: Path) -> None:
    bases = dockerfile_bases(dockerfile.read_text())
    assert bases
    assert all(base.arg for base in bases), bases


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=ids)
def test_every_from_resolves_to_a_tagged_never_latest_image_hadolint_dl3006_dl3007(
    dockerfile: Path, tmp_path: Path
) -> None:
    """hadolint cannot see through ``FROM ${ARG}``: the Dockerfile is linted with each base written out."""
    text = dockerfile.read_text()
    for base in dockerfile_bases(text, {"TOOLS_IMAGE": "registry.example.com/tools@" + DIGEST}):
        text = re.sub(rf"^FROM \$\{{{base.arg}\}}", f"FROM {base.ref}", text, flags=re.M)
    resolved = tmp_path / "Dockerfile"
    resolved.write_text(text)
    result = subprocess.run(
        [str(HADOLINT), "--error", "DL3006", "--error", "DL3007", "--failure-threshold", "error", str(resolved)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert "FROM ${" not in text
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=ids)
def test_every_base_is_pinned_in_the_dockerfile_or_checked_by_its_prod_guard(dockerfile: Path) -> None:
    text = dockerfile.read_text()
    guard = guard_command(text)
    for base in dockerfile_bases(text):
        assert base.pinned or f"${{{base.arg}}}" in guard, f"{base.ref}: neither pinned nor checked"


def test_the_tools_image_pins_python_by_its_registry_digest_with_the_tag_kept() -> None:
    (python,) = [b for b in dockerfile_bases((REPO_ROOT / "images/tools/Dockerfile").read_text()) if b.pinned]
    assert python == BaseImage(arg="PYTHON_IMAGE", ref=PYTHON)


def guard_command(text: str) -> str:
    """The shell of the Dockerfile's ``RUN`` that checks ``REQUIRE_PINNED_BASE``, its continuations joined."""
    joined = text.replace("\\\n", " ")
    (line,) = [line for line in joined.splitlines() if line.startswith("RUN ") and "REQUIRE_PINNED_BASE" in line]
    return line.removeprefix("RUN ")


def run_guard(dockerfile: Path, require: str, **refs: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ["PATH"], "REQUIRE_PINNED_BASE": require, **refs}
    return subprocess.run(
        ["sh", "-c", guard_command(dockerfile.read_text())], env=env, capture_output=True, text=True, check=False
    )


def base_refs(dockerfile: Path, *, pinned: bool) -> dict[str, str]:
    bases = dockerfile_bases(dockerfile.read_text(), {"TOOLS_IMAGE": "registry.example.com/tools:1"})
    return {str(b.arg): (b.ref.split("@")[0] + "@" + DIGEST) if pinned else b.ref.split("@")[0] for b in bases}


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=ids)
def test_a_prod_build_stops_at_a_tag_only_base_naming_it_and_the_setting(dockerfile: Path) -> None:
    refs = base_refs(dockerfile, pinned=False)
    done = run_guard(dockerfile, "true", **refs)
    assert done.returncode == 1
    assert "is not pinned by digest; set the stack's baseImageDigests for it" in done.stderr
    assert any(ref in done.stderr for ref in refs.values())


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=ids)
def test_a_prod_build_goes_on_when_every_base_is_pinned(dockerfile: Path) -> None:
    done = run_guard(dockerfile, "true", **base_refs(dockerfile, pinned=True))
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=ids)
def test_a_build_outside_prod_accepts_a_tag_only_base(dockerfile: Path) -> None:
    done = run_guard(dockerfile, "false", **base_refs(dockerfile, pinned=False))
    assert done.returncode == 0, done.stderr


def test_a_base_is_resolved_with_the_builds_arguments_and_stages_are_not_bases() -> None:
    text = "ARG V=1\nARG B=repo/img:${V}-py3\nFROM ${B} AS build\nFROM build AS next\nFROM ${B}\n"
    assert dockerfile_bases(text, {"V": "2"}) == (BaseImage(arg="B", ref="repo/img:2-py3"),)


def test_a_digest_from_the_setting_becomes_the_args_pinned_reference() -> None:
    bases = (BaseImage(arg="BASE_IMAGE", ref="nvcr.io/nvidia/tritonserver:23.04-py3"),)
    pins = pinned_base_args(bases, {"nvcr.io/nvidia/tritonserver:23.04-py3": DIGEST})
    assert pins == {"BASE_IMAGE": f"nvcr.io/nvidia/tritonserver:23.04-py3@{DIGEST}"}
    assert unpinned_bases(bases, pins) == []


def test_a_digest_for_another_release_pins_nothing() -> None:
    bases = (BaseImage(arg="BASE_IMAGE", ref="nvcr.io/nvidia/tritonserver:23.04-py3"),)
    pins = pinned_base_args(bases, {"nvcr.io/nvidia/tritonserver:23.05-py3": DIGEST})
    assert unpinned_bases(bases, pins) == ["nvcr.io/nvidia/tritonserver:23.04-py3"]


def test_a_literal_from_cannot_be_pinned_by_the_setting_and_says_so() -> None:
    with pytest.raises(UserError, match=r"FROM repo/img:1 is not written through an ARG"):
        pinned_base_args((BaseImage(arg=None, ref="repo/img:1"),), {"repo/img:1": DIGEST})


def test_only_prod_builds_require_a_pinned_base() -> None:
    text = "ARG B=repo/img:1\nFROM ${B}\n"
    assert base_build_args(text, {}, {}, prod=True) == {REQUIRE_PINNED_BASE: "true"}
    assert base_build_args(text, {}, {}, prod=False) == {}


def test_the_plans_message_names_the_dockerfile_the_base_and_the_setting_to_give() -> None:
    message = unpinned_message("images/triton-ft/Dockerfile", ["nvcr.io/nvidia/tritonserver:23.04-py3"])
    assert message.startswith("images: images/triton-ft/Dockerfile builds on nvcr.io/nvidia/tritonserver:23.04-py3")
    assert "pulumi config set --path 'baseImageDigests[\"nvcr.io/nvidia/tritonserver:23.04-py3\"]' sha256:" in message


def test_prod_builds_carry_the_requirement_and_dev_builds_do_not(mocks: RecordingMocks) -> None:
    build_platform_and_images("prod")
    assert {r.inputs["buildArgs"].get(REQUIRE_PINNED_BASE) for r in mocks.of_type(IMAGE)} == {"true"}


def test_dev_builds_do_not_require_a_pinned_base(mocks: RecordingMocks) -> None:
    build_platform_and_images("dev")
    assert all(REQUIRE_PINNED_BASE not in r.inputs.get("buildArgs", {}) for r in mocks.of_type(IMAGE))


def test_the_stacks_digests_pin_the_server_and_encoder_bases_in_the_build(mocks: RecordingMocks) -> None:
    digests = {"nvcr.io/nvidia/tritonserver:23.04-py3": DIGEST, "nvcr.io/nvidia/tritonserver:25.12-py3": DIGEST}
    build_platform_and_images("prod", engines=("onnxruntime",), base_digests=digests)
    args = {r.name: r.inputs["buildArgs"] for r in mocks.of_type(IMAGE)}
    assert args["img-server"]["BASE_IMAGE"] == f"nvcr.io/nvidia/tritonserver:23.04-py3@{DIGEST}"
    assert args["img-server-onnxruntime"]["BASE_IMAGE"] == f"nvcr.io/nvidia/tritonserver:25.12-py3@{DIGEST}"
    assert "PYTHON_IMAGE" not in args["img-tools"], "already pinned in the Dockerfile"
