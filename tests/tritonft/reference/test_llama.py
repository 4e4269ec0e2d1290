"""The Llama family's CPU forward (:mod:`tritonft.reference.llama`) against transformers' own numbers.

The goldens (``golden/llama/<variant>.json``) were written once by ``scripts/make_llama_reference_goldens.py`` with
torch + transformers (the vLLM engine's environment) from the seeded checkpoints of
:mod:`tests.tritonft.reference.llama_checkpoints`, rebuilt here from the same seeds (their hash is checked). The
tolerance: :data:`LOGIT_TOLERANCE` on every compared logit. Both sides compute in float32 from the same float32
weights; what differs is only the order of the summations (BLAS vs torch kernels), worth a few 1e-6 on logits of
magnitude ~10 over two layers; 1e-4 is 10-100 x that and 100 x below the judge's smallest tolerance (0.1 nats).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.tritonft.engines.vllm.checkpoints import directory_sha256
from tests.tritonft.reference.llama_checkpoints import (
    PROMPTS,
    REFERENCE_VARIANTS,
    STEPS,
    ReferenceVariant,
    golden,
    write,
)
from tritonft.errors import UserError
from tritonft.reference import layers
from tritonft.reference.judge import follow
from tritonft.reference.llama import Llama, LlamaConfig, load_llama, prompt_tokenizer
from tritonft.repo.tokenization import load_tokenizer

LOGIT_TOLERANCE = 1e-4
"""Largest difference allowed between a logit of the reference and transformers' (float32 both)."""

NAMES = [v.name for v in REFERENCE_VARIANTS]


@pytest.fixture(scope="module")
def directories(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("llama-goldens")
    return {v.name: write(v, root / v.name) for v in REFERENCE_VARIANTS}


@pytest.fixture(scope="module")
def models(directories: dict[str, Path]) -> dict[str, Llama]:
    return {name: load_llama(path) for name, path in directories.items()}


def variant(name: str) -> ReferenceVariant:
    return next(v for v in REFERENCE_VARIANTS if v.name == name)


def cases(name: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = golden(name)["cases"]
    return found


@pytest.mark.parametrize("name", NAMES)
def test_the_checkpoints_are_the_ones_the_goldens_were_made_from(name: str, directories: dict[str, Path]) -> None:
    assert directory_sha256(directories[name]) == golden(name)["checkpoint_sha256"]


@pytest.mark.parametrize("name", NAMES)
def test_the_goldens_cover_the_judges_prompts_and_steps(name: str) -> None:
    assert [c["prompt"] for c in cases(name)] == list(PROMPTS)
    assert golden(name)["steps"] == STEPS


@pytest.mark.parametrize("name", NAMES)
def test_the_prompts_are_tokenized_as_transformers_tokenizes_them(
    name: str, directories: dict[str, Path], models: dict[str, Llama]
) -> None:
    # transformers 5 (so vLLM) tokenizes a qwen2 model with its Qwen2Tokenizer, not the file's pre-tokenizer: the
    # tiny Qwen2s' files say byte-level only, so this also checks that the reference follows transformers there.
    tokenizer = prompt_tokenizer(directories[name], models[name].config.model_type)

    for case in cases(name):
        assert tokenizer.encode(case["prompt"], add_special_tokens=True) == case["prompt_ids"]


@pytest.mark.parametrize("name", NAMES)
def test_the_logits_after_each_prompt_equal_transformers(name: str, models: dict[str, Llama]) -> None:
    for case in cases(name):
        ours = models[name].logits(case["prompt_ids"])[-1]

        np.testing.assert_allclose(ours, np.asarray(case["last_prompt_logits"]), rtol=0, atol=LOGIT_TOLERANCE)


@pytest.mark.parametrize("name", NAMES)
def test_the_top_logits_along_the_greedy_answer_equal_transformers(name: str, models: dict[str, Llama]) -> None:
    for case in cases(name):
        ids = case["prompt_ids"] + case["output_ids"]
        logits = models[name].logits(ids)[len(case["prompt_ids"]) - 1 :]
        top = np.asarray(case["top_ids"])

        chosen = np.take_along_axis(logits, top, axis=-1)
        np.testing.assert_allclose(chosen, np.asarray(case["top_logits"]), rtol=0, atol=LOGIT_TOLERANCE)
        assert (np.argmax(logits, axis=-1) == top[:, 0]).all()


@pytest.mark.parametrize("name", NAMES)
def test_the_greedy_path_with_the_kv_cache_is_transformers_generate(
    name: str, models: dict[str, Llama], directories: dict[str, Path]
) -> None:
    model = models[name]
    tokenizer = load_tokenizer(directories[name])
    for case in cases(name):
        followed = follow(model, tokenizer, case["prompt"], case["prompt_ids"], steps=STEPS, tolerance=0.1)

        ended = bool(case["output_ids"]) and case["output_ids"][-1] in model.end_ids
        expected = case["output_ids"][:-1] if ended else case["output_ids"]
        text = tokenizer.decode(expected)
        assert followed.answer == (text if ended else text.rstrip("\ufffd"))  # a prefix: no half character at its end
        assert followed.ended is ended


def test_the_llama3_golden_exercises_its_rope_scaling(models: dict[str, Llama]) -> None:
    model = models["tiny-llama3"]
    assert model.config.rope_scaling is not None and model.config.rope_scaling["rope_type"] == "llama3"
    unscaled = layers.rope_inv_freq(model.config.head_dim, model.config.rope_theta)
    assert (model.inv_freq < unscaled).any() and (model.inv_freq == unscaled).any()
    plain = Llama(replace(model.config, rope_scaling=None), _tensors(model))  # the same weights, rotary unscaled
    case = cases("tiny-llama3")[0]
    differs = np.abs(plain.logits(case["prompt_ids"])[-1] - np.asarray(case["last_prompt_logits"])).max()
    assert differs > 100 * LOGIT_TOLERANCE, "without the llama3 scaling the golden would not be met"


def test_tied_embeddings_make_the_embedding_the_output_head(models: dict[str, Llama]) -> None:
    model = models["tiny-qwen2-tied"]
    assert model.config.tied and model.head is model.embed


def test_bf16_shards_are_read_through_their_index(directories: dict[str, Path]) -> None:
    directory = directories["tiny-llama3"]
    assert (directory / "model.safetensors.index.json").is_file()
    assert json.loads((directory / "config.json").read_text())["torch_dtype"] == "bfloat16"


def test_a_checkpoint_lacking_a_tensor_is_refused_naming_it(models: dict[str, Llama]) -> None:
    model = models["tiny-llama"]
    tensors = _tensors(model)
    del tensors["model.layers.1.mlp.up_proj.weight"]

    with pytest.raises(
        UserError, match=r"lacks 1 tensor\(s\) of a llama model: model\.layers\.1\.mlp\.up_proj\.weight"
    ):
        Llama(model.config, tensors)


def test_a_rope_scaling_the_reference_does_not_compute_is_refused() -> None:
    with pytest.raises(ValueError, match="rope scaling 'yarn' is not implemented"):
        layers.rope_inv_freq(32, 10000.0, {"rope_type": "yarn", "factor": 4.0})


def test_a_model_type_outside_the_llama_family_is_refused() -> None:
    with pytest.raises(UserError, match="model_type 'gemma'"):
        LlamaConfig.from_dict({"model_type": "gemma"})


def test_the_generation_configs_end_ids_are_where_the_answer_ends() -> None:
    raw = {
        "model_type": "llama",
        "hidden_size": 64,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "intermediate_size": 128,
        "vocab_size": 10,
        "eos_token_id": 1,
    }

    assert LlamaConfig.from_dict(raw, {"eos_token_id": [7, 8, 9]}).eos_ids == (7, 8, 9)
    assert LlamaConfig.from_dict(raw, None).eos_ids == (1,)


def _tensors(model: Llama) -> dict[str, np.ndarray]:
    """``model``'s weights by transformers' names (what :func:`load_llama` read)."""
    tensors = {"model.embed_tokens.weight": model.embed, "model.norm.weight": model.norm}
    if not model.config.tied:
        tensors["lm_head.weight"] = model.head
    for i, layer in enumerate(model.layers):
        p = f"model.layers.{i}."
        named = {
            "input_layernorm.weight": layer.input_norm,
            "self_attn.q_proj.weight": layer.q,
            "self_attn.k_proj.weight": layer.k,
            "self_attn.v_proj.weight": layer.v,
            "self_attn.q_proj.bias": layer.q_bias,
            "self_attn.k_proj.bias": layer.k_bias,
            "self_attn.v_proj.bias": layer.v_bias,
            "self_attn.o_proj.weight": layer.o,
            "post_attention_layernorm.weight": layer.post_norm,
            "mlp.gate_proj.weight": layer.gate,
            "mlp.up_proj.weight": layer.up,
            "mlp.down_proj.weight": layer.down,
        }
        tensors |= {p + k: v for k, v in named.items() if v is not None}
    return tensors
