"""The vLLM engine's up-front rules: what vLLM 0.27.1 would refuse at start-up, refused before any resource."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from tests.tritonft.engines.vllm.checkpoints import VARIANTS, config
from tritonft.engines.vllm.rules import (
    ARCHITECTURES,
    Checkpoint,
    Gpu,
    VllmOptions,
    derived_max_len,
    problems,
    read_checkpoint,
)

GIB = 1024**3
A10G = Gpu(memory_bytes=24 * GIB, capability=(8, 6))
T4 = Gpu(memory_bytes=16 * GIB, capability=(7, 5))

LLAMA_3_1_8B: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
    "rope_scaling": {"factor": 8.0, "rope_type": "llama3", "original_max_position_embeddings": 8192},
    "torch_dtype": "bfloat16",
    "tie_word_embeddings": False,
}
"""meta-llama/Llama-3.1-8B-Instruct's config.json (the sizing keys)."""


def llama() -> Checkpoint:
    return read_checkpoint(LLAMA_3_1_8B)


def test_llama_3_1_8b_has_8b_parameters() -> None:
    assert llama().parameters == 8_030_261_248


def test_the_tiny_checkpoints_are_served_architectures() -> None:
    for variant in VARIANTS:
        checkpoint = read_checkpoint(config(variant, 512))
        assert checkpoint.architecture == variant.architectures
        assert checkpoint.num_kv_heads < checkpoint.num_heads  # grouped-query attention


def test_an_architecture_vllm_does_not_serve_here_is_refused_with_the_served_list() -> None:
    with pytest.raises(ValueError, match=r"architectures \['T5ForConditionalGeneration'\].*LlamaForCausalLM"):
        read_checkpoint({**LLAMA_3_1_8B, "architectures": ["T5ForConditionalGeneration"]})


def test_every_served_architecture_cites_vllms_registry() -> None:
    assert all(where.startswith("model_executor/models/registry.py:") for where in ARCHITECTURES.values())


def test_llama3_rope_positions_are_not_scaled_again() -> None:
    assert derived_max_len(LLAMA_3_1_8B) == 131072


def test_linear_rope_scaling_multiplies_the_positions() -> None:
    scaled = {**LLAMA_3_1_8B, "max_position_embeddings": 4096, "rope_scaling": {"type": "linear", "factor": 2.0}}
    assert derived_max_len(scaled) == 8192


def test_yarn_scales_the_original_positions() -> None:
    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}
    assert derived_max_len({**LLAMA_3_1_8B, "max_position_embeddings": 65536, "rope_scaling": yarn}) == 131072


def test_the_smallest_position_key_is_the_length() -> None:
    assert derived_max_len({**LLAMA_3_1_8B, "rope_scaling": None, "seq_len": 4096}) == 4096


def test_the_tokenizers_model_max_length_caps_the_positions() -> None:
    assert derived_max_len(LLAMA_3_1_8B, {"model_max_length": 8192}) == 8192


def test_a_fitting_model_has_no_problems() -> None:
    options = VllmOptions(max_model_len=8192, tensor_parallel_size=1, gpu_memory_utilization=0.9)
    assert problems(options, llama(), A10G, key="models[2].vllm") == []


def test_tp_must_divide_the_attention_heads() -> None:
    found = problems(VllmOptions(tensor_parallel_size=3, max_model_len=8192), llama(), A10G, key="models[2].vllm")
    assert any(p.startswith("models[2].vllm.tensorParallelSize: 3 does not divide the model's 32") for p in found)


def test_tp_and_kv_heads_must_divide_one_another() -> None:
    odd = replace(llama(), num_heads=24, num_kv_heads=6)
    found = problems(VllmOptions(tensor_parallel_size=4, max_model_len=4096), odd, A10G)
    assert found == [
        "vllm.tensorParallelSize: 4 and the model's 6 KV heads: one must divide the other "
        "(vllm model_executor/models/llama.py:140-153)"
    ]


def test_more_gpus_than_kv_heads_replicates_them() -> None:
    few_kv = replace(llama(), num_kv_heads=2)
    assert problems(VllmOptions(tensor_parallel_size=4, max_model_len=4096), few_kv, A10G) == []


def test_max_model_len_beyond_the_positions_is_refused() -> None:
    found = problems(VllmOptions(max_model_len=200_000), llama(), None)
    assert found == [
        "vllm.maxModelLen: 200000 exceeds the model's 131072 positions (RoPE scaling included; vllm "
        "config/model.py:2355-2380); lower it or drop it to use the model's own"
    ]


@pytest.mark.parametrize("fraction", [0.0, 1.5, -0.1])
def test_gpu_memory_utilization_must_be_a_fraction(fraction: float) -> None:
    found = problems(VllmOptions(gpu_memory_utilization=fraction, max_model_len=4096), llama(), None)
    assert found == [f"vllm.gpuMemoryUtilization: {fraction} must be in (0, 1] (vllm config/cache.py:68)"]


def test_max_num_seqs_must_be_positive() -> None:
    found = problems(VllmOptions(max_num_seqs=0, max_model_len=4096), llama(), None)
    assert found == ["vllm.maxNumSeqs: 0 must be at least 1 (vllm config/scheduler.py:63)"]


def test_an_unknown_dtype_is_refused_with_vllms_list() -> None:
    found = problems(VllmOptions(dtype="int4", max_model_len=4096), llama(), None)
    assert found == [
        "vllm.dtype: 'int4' is not one of auto, half, float16, bfloat16, float, float32 (vllm config/model.py:99)"
    ]


def test_bfloat16_is_refused_on_a_gpu_without_it() -> None:
    found = problems(VllmOptions(max_model_len=4096), llama(), T4)  # auto: the checkpoint's bfloat16
    assert found[0].startswith("vllm.dtype: bfloat16 needs a GPU of compute capability 8.0 or more, this node's is 7.5")


def test_float16_on_two_such_gpus_is_accepted() -> None:
    options = VllmOptions(max_model_len=4096, dtype="float16", tensor_parallel_size=2)
    assert problems(options, llama(), T4) == []


def test_8b_weights_alone_overflow_one_16_gib_gpu() -> None:
    found = problems(VllmOptions(max_model_len=4096, dtype="float16"), llama(), T4)
    assert len(found) == 1
    assert found[0].startswith("vllm: weights per GPU (14.96 GiB at float16, TP 1)")


def test_the_full_context_kv_cache_must_fit_next_to_the_weights() -> None:
    found = problems(VllmOptions(), llama(), A10G)  # 131072 tokens x 128 KiB = 16 GiB of KV + 15 GiB of weights
    assert len(found) == 1
    assert "plus the KV cache of one 131072-token request (16.00 GiB)" in found[0]
    assert "raise tensorParallelSize or gpuMemoryUtilization, or lower maxModelLen" in found[0]


def test_two_gpus_hold_the_full_context() -> None:
    assert problems(VllmOptions(tensor_parallel_size=2), llama(), A10G) == []
