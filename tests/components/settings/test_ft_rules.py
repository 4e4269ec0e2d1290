"""Combinations FasterTransformer refuses when it loads a model (``components/settings/ft_rules.py``, each rule citing
FT's code): refused by ``load_settings`` before any resource, with the key path and the fix; their neighbours that FT
accepts pass."""

from __future__ import annotations

from typing import Any

import pytest

from components.settings import load_settings
from components.settings.catalog import KNOWN_MODELS
from components.settings.ft_rules import FT_HEAD_SIZES, WEIGHT_ONLY_INT8_SM
from components.settings.gpus import GPU_MODELS
from tests.components.settings.test_validation import GPT2, T5_SMALL, as_cli, kubernetes_stack, problems_of

ARCH = {"dModel": 256, "numHeads": 4, "numLayers": 4, "dFf": 1024, "vocabSize": 1000, "maxPositions": 2048}


def custom(family: str, **arch: Any) -> dict[str, Any]:
    return {**T5_SMALL, "hfRepo": f"acme/{family}-custom", "family": family, "architecture": ARCH | arch}


def accepted(values: dict[str, Any]) -> bool:
    return bool(load_settings(as_cli(values), project="triton-ft", stack="test").models)


# -- weight-only int8 ---------------------------------------------------------------------------------------------


def test_int8_with_fp32_compute_is_refused_naming_the_fix() -> None:
    (problem,) = problems_of(kubernetes_stack(models=[dict(GPT2, int8Mode=1, dataType="fp32")]))

    assert problem.startswith("models[0].int8Mode: 1 with dataType fp32: FasterTransformer refuses")
    assert problem.endswith("use dataType fp16 or bf16, or int8Mode: 0")


@pytest.mark.parametrize(("data_type", "gpu"), [("fp16", "A10G"), ("bf16", "A100-80GB"), ("fp16", "T4")])
def test_int8_with_16_bit_compute_on_a_gpu_ft_supports_is_accepted(data_type: str, gpu: str) -> None:
    assert accepted(kubernetes_stack(gpuType=gpu, models=[dict(GPT2, int8Mode=1, dataType=data_type)]))


@pytest.mark.parametrize("gpu", ["H100", "H200"])
def test_int8_on_a_gpu_the_int8_gemm_has_no_kernel_for_is_refused(gpu: str) -> None:
    (problem,) = problems_of(kubernetes_stack(gpuType=gpu, models=[dict(GPT2, int8Mode=1)]))

    assert problem.startswith(f"models[0].int8Mode: 1 on {gpu} (sm_90): FasterTransformer's weight-only int8 GEMM")


def test_the_int8_gpu_range_covers_every_gpu_of_the_catalog_but_hopper() -> None:
    refused = sorted(name for name, gpu in GPU_MODELS.items() if gpu.compute_capability not in WEIGHT_ONLY_INT8_SM)
    assert refused == ["H100", "H200"]


def test_int8_on_t5_gives_one_problem_not_a_cascade() -> None:
    problems = problems_of(kubernetes_stack(gpuType="H100", models=[dict(T5_SMALL, int8Mode=1, dataType="fp32")]))

    assert problems == ["models[0].int8Mode: weight-only int8 is supported for gpt2 only, not t5"]


# -- attention head size --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arch", "path", "head"),
    [
        ({"dModel": 400}, "dModel 400 / numHeads 4", 100),
        ({"dModel": 160}, "dModel 160 / numHeads 4", 40),
        ({"dKv": 50}, "dKv=50", 50),
        ({"dModel": 1152, "numHeads": 4}, "dModel 1152 / numHeads 4", 288),
    ],
)
def test_a_head_size_ft_has_no_attention_kernel_for_is_refused(arch: dict[str, int], path: str, head: int) -> None:
    (problem,) = problems_of(kubernetes_stack(models=[custom("gpt2", **arch)]))

    assert problem.startswith(f"models[0].architecture: head size {head} ({path}) has no FasterTransformer attention")


@pytest.mark.parametrize("head", FT_HEAD_SIZES)
def test_every_head_size_ft_has_a_kernel_for_is_accepted(head: int) -> None:
    assert accepted(kubernetes_stack(models=[custom("gpt2", dModel=4 * head, dFf=16 * head)]))


@pytest.mark.parametrize("repo", sorted(r for r, (family, _) in KNOWN_MODELS.items() if not family.is_encoder))
def test_every_catalog_generator_has_a_head_size_ft_supports(repo: str) -> None:
    assert KNOWN_MODELS[repo][1].head_size in FT_HEAD_SIZES


# -- pipeline parallelism of T5's decoder ---------------------------------------------------------------------------


def test_a_pipeline_that_does_not_divide_t5s_decoder_layers_is_refused() -> None:
    values = kubernetes_stack(gpusPerNode=2, models=[dict(custom("t5", numDecoderLayers=3), pipelineParallel=2)])

    (problem,) = problems_of(values)

    assert problem.startswith("models[0].pipelineParallel: 2 does not divide the T5 decoder's numDecoderLayers=3")


def test_a_pipeline_that_divides_both_t5_stacks_is_accepted() -> None:
    values = kubernetes_stack(gpusPerNode=2, models=[dict(custom("t5", numDecoderLayers=6), pipelineParallel=2)])

    assert accepted(values)


def test_the_encoder_layers_are_checked_by_the_general_pipeline_rule_once() -> None:
    values = kubernetes_stack(gpusPerNode=2, models=[dict(custom("t5", numLayers=3), pipelineParallel=2)])

    assert problems_of(values) == ["models[0].pipelineParallel: 2 does not divide numLayers=3"]
