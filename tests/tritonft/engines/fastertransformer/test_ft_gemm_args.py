"""The tuner command lines the stack renders are FasterTransformer's argument lists, in FT's order and meaning.

``ft_gemm_args.json`` was parsed from FT's source at the commit the server image builds
(``scripts/extract_ft_gemm_args.py``): each argument's ``argv`` index and variable name, with its ``file:line``.
The meaning of each FT variable is stated here once, in terms of the model spec; the order comes from FT.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from components.settings.catalog import KNOWN_MODELS
from tritonft.engines.fastertransformer.gemm import (
    GEMM_CONFIG,
    MAX_TUNING_POINTS,
    TuningPoint,
    cache_key,
    gemm_args,
    gemm_commands,
    program,
    tuning_points,
)
from tritonft.engines.fastertransformer.versions import FT_COMMIT
from tritonft.spec import Batching, DataType, Family, ModelSpec

FIXTURE = json.loads((Path(__file__).parent / "ft_gemm_args.json").read_text())

CUBLAS_DATA_TYPE = {DataType.FP32: "FLOAT_DATATYPE", DataType.FP16: "HALF_DATATYPE", DataType.BF16: "BFLOAT16_DATATYPE"}

Meaning = Callable[[ModelSpec, TuningPoint, bool], int]
MEANINGS: dict[str, Meaning] = {
    "batch_size": lambda m, p, a: p.batch_size,
    "beam_width": lambda m, p, a: p.beam_width,
    "max_mem_seq_len": lambda m, p, a: m.max_input_len,  # T5: the encoder output length = longest prompt
    "max_input_len": lambda m, p, a: m.max_input_len,
    "encoder_d_model": lambda m, p, a: m.architecture.d_model,
    "decoder_d_model": lambda m, p, a: m.architecture.d_model,
    "encoder_head_num": lambda m, p, a: m.architecture.num_heads,
    "decoder_head_num": lambda m, p, a: m.architecture.num_heads,
    "head_num": lambda m, p, a: m.architecture.num_heads,
    "encoder_size_per_head": lambda m, p, a: m.architecture.head_size,
    "decoder_size_per_head": lambda m, p, a: m.architecture.head_size,
    "size_per_head": lambda m, p, a: m.architecture.head_size,
    "encoder_inter_size": lambda m, p, a: m.architecture.d_ff,
    "decoder_inter_size": lambda m, p, a: m.architecture.d_ff,
    "inter_size": lambda m, p, a: m.architecture.d_ff,
    "decoder_vocab_size": lambda m, p, a: m.architecture.vocab_size,
    "vocab_size": lambda m, p, a: m.architecture.vocab_size,
    "data_type": lambda m, p, a: FIXTURE["data_types"]["values"][CUBLAS_DATA_TYPE[m.data_type]],
    "tensor_para_size": lambda m, p, a: m.tensor_parallel,
    "is_append": lambda m, p, a: int(a),
}

REPOS = {Family.T5: "t5-base", Family.GPT2: "gpt2", Family.GPTJ: "EleutherAI/gpt-j-6b"}
FT_FAMILIES = [f for f in Family if f.is_fastertransformer]


def model(family: Family, tp: int, dtype: DataType, **changes: Any) -> ModelSpec:
    known_family, arch = KNOWN_MODELS[REPOS[family]]
    assert known_family is family
    spec = ModelSpec(
        name=f"{family}-model",
        family=family,
        hf_repo=REPOS[family],
        revision="0" * 40,
        architecture=arch,
        data_type=dtype,
        tensor_parallel=tp,
        max_input_len=384,
        batching=Batching(max_batch_size=16, preferred_batch_sizes=(4, 8)),
    )
    return replace(spec, **changes)


def ft_argv(spec: ModelSpec, point: TuningPoint, append: bool) -> list[str]:
    """What FT's source says the tuner's argv[1:] must be, argument by argument."""
    args = FIXTURE["programs"][program(spec)]["args"]
    assert [a["index"] for a in args] == list(range(1, len(args) + 1))
    return [str(MEANINGS[a["name"]](spec, point, append)) for a in args]


def test_the_fixture_is_read_at_the_ft_commit_the_image_builds():
    assert FIXTURE["commit"] == FT_COMMIT, "FT_COMMIT moved: rerun scripts/extract_ft_gemm_args.py"
    assert FIXTURE["config_file"]["name"] == GEMM_CONFIG


@pytest.mark.parametrize("family", FT_FAMILIES)
def test_each_family_is_tuned_by_the_program_fts_guide_runs_for_it(family):
    assert program(model(family, 1, DataType.FP16)) == FIXTURE["families"][str(family)]["program"]


@pytest.mark.parametrize("dtype", [DataType.FP16, DataType.FP32])
@pytest.mark.parametrize("tp", [1, 2, 4])
@pytest.mark.parametrize("family", FT_FAMILIES)
def test_rendered_command_lines_equal_fts_argument_lists(family, tp, dtype):
    spec = model(family, tp, dtype)
    commands = gemm_commands(spec)
    points = tuning_points(spec)
    assert len(commands) == len(points) == 3
    for i, (command, point) in enumerate(zip(commands, points, strict=True)):
        assert command[0] == FIXTURE["families"][str(family)]["program"]
        assert command[1:] == ft_argv(spec, point, append=i > 0)
        bounds = FIXTURE["programs"][command[0]]["argc"]
        assert bounds["min"] <= len(command) <= bounds["max"], "argc counts argv[0]"


@pytest.mark.parametrize("name", ["t5_gemm", "gpt_gemm"])
def test_every_argument_is_passed_so_no_ft_default_decides_tp_or_append(name):
    spec = model(Family.T5 if name == "t5_gemm" else Family.GPT2, 2, DataType.FP16)
    (first, *_) = gemm_commands(spec)
    assert len(first) == FIXTURE["programs"][name]["argc"]["max"]


def test_bf16_is_fts_bfloat16_data_type():
    spec = model(Family.GPTJ, 1, DataType.BF16)
    assert gemm_args(spec, TuningPoint(8), append=False) == ft_argv(spec, TuningPoint(8), append=False)


def test_tuned_batch_sizes_are_the_maximum_and_preferred_sizes_largest_first_and_capped():
    spec = model(
        Family.GPT2, 1, DataType.FP16, batching=Batching(max_batch_size=64, preferred_batch_sizes=(1, 2, 4, 8, 16, 32))
    )
    assert [p.batch_size for p in tuning_points(spec)] == [64, 32, 16, 8][:MAX_TUNING_POINTS]
    assert {p.beam_width for p in tuning_points(spec)} == {1}


def test_a_model_without_preferred_sizes_is_tuned_once_at_its_maximum_batch():
    spec = model(Family.T5, 1, DataType.FP16, batching=Batching(max_batch_size=8))
    assert [c[1] for c in gemm_commands(spec)] == ["8"]
    assert gemm_commands(spec)[0][-1] == "0", "the only run writes a new file"


def test_heads_not_divisible_by_tp_are_refused_with_the_abort_the_tuner_would_hit():
    spec = model(Family.GPT2, 8, DataType.FP16)  # 12 heads
    with pytest.raises(ValueError, match=r"tensorParallel 8 does not divide num_heads 12.*gpt_gemm"):
        gemm_commands(spec)


KEY = {"ft_commit": FT_COMMIT, "triton_version": "23.04"}


@pytest.mark.parametrize(
    "change",
    [
        {"data_type": DataType.FP32},
        {"tensor_parallel": 2},
        {"pipeline_parallel": 2},
        {"max_input_len": 512},
        {"batching": Batching(max_batch_size=32)},
    ],
    ids=lambda c: next(iter(c)),
)
def test_the_cache_key_changes_with_every_input_of_the_tuning(change):
    base = model(Family.T5, 1, DataType.FP16)
    assert cache_key(replace(base, **change), **KEY) != cache_key(base, **KEY)


def test_the_cache_key_changes_with_the_model_shape_the_ft_commit_and_the_triton_release():
    base = model(Family.T5, 1, DataType.FP16)
    other_shape = replace(base, architecture=KNOWN_MODELS["t5-large"][1])
    assert cache_key(other_shape, **KEY) != cache_key(base, **KEY)
    assert cache_key(base, ft_commit="f" * 40, triton_version="23.04") != cache_key(base, **KEY)
    assert cache_key(base, ft_commit=FT_COMMIT, triton_version="23.05") != cache_key(base, **KEY)


def test_the_cache_key_ignores_what_the_gemm_shapes_do_not_depend_on():
    base = model(Family.T5, 1, DataType.FP16)
    same = replace(base, name="renamed", revision="1" * 40, instances=2, max_output_len=64)
    assert cache_key(same, **KEY) == cache_key(base, **KEY)
