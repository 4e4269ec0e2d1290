"""`family: llama` in a stack: the catalog's Llama-family models, the `vllm` block, and vLLM's own rules on the stack's
GPU node, each bad value refused with its key path and the fix before anything is created."""

from __future__ import annotations

import json
from typing import Any

import pytest

from components.settings import load_settings
from components.settings.catalog import KNOWN_VLLM
from components.settings.facts import ModelFacts
from components.settings.vllm_rules import STATED_FACTS, checkpoint, options
from tests.components.settings.test_validation import LLAMA8B, QWEN7B, T5_SMALL, as_cli, kubernetes_stack, problems_of
from tritonft.engines.vllm.engine import ENGINE, checkpoint_of, options_of
from tritonft.engines.vllm.rules import read_checkpoint
from tritonft.spec import DataType, Family, parameter_count

CUSTOM_ARCH = {"dModel": 3072, "numHeads": 24, "numLayers": 16, "dFf": 8192, "vocabSize": 32000, "maxPositions": 4096}
CUSTOM_FACTS: dict[str, Any] = {
    "architecture": "MistralForCausalLM",
    "numKvHeads": 12,
    "qkvBias": False,
    "checkpointDtype": "float16",
}
CUSTOM = {
    "name": "custom",
    "hfRepo": "acme/tiny-llama",
    "revision": "0123456789abcdef0123456789abcdef01234567",
    "family": "llama",
    "architecture": CUSTOM_ARCH,
    "vllm": CUSTOM_FACTS,
}

# The checkpoints' config.json values as published (the keys vLLM's rules read), at the revisions the catalog cites.
PUBLISHED_CONFIGS: dict[str, dict[str, Any]] = {
    "meta-llama/Llama-3.1-8B-Instruct": {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_attention_heads": 32,
        "num_hidden_layers": 32,
        "num_key_value_heads": 8,
        "vocab_size": 128256,
        "max_position_embeddings": 131072,
        "rope_scaling": {
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
            "rope_type": "llama3",
        },
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
    },
    "Qwen/Qwen2.5-7B-Instruct": {
        "architectures": ["Qwen2ForCausalLM"],
        "model_type": "qwen2",
        "hidden_size": 3584,
        "intermediate_size": 18944,
        "num_attention_heads": 28,
        "num_hidden_layers": 28,
        "num_key_value_heads": 4,
        "vocab_size": 152064,
        "max_position_embeddings": 32768,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
    },
    "Qwen/Qwen2.5-0.5B-Instruct": {
        "architectures": ["Qwen2ForCausalLM"],
        "model_type": "qwen2",
        "hidden_size": 896,
        "intermediate_size": 4864,
        "num_attention_heads": 14,
        "num_hidden_layers": 24,
        "num_key_value_heads": 2,
        "vocab_size": 151936,
        "max_position_embeddings": 32768,
        "tie_word_embeddings": True,
        "torch_dtype": "bfloat16",
    },
}
TOKENIZER_MAX = {"meta-llama/Llama-3.1-8B-Instruct": 131072, "Qwen/Qwen2.5-7B-Instruct": 131072}


def load(values: dict[str, Any], secret_keys: tuple[str, ...] = ()) -> Any:
    return load_settings(as_cli(values), project="triton-ft", stack="test", secret_keys=secret_keys)


@pytest.mark.parametrize("repo", list(KNOWN_VLLM))
def test_catalog_entry_is_what_vllm_reads_from_the_published_config(repo: str) -> None:
    published = read_checkpoint(PUBLISHED_CONFIGS[repo], {"model_max_length": TOKENIZER_MAX.get(repo, 131072)})
    entry = KNOWN_VLLM[repo]
    catalog = (Family.LLAMA, entry.architecture)
    facts = ModelFacts(0, {"hfRepo": repo}, frozenset({"hfRepo"}), catalog, entry.architecture)
    stated = checkpoint(facts, entry.facts)
    assert stated is not None
    assert stated.parameters == published.parameters
    assert (stated.max_positions, stated.num_kv_heads, stated.head_dim) == (
        published.max_positions,
        published.num_kv_heads,
        published.head_dim,
    )
    assert (stated.architecture, stated.qkv_bias, stated.torch_dtype) == (
        published.architecture,
        published.qkv_bias,
        published.torch_dtype,
    )


def test_catalog_parameter_counts_match_the_published_sizes() -> None:
    # Model cards: Llama 3.1 8B 8.03B, Qwen2.5-7B 7.61B, Qwen2.5-0.5B 0.49B parameters.
    sizes = {"meta-llama/Llama-3.1-8B-Instruct": 8.03e9, "Qwen/Qwen2.5-7B-Instruct": 7.61e9}
    sizes["Qwen/Qwen2.5-0.5B-Instruct"] = 0.49e9
    for repo, size in sizes.items():
        entry = KNOWN_VLLM[repo]
        assert parameter_count(Family.LLAMA, entry.architecture, vllm=entry.facts) == pytest.approx(size, rel=0.01)


def test_a_catalog_model_named_by_repo_and_revision_is_served_by_vllm() -> None:
    (spec,) = load(kubernetes_stack(models=[QWEN7B])).models
    assert spec.family is Family.LLAMA and spec.vllm is not None
    assert (spec.vllm.architecture, spec.vllm.num_kv_heads, spec.vllm.qkv_bias) == ("Qwen2ForCausalLM", 4, True)
    assert spec.decoupled is True
    assert spec.data_type is DataType.BF16


def test_the_vllm_block_sets_the_engine_arguments_in_model_json() -> None:
    block = {"maxModelLen": 8192, "gpuMemoryUtilization": 0.85, "maxNumSeqs": 32, "enablePrefixCaching": False}
    (spec,) = load(kubernetes_stack(gpusPerNode=2, models=[QWEN7B | {"tensorParallel": 2, "vllm": block}])).models
    files = ENGINE.repository_files(spec)
    args = json.loads(files["qwen/1/model.json"])
    assert args["max_model_len"] == 8192
    assert args["gpu_memory_utilization"] == 0.85
    assert args["max_num_seqs"] == 32
    assert args["enable_prefix_caching"] is False
    assert args["tensor_parallel_size"] == 2


def test_unset_max_model_len_is_the_models_own_as_vllm_derives_it() -> None:
    (spec,) = load(kubernetes_stack(gpuType="H100", models=[LLAMA8B], hfToken="x"), ("hfToken",)).models
    assert spec.vllm is not None and spec.vllm.max_model_len is None
    assert checkpoint_of(spec).max_positions == 131072  # llama3 RoPE: positions already scaled, not x 8


def test_a_stringified_vllm_block_from_pulumi_config_set_loads() -> None:
    values = kubernetes_stack(models=[QWEN7B | {"vllm": {"gpuMemoryUtilization": 0.8, "maxModelLen": 4096}}])
    (spec,) = load_settings(as_cli(values), project="triton-ft", stack="test").models
    assert spec.vllm is not None and spec.vllm.gpu_memory_utilization == 0.8


def test_a_model_outside_the_catalog_states_its_architecture_and_vllm_facts() -> None:
    (spec,) = load(kubernetes_stack(models=[CUSTOM])).models
    assert spec.vllm is not None
    assert (spec.vllm.architecture, spec.vllm.num_kv_heads, spec.vllm.checkpoint_dtype) == (
        "MistralForCausalLM",
        12,
        "float16",
    )
    assert spec.data_type is DataType.FP16


@pytest.mark.parametrize("key", ["architecture", "numKvHeads", "qkvBias", "checkpointDtype"])
def test_a_model_outside_the_catalog_must_state_each_checkpoint_fact(key: str) -> None:
    block = {k: v for k, v in CUSTOM_FACTS.items() if k != key}
    problems = problems_of(kubernetes_stack(models=[CUSTOM | {"vllm": block}]))
    assert [p for p in problems if f"vllm.{key}" in p] == [
        f"models[0].vllm.{key}: required for a model outside the catalog (or with its own architecture block): "
        f"{STATED_FACTS[key]}; the memory check and the download's comparison need it"
    ]


def test_a_model_outside_the_catalog_with_only_family_and_architecture_names_all_four_facts() -> None:
    problems = problems_of(kubernetes_stack(models=[CUSTOM | {"vllm": {}}]))
    assert sorted(p.split(":")[0] for p in problems if ".vllm." in p) == [
        f"models[0].vllm.{key}" for key in sorted(STATED_FACTS)
    ]


def test_a_gated_repo_loads_with_the_token_secret() -> None:
    values = kubernetes_stack(gpuType="H100", models=[LLAMA8B], hfToken="hf_x")
    assert load(values, secret_keys=("hfToken",)).secrets == frozenset({"hfToken"})


def test_tensor_parallel_must_divide_the_kv_heads() -> None:
    entry = CUSTOM | {"tensorParallel": 8}
    assert problems_of(kubernetes_stack(gpusPerNode=8, models=[entry])) == [
        "models[0].tensorParallel: 8 and the model's 12 KV heads: one must divide the other "
        "(vllm model_executor/models/llama.py:140-153)"
    ]


def test_max_model_len_beyond_the_positions_is_refused() -> None:
    entry = QWEN7B | {"vllm": {"maxModelLen": 40000}}
    assert problems_of(kubernetes_stack(models=[entry])) == [
        "models[0].vllm.maxModelLen: 40000 exceeds the model's 32768 positions (RoPE scaling included; vllm "
        "config/model.py:2355-2380); lower it or drop it to use the model's own"
    ]


def test_weights_and_one_full_length_kv_cache_must_fit_the_memory_fraction() -> None:
    (problem,) = problems_of(kubernetes_stack(models=[LLAMA8B], hfToken="x"), ("hfToken",))
    assert problem.startswith("models[0].vllm: weights per GPU (14.96 GiB at bfloat16, TP 1) plus the KV cache of one")
    assert "131072-token request (16.00 GiB) exceed gpuMemoryUtilization 0.9 of the GPU's 24 GiB" in problem


def test_the_same_model_fits_when_split_over_two_gpus_or_shortened() -> None:
    split = LLAMA8B | {"tensorParallel": 2, "vllm": {"maxModelLen": 32768}}
    short = LLAMA8B | {"name": "llama-short", "vllm": {"maxModelLen": 16384}}
    settings = load(kubernetes_stack(gpusPerNode=2, models=[split, short], hfToken="x"), ("hfToken",))
    assert [m.gpus for m in settings.models] == [2, 1]


def test_bfloat16_is_refused_on_a_gpu_without_it() -> None:
    tiny = QWEN7B | {"hfRepo": "Qwen/Qwen2.5-0.5B-Instruct", "vllm": {"dtype": "bfloat16"}}
    assert problems_of(kubernetes_stack(gpuType="T4", cudaArchs=["75"], models=[tiny])) == [
        "models[0].vllm.dtype: bfloat16 needs a GPU of compute capability 8.0 or more, this node's is 7.5 (vllm "
        "platforms/cuda.py:234-236); set vllm.dtype: float16"
    ]


def test_auto_dtype_of_a_bfloat16_checkpoint_is_refused_on_a_t4_too() -> None:
    tiny = QWEN7B | {"hfRepo": "Qwen/Qwen2.5-0.5B-Instruct"}
    (problem,) = problems_of(kubernetes_stack(gpuType="T4", cudaArchs=["75"], models=[tiny]))
    assert problem.startswith("models[0].vllm.dtype: bfloat16 needs a GPU of compute capability 8.0")


def test_float16_serves_a_bfloat16_checkpoint_on_a_t4() -> None:
    tiny = QWEN7B | {"hfRepo": "Qwen/Qwen2.5-0.5B-Instruct", "vllm": {"dtype": "float16"}}
    (spec,) = load(kubernetes_stack(gpuType="T4", cudaArchs=["75"], models=[tiny])).models
    assert spec.data_type is DataType.FP16


def test_tensor_parallel_beyond_the_nodes_gpus_is_refused() -> None:
    (problem,) = problems_of(kubernetes_stack(gpusPerNode=1, models=[QWEN7B | {"tensorParallel": 2}]))
    assert problem.startswith("models[0].tensorParallel: 2 x pipelineParallel 1 = 2 GPUs, but each GPU node")


@pytest.mark.parametrize(
    ("block", "message"),
    [
        ({"gpuMemoryUtilization": 0}, "models[0].vllm.gpuMemoryUtilization: 0.0 must be in (0, 1]"),
        ({"maxNumSeqs": 0}, "models[0].vllm.maxNumSeqs: 0 must be at least 1 (vllm config/scheduler.py:63)"),
        ({"dtype": "fp8"}, "models[0].vllm.dtype: 'fp8' is not one of vLLM's dtypes"),
        ({"maxModelLen": "long"}, "models[0].vllm.maxModelLen: must be an integer, got 'long'"),
        ({"maxModelLenn": 4096}, "models[0].vllm.maxModelLenn: unknown key; did you mean `maxModelLen`?"),
        ({"architecture": "GPT2LMHeadModel"}, "models[0].vllm.architecture: 'GPT2LMHeadModel' is not an architecture"),
        ({"timePerOutputTokenSeconds": 0}, "models[0].vllm.timePerOutputTokenSeconds: 0 must be in (0, 10] seconds"),
        ({"timePerOutputTokenSeconds": 50}, "models[0].vllm.timePerOutputTokenSeconds: 50 must be in (0, 10] seconds"),
    ],
)
def test_each_bad_vllm_value_is_refused_naming_its_key(block: dict[str, Any], message: str) -> None:
    (problem,) = problems_of(kubernetes_stack(models=[QWEN7B | {"vllm": block}]))
    assert problem.startswith(message)


def test_the_stated_pace_reaches_the_gateways_spec_of_the_model() -> None:
    settings = load(kubernetes_stack(models=[QWEN7B | {"vllm": {"timePerOutputTokenSeconds": 1}}]))
    (qwen,) = settings.models
    assert qwen.vllm.time_per_output_token_s == 1.0 and isinstance(qwen.vllm.time_per_output_token_s, float)


def test_fastertransformer_keys_are_refused_with_what_to_write_instead() -> None:
    problems = problems_of(kubernetes_stack(models=[QWEN7B | {"maxBatchSize": 16, "dataType": "fp16"}]))
    assert problems == [
        "models[0].dataType: is a FasterTransformer setting, not for family llama: vLLM's compute type is "
        "`vllm.dtype` (auto, float16, bfloat16, ...): write it there",
        "models[0].maxBatchSize: is a FasterTransformer setting, not for family llama: vLLM batches itself: "
        "`vllm.maxNumSeqs` is how many requests run at once",
    ]


def test_a_vllm_block_on_a_fastertransformer_model_is_refused() -> None:
    assert problems_of(kubernetes_stack(models=[T5_SMALL | {"vllm": {"maxModelLen": 512}}])) == [
        "models[0].vllm: is for family llama (served by vLLM); t5 is not: remove it"
    ]


def test_every_bad_value_is_listed_at_once() -> None:
    entry = QWEN7B | {"tensorParallel": 8, "maxOutputLen": 64}
    problems = problems_of(kubernetes_stack(gpusPerNode=8, models=[entry, LLAMA8B | {"vllm": {"maxNumSeqs": 0}}]))
    assert {p.split(": ", 1)[0] for p in problems} == {
        "hfToken",
        "models[0].tensorParallel",
        "models[0].maxOutputLen",
        "models[1].vllm.maxNumSeqs",
    }


def test_the_stack_sizes_a_model_with_the_facts_and_arguments_its_download_job_checks() -> None:
    # One reading of a model's vllm block (tritonft.engines.vllm.engine): what the stack's rules were given is what
    # the Job compares the downloaded config.json with and what model.json gets.
    entry = dict(QWEN7B, tensorParallel=2, vllm={"maxModelLen": 8192, "maxNumSeqs": 32})
    (spec,) = load(kubernetes_stack(gpusPerNode=2, models=[entry])).models
    assert spec.vllm is not None
    catalog = KNOWN_VLLM[QWEN7B["hfRepo"]]
    facts = ModelFacts(0, entry, frozenset(entry), (Family.LLAMA, catalog.architecture), spec.architecture)
    assert checkpoint(facts, spec.vllm) == checkpoint_of(spec)
    assert options(facts, spec.vllm) == options_of(spec)
    assert options_of(spec).tensor_parallel_size == 2 and options_of(spec).max_num_seqs == 32
