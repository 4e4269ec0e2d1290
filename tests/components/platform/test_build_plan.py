"""The builds the deploy workflow runs once: every image a stack can run, each base pinned by digest."""

from __future__ import annotations

from pathlib import Path

import pytest

from components.platform.base_images import REQUIRE_PINNED_BASE
from components.platform.build_plan import build_plan, main, unpinned_base_refs
from tests.components.platform.aws.helpers import REPO_ROOT
from tritonft.errors import UserError

DIGEST = "sha256:" + "a" * 64


def pins_for_every_base() -> dict[str, str]:
    return dict.fromkeys(unpinned_base_refs(REPO_ROOT), DIGEST)


def test_the_plan_builds_the_server_tools_and_every_other_engines_server_image() -> None:
    plan = build_plan(REPO_ROOT)
    assert [(p["name"], p["engine"]) for p in plan] == [
        ("server", "fastertransformer"),
        ("tools", None),
        ("server-onnxruntime", "onnxruntime"),
        ("server-vllm", "vllm"),
    ]
    assert {p["name"]: p["dockerfile"] for p in plan}["server-vllm"] == "images/triton-vllm/Dockerfile"


def test_the_bases_left_a_tag_are_listed_once_each() -> None:
    refs = unpinned_base_refs(REPO_ROOT)
    assert "nvcr.io/nvidia/tritonserver:26.08-vllm-python-py3" in refs
    assert "nvcr.io/nvidia/tritonserver:23.04-py3" in refs
    assert len(refs) == len(set(refs)) and all("@sha256:" not in ref for ref in refs)


def test_with_base_digests_every_build_pins_its_bases_and_refuses_an_unpinned_one() -> None:
    plan = build_plan(REPO_ROOT, base_digests=pins_for_every_base())
    for entry in plan:
        args = entry["buildArgs"]
        assert args[REQUIRE_PINNED_BASE] == "true", entry["name"]
    vllm = next(p for p in plan if p["name"] == "server-vllm")
    assert vllm["buildArgs"]["BASE_IMAGE"] == f"nvcr.io/nvidia/tritonserver:26.08-vllm-python-py3@{DIGEST}"


def test_a_base_the_digests_leave_a_tag_alone_stops_the_plan_naming_it() -> None:
    digests = pins_for_every_base()
    del digests["nvcr.io/nvidia/tritonserver:26.08-vllm-python-py3"]
    with pytest.raises(UserError, match=r"server-vllm .*26\.08-vllm-python-py3, which the base digests do not pin"):
        build_plan(REPO_ROOT, base_digests=digests)


def test_pinned_bases_change_the_content_tag() -> None:
    plain = {p["name"]: p["tag"] for p in build_plan(REPO_ROOT)}
    pinned = {p["name"]: p["tag"] for p in build_plan(REPO_ROOT, base_digests=pins_for_every_base())}
    assert all(plain[name] != pinned[name] for name in plain)


def test_the_command_exits_2_with_the_message_on_an_unpinned_base(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "digests.json").write_text("{}")
    assert main([str(REPO_ROOT), "--base-digests", str(tmp_path / "digests.json")]) == 2
    assert "which the base digests do not pin" in capsys.readouterr().err
