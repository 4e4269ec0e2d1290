"""What a server image compiles with: its base as pulled and the bytes of the files its Dockerfile copies, not the
pushed digest (which every CI build changes for the same base and files)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from components.platform.compile_identity import compile_identity, image_compile_identity
from tritonft.engines import engine_for
from tritonft.engines.vllm.versions import TRITON_VERSION
from tritonft.spec import Family

REPO = Path(__file__).resolve().parents[3]
VLLM_IMAGE = engine_for(Family.LLAMA).server_image
BASE = f"nvcr.io/nvidia/tritonserver:{TRITON_VERSION}-vllm-python-py3"
DIGEST = "sha256:" + "e" * 64


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A copy of the files the vLLM image is built from."""
    for path in VLLM_IMAGE.inputs:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / path, tmp_path / path)
    return tmp_path


def test_the_same_base_and_files_are_the_same_identity_in_another_checkout(checkout: Path) -> None:
    assert image_compile_identity(checkout, VLLM_IMAGE, {}) == image_compile_identity(REPO, VLLM_IMAGE, {})


def test_a_changed_patch_is_another_identity(checkout: Path) -> None:
    (patch,) = [p for p in VLLM_IMAGE.inputs if p.endswith("scheduler_gauges.py")]
    before = image_compile_identity(checkout, VLLM_IMAGE, {})
    (checkout / patch).write_text((checkout / patch).read_text() + "\n# changed\n")
    assert image_compile_identity(checkout, VLLM_IMAGE, {}) != before


def test_the_base_the_stack_pins_by_digest_is_part_of_the_identity() -> None:
    """``baseImageDigests`` as the build uses it: another digest of the release's tag is another vLLM build."""
    tag_only = image_compile_identity(REPO, VLLM_IMAGE, {})
    pinned = image_compile_identity(REPO, VLLM_IMAGE, {BASE: DIGEST})
    repinned = image_compile_identity(REPO, VLLM_IMAGE, {BASE: "sha256:" + "f" * 64})
    assert len({tag_only, pinned, repinned}) == 3
    assert pinned == compile_identity((f"{BASE}@{DIGEST}",), {p: (REPO / p).read_bytes() for p in VLLM_IMAGE.inputs})


def test_an_image_without_a_base_is_refused() -> None:
    with pytest.raises(ValueError, match="needs the base image"):
        compile_identity((), {"Dockerfile": b"FROM scratch\n"})
