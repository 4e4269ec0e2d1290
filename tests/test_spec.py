"""The shared vocabulary: a ModelSpec survives the trip through a Job's arguments, and its key tracks content."""

from __future__ import annotations

from dataclasses import replace

import pytest

from components.settings.catalog import KNOWN_MODELS
from tritonft.spec import Batching, DataType, Family, ModelSpec, WeightDType

FAMILY, ARCH = KNOWN_MODELS["t5-3b"]
SPEC = ModelSpec(
    name="t5-3b",
    family=FAMILY,
    hf_repo="t5-3b",
    revision="bed96aab9ee46012a5046386105ee5fd0ac572f0",
    architecture=ARCH,
    weight_dtype=WeightDType.FP32,
    data_type=DataType.FP16,
    tensor_parallel=4,
    batching=Batching(max_batch_size=32, preferred_batch_sizes=(8, 16, 32)),
)


def test_json_round_trip_is_lossless() -> None:
    assert ModelSpec.from_json(SPEC.to_json()) == SPEC


def test_json_is_canonical() -> None:
    assert SPEC.to_json() == ModelSpec.from_json(SPEC.to_json()).to_json()
    assert '"family":"t5"' in SPEC.to_json()


def test_unknown_fields_are_rejected_by_name() -> None:
    text = SPEC.to_json().replace('"name"', '"nmae"')
    with pytest.raises(ValueError, match="unknown field"):
        ModelSpec.from_json(text)


def test_conversion_key_changes_with_revision_tp_dtype_and_converter() -> None:
    key = SPEC.conversion_key("1.0")
    assert SPEC.conversion_key("1.0") == key
    assert replace(SPEC, revision="0" * 40).conversion_key("1.0") != key
    assert replace(SPEC, tensor_parallel=2).conversion_key("1.0") != key
    assert replace(SPEC, weight_dtype=WeightDType.FP16).conversion_key("1.0") != key
    assert SPEC.conversion_key("1.1") != key


def test_conversion_key_ignores_serving_knobs() -> None:
    assert replace(SPEC, data_type=DataType.BF16, batching=Batching(4)).conversion_key("1.0") == SPEC.conversion_key(
        "1.0"
    )


def test_sizes_follow_parameters_and_dtypes() -> None:
    assert SPEC.gpus == 4
    assert SPEC.checkpoint_dir == "4-gpu"
    assert SPEC.weight_bytes == SPEC.parameters * 4
    assert SPEC.gpu_weight_bytes == SPEC.parameters * 2
    assert SPEC.family.ft_model_type == "T5" and Family.GPTJ.ft_model_type == "GPT-J"
