"""The judge's reference of a Llama-family model and the rule, on the vLLM tests' seeded tiny Llama (pure: the served
answers here are what a greedy engine answers with the given weights, computed by the same CPU forward; the real
vLLM engine's are ``tests/system/realtriton/test_judge_vllm.py``'s)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from tests.tritonft.engines.vllm.checkpoints import VARIANTS
from tests.tritonft.reference.llama_checkpoints import ReferenceVariant, write
from tritonft.cli import main
from tritonft.engines.vllm import local
from tritonft.probe.judge_reference import (
    GPT_REFERENCE_PROMPTS,
    REFERENCE_STEPS,
    JudgeReference,
    has_reference,
    judge_against_reference,
    tolerance_for,
)
from tritonft.reference.judge import follow, judge_reference, llama_served_dtype
from tritonft.reference.llama import Llama, load_llama
from tritonft.repo.tokenization import load_tokenizer
from tritonft.spec import Family, ModelSpec

OTHER_SEED = 7919


@pytest.fixture(scope="module")
def original(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write(ReferenceVariant("tiny-llama", VARIANTS[0], VARIANTS[0].seed), tmp_path_factory.mktemp("llama") / "hf")


@pytest.fixture(scope="module")
def spec(original: Path) -> ModelSpec:
    """The spec the vLLM tests serve the checkpoint with (float32 on the CPU)."""
    return local.spec_for("tiny-llama", original)


@pytest.fixture(scope="module")
def reference(original: Path, spec: ModelSpec) -> JudgeReference:
    return judge_reference(load_llama(original), original, spec)


def served_answers(model: Llama, original: Path, reference: JudgeReference) -> list[str]:
    """What a greedy engine serving ``model``'s weights answers to the judged prompts (the original's tokenizer)."""
    tokenizer = load_tokenizer(original)
    return [
        follow(
            model, tokenizer, p.prompt, tokenizer.encode(p.prompt, add_special_tokens=True), steps=p.steps, tolerance=0
        ).answer
        for p in reference.prompts
    ]


def shuffled(model: Llama, seed: int) -> Llama:
    """``model`` with every weight's values permuted: random weights of the same shape and distribution."""
    rng = np.random.default_rng(seed)
    wrong = Llama.__new__(Llama)
    wrong.__dict__ = dict(model.__dict__)
    wrong.embed = rng.permutation(model.embed.reshape(-1)).reshape(model.embed.shape)
    wrong.head = rng.permutation(model.head.reshape(-1)).reshape(model.head.shape)
    wrong.layers = [
        dataclasses.replace(
            layer,
            **{
                field.name: rng.permutation(value.reshape(-1)).reshape(value.shape)
                for field in dataclasses.fields(layer)
                if (value := getattr(layer, field.name)) is not None
            },
        )
        for layer in model.layers
    ]
    return wrong


def test_a_llama_is_judged_on_the_gpt_prompts_over_16_greedy_steps(reference: JudgeReference) -> None:
    assert [p.prompt for p in reference.prompts] == list(GPT_REFERENCE_PROMPTS)
    assert all(p.steps == REFERENCE_STEPS[Family.LLAMA] == 16 for p in reference.prompts)
    assert reference.family is Family.LLAMA


def test_the_cpu_served_spec_is_judged_at_the_fp32_tolerance(reference: JudgeReference) -> None:
    assert reference.served_dtype == "fp32"
    assert reference.tolerance_nats == tolerance_for("fp32")


def test_a_bf16_checkpoint_served_at_auto_is_judged_at_the_bf16_tolerance(spec: ModelSpec) -> None:
    assert spec.vllm is not None
    gpu = dataclasses.replace(spec, vllm=dataclasses.replace(spec.vllm, dtype="auto", checkpoint_dtype="bfloat16"))
    assert llama_served_dtype(gpu) == "bf16"


def test_the_original_weights_greedy_answers_pass(original: Path, reference: JudgeReference) -> None:
    verdict = judge_against_reference(reference, served_answers(load_llama(original), original, reference))

    assert verdict.ok, verdict.detail
    assert "4 answers follow the reference of the original weights" in verdict.detail


def test_another_seeds_weights_fail_naming_the_prompt_and_both_answers(
    original: Path, reference: JudgeReference, tmp_path: Path
) -> None:
    other = load_llama(write(ReferenceVariant("tiny-llama", VARIANTS[0], OTHER_SEED), tmp_path / "other"))
    answers = served_answers(other, original, reference)

    verdict = judge_against_reference(reference, answers)

    assert not verdict.ok
    first = reference.prompts[0]
    assert (
        f"the answer to {first.prompt!r} is not the reference's: served {answers[0]!r}, reference {first.answer!r}"
        in verdict.detail
    )


def test_random_weights_of_the_same_shape_fail(original: Path, reference: JudgeReference) -> None:
    answers = served_answers(shuffled(load_llama(original), 1), original, reference)

    verdict = judge_against_reference(reference, answers)

    assert not verdict.ok
    assert f"{len(reference.prompts)} of {len(reference.prompts)} answers differ" in verdict.detail


def test_the_reference_command_writes_a_llamas_reference(original: Path, spec: ModelSpec, tmp_path: Path) -> None:
    (tmp_path / "spec.json").write_text(spec.to_json())
    out = tmp_path / "judge-reference.json"

    code = main(["reference", "--input", str(original), "--spec", str(tmp_path / "spec.json"), "--out", str(out)])

    assert code == 0
    assert out.read_text() == judge_reference(load_llama(original), original, spec).to_json() + "\n"


def test_the_reference_command_refuses_an_architecture_it_has_no_forward_for(
    spec: ModelSpec, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert spec.vllm is not None
    mistral = dataclasses.replace(spec, vllm=dataclasses.replace(spec.vllm, architecture="MistralForCausalLM"))
    (tmp_path / "spec.json").write_text(mistral.to_json())
    assert not has_reference(mistral)

    code = main(["reference", "--input", str(tmp_path), "--spec", str(tmp_path / "spec.json"), "--out", "x.json"])

    assert code == 1
    assert "(MistralForCausalLM); the reference covers" in capsys.readouterr().err


def test_the_reference_command_refuses_files_that_are_not_the_specs_model(
    original: Path, spec: ModelSpec, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = json.loads((original / "config.json").read_text())
    wrong = dataclasses.replace(spec, architecture=dataclasses.replace(spec.architecture, num_layers=3))
    (tmp_path / "spec.json").write_text(wrong.to_json())
    assert config["num_hidden_layers"] == 2

    code = main(["reference", "--input", str(original), "--spec", str(tmp_path / "spec.json"), "--out", "x.json"])

    assert code == 1
    said = capsys.readouterr().err
    assert "not the model the spec describes" in said and "the spec says 3" in said
