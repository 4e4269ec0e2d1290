"""The download Job's weights check (``tritonft.engines.vllm.weights``): on a seeded random Llama checkpoint as
downloaded, headers only; whole weights of the stated model pass, and each way a download can be cut short or be
another model is named with the file or the tensor and what the spec says."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from tests.tritonft.engines.vllm.checkpoints import variant, write
from tritonft.engines.vllm.rules import Checkpoint, read_checkpoint
from tritonft.engines.vllm.weights import EMBEDDING, K_PROJ, weights_problems


@pytest.fixture(scope="module")
def downloaded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write(variant("tiny-llama"), tmp_path_factory.mktemp("hf") / "tiny-llama")


@pytest.fixture(scope="module")
def stated(downloaded: Path) -> Checkpoint:
    """The facts a stack entry states for exactly this checkpoint (its config.json, as the Job reads it)."""
    return read_checkpoint(json.loads((downloaded / "config.json").read_text()))


def copy(downloaded: Path, tmp_path: Path) -> Path:
    target = tmp_path / "copy"
    shutil.copytree(downloaded, target)
    return target


def test_the_downloaded_weights_of_the_stated_model_pass(downloaded: Path, stated: Checkpoint) -> None:
    assert stated.torch_dtype == "float32" and stated.num_kv_heads == 2
    assert weights_problems(downloaded, stated) == []


def test_a_weight_file_cut_short_is_named_with_the_fix(downloaded: Path, stated: Checkpoint, tmp_path: Path) -> None:
    directory = copy(downloaded, tmp_path)
    weights = directory / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    (problem,) = weights_problems(directory, stated)
    assert problem.startswith(f"{weights} is truncated or corrupt; re-download it")


def test_a_directory_without_weights_is_named(downloaded: Path, stated: Checkpoint, tmp_path: Path) -> None:
    directory = copy(downloaded, tmp_path)
    (directory / "model.safetensors").unlink()
    (problem,) = weights_problems(directory, stated)
    assert f"{directory} has no model.safetensors" in problem


def test_a_shard_index_naming_a_tensor_its_shard_lacks_is_named(
    downloaded: Path, stated: Checkpoint, tmp_path: Path
) -> None:
    directory = copy(downloaded, tmp_path)
    index = {"weight_map": {EMBEDDING: "model.safetensors", "model.extra.weight": "model.safetensors"}}
    (directory / "model.safetensors.index.json").write_text(json.dumps(index))
    (problem,) = weights_problems(directory, stated)
    assert "model.extra.weight: listed in the index for model.safetensors but not stored there" in problem


def test_another_vocabulary_is_named_by_the_embedding(downloaded: Path, stated: Checkpoint) -> None:
    other = replace(stated, vocab_size=stated.vocab_size + 1)
    assert weights_problems(downloaded, other) == [
        f"weights: {EMBEDDING} is [{stated.vocab_size}, 128], the spec says [vocabSize, dModel] = "
        f"[{stated.vocab_size + 1}, 128]"
    ]


def test_another_layer_count_is_named(downloaded: Path, stated: Checkpoint) -> None:
    assert weights_problems(downloaded, replace(stated, num_layers=3)) == [
        "weights: decoder layers 0..1 (2), the spec says 3 (0..2)"
    ]


def test_other_kv_heads_are_named_by_the_k_projection(downloaded: Path, stated: Checkpoint) -> None:
    assert weights_problems(downloaded, replace(stated, num_kv_heads=4)) == [
        f"weights: {K_PROJ} is [64, 128], the spec says [numKvHeads x headDim, dModel] = [128, 128]"
    ]


def test_another_stored_dtype_than_the_stack_counted_is_named(downloaded: Path, stated: Checkpoint) -> None:
    (problem,) = weights_problems(downloaded, replace(stated, torch_dtype="bfloat16"))
    assert problem.startswith("weights: stored as F32, the spec says bfloat16 (BF16)")
