"""vLLM behind the engine seam: a ``family: llama`` spec, its repository from the spec, its server image."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from tests.tritonft.engines.vllm.test_rules import LLAMA_3_1_8B
from tritonft.engines import VLLM, engine_for
from tritonft.engines.base import ConvertRequest
from tritonft.engines.vllm.engine import checkpoint_of, model_path
from tritonft.engines.vllm.rules import read_checkpoint
from tritonft.errors import UserError
from tritonft.spec import Architecture, Family, ModelSpec, VllmSpec, WeightDType

LLAMA_8B = ModelSpec(
    name="llama-8b",
    family=Family.LLAMA,
    hf_repo="meta-llama/Llama-3.1-8B-Instruct",
    revision="0e9e39f249a16976918f6564b8830bc894c89659",
    architecture=Architecture(
        d_model=4096,
        num_heads=32,
        num_layers=32,
        d_ff=14336,
        vocab_size=128256,
        max_positions=131072,
        gated_ffn=True,
        tied_embeddings=False,
    ),
    weight_dtype=WeightDType.FP16,
    tensor_parallel=2,
    vllm=VllmSpec(architecture="LlamaForCausalLM", num_kv_heads=8, max_model_len=8192, max_num_seqs=32),
)


def test_a_llama_spec_counts_the_same_parameters_as_its_config_json() -> None:
    assert LLAMA_8B.parameters == read_checkpoint(LLAMA_3_1_8B).parameters == 8_030_261_248


def test_the_spec_states_the_checkpoint_the_config_json_describes() -> None:
    assert checkpoint_of(LLAMA_8B) == replace(read_checkpoint(LLAMA_3_1_8B), model_type="")


def test_a_llama_spec_round_trips_through_json_with_its_vllm_block() -> None:
    assert ModelSpec.from_json(LLAMA_8B.to_json()) == LLAMA_8B
    assert json.loads(LLAMA_8B.to_json())["vllm"]["num_kv_heads"] == 8


def test_the_other_families_json_has_no_vllm_key() -> None:
    from tests.components.fixtures import T5_SMALL

    assert "vllm" not in json.loads(T5_SMALL.to_json())


def test_a_llama_spec_without_its_vllm_block_is_inconsistent() -> None:
    with pytest.raises(ValueError, match="vllm: required for family llama"):
        replace(LLAMA_8B, vllm=None)


def test_a_vllm_block_on_another_family_is_inconsistent() -> None:
    from tests.components.fixtures import T5_SMALL

    with pytest.raises(ValueError, match="vllm: only for family llama"):
        replace(T5_SMALL, vllm=VllmSpec())


def test_the_llama_family_is_no_fastertransformer_family() -> None:
    assert Family.LLAMA.is_vllm and not Family.LLAMA.is_fastertransformer and not Family.LLAMA.is_encoder
    with pytest.raises(ValueError, match="not served by FasterTransformer"):
        _ = Family.LLAMA.ft_model_type


def test_the_repository_reads_the_downloaded_files_on_the_store() -> None:
    files = engine_for(Family.LLAMA).repository_files(LLAMA_8B, model_root="/models")
    args = json.loads(files["llama-8b/1/model.json"])
    assert args["model"] == model_path(LLAMA_8B) == f"/models/hf/llama-8b/{LLAMA_8B.revision}"
    assert (args["tensor_parallel_size"], args["max_model_len"], args["max_num_seqs"]) == (2, 8192, 32)


def test_writing_the_repository_writes_what_synth_shows(tmp_path: Path) -> None:
    written = VLLM.write_repository(LLAMA_8B, tmp_path)
    shown = VLLM.repository_files(LLAMA_8B)
    assert written.models == ("llama-8b",)
    assert {path: (tmp_path / path).read_bytes() for path in written.files} == shown


def test_a_vllm_model_is_not_converted(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="a vLLM model is not converted"):
        VLLM.convert(ConvertRequest(input_dir=tmp_path, output_dir=tmp_path / "out", tp=1, dtype=WeightDType.FP16))


def test_the_store_holds_the_weights_at_the_checkpoints_dtype() -> None:
    assert VLLM.converted_bytes(LLAMA_8B) == 8_030_261_248 * 2


def test_the_server_image_is_ngcs_vllm_release() -> None:
    image = VLLM.server_image
    dockerfile = (Path(__file__).parents[4] / image.dockerfile).read_text()
    assert "ARG BASE_IMAGE=nvcr.io/nvidia/tritonserver:${TRITON_VERSION}-vllm-python-py3" in dockerfile
    assert "FROM ${BASE_IMAGE}" in dockerfile
    assert image.build_args == {"TRITON_VERSION": "26.08"}


def test_the_download_job_fetches_what_vllm_loads_from_a_llama_3_repository() -> None:
    from tritonft.download import select_files

    listing = [
        ".gitattributes",
        "LICENSE",
        "README.md",
        "USE_POLICY.md",
        "config.json",
        "generation_config.json",
        *(f"model-0000{i}-of-00004.safetensors" for i in range(1, 5)),
        "model.safetensors.index.json",
        "original/consolidated.00.pth",
        "original/params.json",
        "original/tokenizer.model",
        "special_tokens_map.json",
        "tokenizer.json",
        "tokenizer_config.json",
    ]  # meta-llama/Llama-3.1-8B-Instruct's files
    assert select_files(listing) == [
        "config.json",
        "generation_config.json",
        *(f"model-0000{i}-of-00004.safetensors" for i in range(1, 5)),
        "model.safetensors.index.json",
        "special_tokens_map.json",
        "tokenizer.json",
        "tokenizer_config.json",
    ]
