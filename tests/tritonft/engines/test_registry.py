"""The engine seam: every family has exactly one engine, and the callers reach FasterTransformer and ONNX Runtime only
through it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.components.fixtures import T5_SMALL
from tritonft.engines import ENGINES, FASTERTRANSFORMER, ONNXRUNTIME, VLLM, engine_for, engine_for_checkpoint
from tritonft.engines.base import ServingEngine
from tritonft.errors import UserError
from tritonft.repo.render import render_repository_files
from tritonft.spec import Family


def test_every_family_is_served_by_exactly_one_engine() -> None:
    owners = {family: [e.name for e in ENGINES if family in e.families] for family in Family}
    assert {family: len(names) for family, names in owners.items()} == dict.fromkeys(Family, 1)


@pytest.mark.parametrize("family", [Family.T5, Family.GPT2, Family.GPTJ])
def test_the_generators_are_served_by_fastertransformer(family: Family) -> None:
    assert engine_for(family) is FASTERTRANSFORMER


def test_the_llama_family_is_served_by_vllm() -> None:
    assert engine_for(Family.LLAMA) is VLLM and engine_for("llama") is VLLM


@pytest.mark.parametrize("model_type", ["llama", "mistral", "qwen2", "qwen3", "gemma"])
def test_llama_family_checkpoints_go_to_vllm(tmp_path: Path, model_type: str) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"model_type": model_type}))
    assert engine_for_checkpoint(tmp_path) is VLLM


def test_the_encoders_are_served_by_onnxruntime() -> None:
    assert engine_for(Family.BERT) is ONNXRUNTIME and engine_for("bert") is ONNXRUNTIME


def test_an_unknown_family_names_the_families_served() -> None:
    with pytest.raises(
        UserError,
        match="no serving engine for model family 'roberta'; the families served are bert, gpt2, gptj, llama, t5",
    ):
        engine_for("roberta")


@pytest.mark.parametrize(
    ("model_type", "family"), [("t5", Family.T5), ("mt5", Family.T5), ("gptj", Family.GPTJ), ("bert", Family.BERT)]
)
def test_a_checkpoint_goes_to_the_engine_of_its_model_type(tmp_path: Path, model_type: str, family: Family) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"model_type": model_type}))
    engine = engine_for_checkpoint(tmp_path)
    assert family in engine.families and engine.model_types[model_type] is family


def test_a_checkpoint_of_an_unknown_model_type_lists_every_engine_model_type(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "mamba"}))
    with pytest.raises(UserError) as err:
        engine_for_checkpoint(tmp_path)
    known = [t for e in ENGINES for t in e.model_types]
    assert "model_type = 'mamba' is not a supported family" in str(err.value)
    assert all(t in str(err.value) for t in known) and "--family" in str(err.value)


def test_a_requested_family_wins_over_config_json(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("not json")  # the converter reports the file; the choice needs no read
    assert engine_for_checkpoint(tmp_path, Family.GPT2) is FASTERTRANSFORMER


def test_the_engine_renders_the_repository_its_package_renders() -> None:
    assert FASTERTRANSFORMER.repository_files(T5_SMALL, "/models") == render_repository_files(
        T5_SMALL, model_root="/models"
    )


@pytest.mark.parametrize("engine", ENGINES, ids=lambda e: e.name)
def test_the_server_image_inputs_include_its_dockerfile_and_exist(engine: ServingEngine) -> None:
    image = engine.server_image
    root = Path(__file__).resolve().parents[3]
    assert image.dockerfile in image.inputs
    assert all((root / path).is_file() for path in image.inputs)
    assert "TRITON_VERSION" in image.build_args


def test_the_fastertransformer_image_is_built_from_the_pinned_ft_commits() -> None:
    assert set(FASTERTRANSFORMER.server_image.build_args) == {
        "TRITON_VERSION",
        "FT_BACKEND_COMMIT",
        "FT_COMMIT",
        "CUDA_ARCHS",
    }


def test_encoders_run_on_their_own_current_triton_not_fastertransformers_23_04() -> None:
    image = ONNXRUNTIME.server_image
    assert image.dockerfile == "images/triton-onnx/Dockerfile"
    assert image.dockerfile != FASTERTRANSFORMER.server_image.dockerfile
    year, month = (int(part) for part in image.build_args["TRITON_VERSION"].split("."))
    assert (year, month) >= (25, 7), "NVIDIA's fixes for CVE-2025-23310/23311/23319/23320/23334 are in 25.07"


def test_the_encoders_image_keeps_only_the_onnxruntime_and_python_backends() -> None:
    root = Path(__file__).resolve().parents[3]
    text = (root / ONNXRUNTIME.server_image.dockerfile).read_text()
    assert "! -name onnxruntime ! -name python -exec rm -rf {} +" in text
    assert "FROM ${BASE_IMAGE}" in text and "ARG BASE_IMAGE=nvcr.io/nvidia/tritonserver:${TRITON_VERSION}-py3" in text
