"""The shared vocabulary: a ModelSpec survives the trip through a Job's arguments, and its key tracks content."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from components.settings.catalog import KNOWN_MODELS
from tests.tritonft.encoder.checkpoints import MINILM_SPEC
from tritonft.spec import (
    Batching,
    DataType,
    Device,
    EncoderSpec,
    EncoderTask,
    Family,
    ModelSpec,
    Pooling,
    WeightDType,
)

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


MINILM = MINILM_SPEC
CLASSIFIER = replace(
    MINILM,
    name="sst2",
    encoder=EncoderSpec(task=EncoderTask.CLASSIFY, labels=("NEGATIVE", "POSITIVE"), max_seq_length=128),
)


def test_a_generators_json_has_no_encoder_key() -> None:
    assert '"encoder"' not in SPEC.to_json()


@pytest.mark.parametrize("spec", [MINILM, CLASSIFIER], ids=["embed", "classify"])
def test_an_encoder_spec_survives_the_json_round_trip(spec: ModelSpec) -> None:
    parsed = ModelSpec.from_json(spec.to_json())
    assert parsed == spec and parsed.encoder is not None
    assert isinstance(parsed.encoder.task, EncoderTask) and isinstance(parsed.encoder.labels, tuple)
    assert parsed.to_json() == spec.to_json()


def test_all_minilm_l6_v2_counts_the_parameters_of_its_body_without_the_pooler() -> None:
    # sentence-transformers' 22,565,376 (the Hub's 22.7M includes BertModel's pooler, which pooling does not use)
    assert MINILM.parameters == 22_565_376
    assert MINILM.output_width == 384


def test_a_classifier_adds_the_pooler_and_one_row_per_label() -> None:
    assert CLASSIFIER.parameters - MINILM.parameters == (384 * 384 + 384) + 2 * (384 + 1)
    assert CLASSIFIER.output_width == 2


def test_the_encoder_settings_are_part_of_the_conversion_key() -> None:
    key = MINILM.conversion_key("1.0")
    assert MINILM.encoder is not None
    assert replace(MINILM, encoder=replace(MINILM.encoder, pooling=Pooling.CLS)).conversion_key("1.0") != key
    assert replace(MINILM, encoder=replace(MINILM.encoder, max_seq_length=128)).conversion_key("1.0") != key


def test_an_encoder_without_its_encoder_spec_is_refused() -> None:
    with pytest.raises(ValueError, match="encoder: required for family bert"):
        replace(MINILM, encoder=None)


def test_a_generator_with_an_encoder_spec_is_refused() -> None:
    with pytest.raises(ValueError, match="encoder: only for encoder families"):
        replace(SPEC, encoder=EncoderSpec())


@pytest.mark.parametrize(
    ("encoder", "message"),
    [
        (EncoderSpec(task=EncoderTask.CLASSIFY, labels=("only",)), "needs at least two labels"),
        (EncoderSpec(task=EncoderTask.CLASSIFY, labels=("a", "a")), "distinct non-empty names"),
        (EncoderSpec(labels=("a", "b")), "only for task classify"),
        (EncoderSpec(max_seq_length=1), "must be at least 2"),
        (EncoderSpec(max_seq_length=1024), "exceeds the model's position table"),
    ],
)
def test_encoder_values_are_checked_naming_the_field(encoder: EncoderSpec, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        replace(MINILM, encoder=encoder)


def test_an_encoder_on_cpu_occupies_no_gpu_and_says_so_in_its_json() -> None:
    on_cpu = replace(MINILM, device=Device.CPU)
    assert (on_cpu.gpus, on_cpu.on_cpu) == (0, True)
    assert (MINILM.gpus, MINILM.on_cpu) == (1, False)
    assert '"device":"cpu"' in on_cpu.to_json()
    parsed = ModelSpec.from_json(on_cpu.to_json())
    assert parsed == on_cpu and parsed.device is Device.CPU


def test_a_gpu_models_json_has_no_device_key() -> None:
    assert '"device"' not in SPEC.to_json() and '"device"' not in MINILM.to_json()


def test_a_generator_on_cpu_is_refused_because_fastertransformer_needs_gpus() -> None:
    with pytest.raises(ValueError, match="device: cpu is for encoders only; t5 runs on FasterTransformer"):
        replace(SPEC, device=Device.CPU)


def test_an_unknown_device_in_json_is_refused_by_name() -> None:
    raw = json.loads(MINILM.to_json()) | {"device": "tpu"}
    with pytest.raises(ValueError, match="device: 'tpu' is not one of gpu, cpu"):
        ModelSpec.from_json(json.dumps(raw))


def test_a_distilbert_without_token_types_is_a_valid_encoder_spec() -> None:
    assert MINILM.encoder is not None
    distil = replace(MINILM, encoder=replace(MINILM.encoder, type_vocab_size=0))
    assert MINILM.parameters - distil.parameters == 2 * 384  # the token-type table's two rows are gone
    with pytest.raises(ValueError, match="type_vocab_size: -1 must not be negative"):
        replace(MINILM, encoder=replace(MINILM.encoder, type_vocab_size=-1))


def test_an_encoder_is_not_split_across_gpus() -> None:
    with pytest.raises(ValueError, match="not split across GPUs"):
        replace(MINILM, tensor_parallel=2)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("task", "rank"), "'rank' is not a valid EncoderTask"),
        (("labels", "POSITIVE"), "encoder.labels must be a list"),
        (("normalize", "yes"), "encoder.normalize must be true or false"),
        (("max_seq_length", "256"), "encoder.max_seq_length must be an integer"),
        (("poling", "mean"), r"encoder has unknown field\(s\) \['poling'\]"),
    ],
)
def test_a_mistyped_encoder_in_json_is_refused_by_name(change: tuple[str, object], message: str) -> None:
    raw = json.loads(MINILM.to_json())
    raw["encoder"][change[0]] = change[1]
    with pytest.raises(ValueError, match=message):
        ModelSpec.from_dict(raw)
