"""The judge's reference of a Llama-family model and the rule, on the vLLM tests' seeded tiny Llama (pure: the served
answers here are what a greedy engine answers with the given weights, computed by the same CPU forward; the real
vLLM engine's are ``tests/system/realtriton/test_judge_vllm.py``'s)."""

from __future__ import annotations

import dataclasses
import json
import shutil
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest

from tests.tritonft.engines.vllm.checkpoints import CHAT_TEMPLATE, VARIANTS
from tests.tritonft.reference.llama_checkpoints import ReferenceVariant, write
from tritonft.cli import main
from tritonft.engines.vllm import local
from tritonft.errors import UserError
from tritonft.probe.judge_reference import (
    CHAT_CONVERSATIONS,
    CHAT_STEPS,
    GPT_REFERENCE_PROMPTS,
    REFERENCE_STEPS,
    JudgeReference,
    conversation_label,
    has_reference,
    judge_against_reference,
    tolerance_for,
)
from tritonft.probe.runner import ModelTarget, chat_prompt_of
from tritonft.reference.judge import follow, judge_reference, llama_served_dtype
from tritonft.reference.llama import Llama, load_llama, tokenizer_end_ids
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


def copy_checkpoint(original: Path, out: Path) -> Path:
    shutil.copytree(original, out)
    return out


def drop_system_messages(original: Path, out: Path) -> Path:
    """A copy of ``original`` whose chat template leaves system messages out (every other message as before)."""
    copy_checkpoint(original, out)
    config = json.loads((out / "tokenizer_config.json").read_text())
    config["chat_template"] = config["chat_template"].replace(
        "{% for message in messages %}", "{% for message in messages if message['role'] != 'system' %}"
    )
    assert config["chat_template"] != CHAT_TEMPLATE
    (out / "tokenizer_config.json").write_text(json.dumps(config))
    return out


def served_answers(model: Llama, original: Path, reference: JudgeReference) -> list[str]:
    """What a greedy engine serving ``model``'s weights answers to the judged prompts (the original's tokenizer)."""
    tokenizer = load_tokenizer(original)
    asked = [p.rendered or p.prompt for p in reference.prompts]  # a chat: its rendering, as the gateway sends it
    return [
        follow(
            model, tokenizer, text, tokenizer.encode(text, add_special_tokens=True), steps=p.steps, tolerance=0
        ).answer
        for p, text in zip(reference.prompts, asked, strict=True)
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
    assert [p.prompt for p in reference.plain] == list(GPT_REFERENCE_PROMPTS)
    assert all(p.steps == REFERENCE_STEPS[Family.LLAMA] == 16 for p in reference.plain)
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
    assert "5 answers follow the reference of the original weights" in verdict.detail


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
    written = JudgeReference.from_json(out.read_text())
    computed = judge_reference(load_llama(original), original, spec)
    assert unstamped(written).to_json() == unstamped(computed).to_json(), "the same but for its chat's moment"
    assert all(datetime.fromisoformat(p.rendered_at).tzinfo is not None for p in written.chats)


def unstamped(reference: JudgeReference) -> JudgeReference:
    """``reference`` without its chats' moments of rendering."""
    return dataclasses.replace(
        reference, prompts=tuple(dataclasses.replace(p, rendered_at="") for p in reference.prompts)
    )


def test_the_judge_renders_a_dated_template_at_the_references_moment(original: Path, tmp_path: Path) -> None:
    dated = copy_checkpoint(original, tmp_path / "dated")
    config = json.loads((dated / "tokenizer_config.json").read_text())
    config["chat_template"] = "Today is {{ strftime_now('%d %b %Y') }}.\n" + config["chat_template"]
    (dated / "tokenizer_config.json").write_text(json.dumps(config))
    spec = local.spec_for("tiny-llama", dated)
    (chat,) = judge_reference(load_llama(dated), dated, spec).chats
    target = ModelTarget("tiny-llama", Family.LLAMA, vllm=True, tokenizer_config=str(dated / "tokenizer_config.json"))

    assert chat_prompt_of(target, chat.messages, chat.rendered_at) == chat.rendered
    assert "Today is 01 Jan 2001" in chat_prompt_of(target, chat.messages, "2001-01-01T00:00:00+00:00")


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


def test_an_instruct_model_is_also_judged_on_the_conversation_in_its_expected_rendering(
    original: Path, reference: JudgeReference
) -> None:
    (chat,) = reference.chats
    tokenizer = load_tokenizer(original)

    assert chat.messages == CHAT_CONVERSATIONS[0]
    assert chat.prompt == conversation_label(CHAT_CONVERSATIONS[0])
    assert chat.rendered == (
        "system: Answer with exactly one word, in French.\nuser: What color is the sky on a clear day?\nassistant:"
    ), "the tiny template's rendering, its <s> left to the tokenizer as the gateway leaves it"
    assert chat.prompt_tokens == len(tokenizer.encode(chat.rendered, add_special_tokens=True))
    assert chat.steps == CHAT_STEPS or chat.ended


def test_each_prompt_records_how_many_tokens_the_reference_made_of_it(
    original: Path, reference: JudgeReference
) -> None:
    tokenizer = load_tokenizer(original)

    assert [p.prompt_tokens for p in reference.plain] == [
        len(tokenizer.encode(p.prompt, add_special_tokens=True)) for p in reference.plain
    ]


def test_the_template_tokens_are_the_tokenizers_special_tokens(reference: JudgeReference) -> None:
    assert set(reference.template_tokens) == {"<s>", "</s>", "<unk>"}


def test_a_template_that_drops_the_system_message_is_refused_by_the_reference_step(
    original: Path, spec: ModelSpec, tmp_path: Path
) -> None:
    dropped = drop_system_messages(original, tmp_path / "dropped")

    with pytest.raises(UserError, match="its chat template renders the judge's conversation wrong: the system message"):
        judge_reference(load_llama(dropped), dropped, spec)


def test_a_base_model_without_a_chat_template_is_judged_on_the_plain_prompts_only(
    original: Path, spec: ModelSpec, tmp_path: Path
) -> None:
    base = copy_checkpoint(original, tmp_path / "base")
    config = json.loads((base / "tokenizer_config.json").read_text())
    del config["chat_template"]
    (base / "tokenizer_config.json").write_text(json.dumps(config))

    judged = judge_reference(load_llama(base), base, spec)

    assert judged.chats == () and len(judged.plain) == len(GPT_REFERENCE_PROMPTS)


def test_the_end_ids_are_the_generation_configs_and_the_tokenizers_own_eos(original: Path, tmp_path: Path) -> None:
    other = copy_checkpoint(original, tmp_path / "other-eos")
    (other / "generation_config.json").write_text(json.dumps({"bos_token_id": 0, "eos_token_id": [5]}))

    assert tokenizer_end_ids(other) == {1}, "tokenizer_config.json's eos_token '</s>' is id 1"
    assert load_llama(other).end_ids == {5}


def greedy(model: Llama, ids: list[int], count: int, ends: frozenset[int]) -> tuple[list[int], bool]:
    """``count`` greedy tokens after ``ids``, each from a whole forward of the sequence (no cache): an independent
    computation of a path."""
    out: list[int] = []
    for _ in range(count):
        token = int(np.argmax(model.logits([*ids, *out])[-1]))
        if token in ends:
            return out, True
        out.append(token)
    return out, False


def test_each_branch_is_the_greedy_continuation_after_its_near_tie_within_the_budget(original: Path) -> None:
    model = load_llama(original)
    tokenizer = load_tokenizer(original)
    ids = tokenizer.encode(GPT_REFERENCE_PROMPTS[1], add_special_tokens=True)
    steps, budget = 6, 7

    followed = follow(model, tokenizer, "p", ids, steps=steps, tolerance=50.0, branch_tokens=budget)

    main, _ = greedy(model, ids, steps, model.end_ids)
    branched = [t for t in followed.near_ties if t.branch is not None]
    assert branched, "at 50 nats every runner-up is a near-tie"
    spent = 0
    for tie in branched:
        assert tie.branch is not None
        spent += tie.branch.steps - tie.step - 1
        if tie.text == tokenizer.decode(main[: tie.step]):
            continue  # a token that decodes to nothing (a special token): which one is not told by its text
        top = np.argsort(-model.logits([*ids, *main[: tie.step]])[-1])[:5]
        (token,) = [int(t) for t in top if tokenizer.decode([*main[: tie.step], int(t)]) == tie.text]
        after = steps - tie.step - 1
        more = tie.branch.steps - tie.step - 1 - int(tie.branch.ended)
        rest, ended = greedy(model, [*ids, *main[: tie.step], token], more + int(tie.branch.ended), model.end_ids)
        assert tie.branch.answer == tokenizer.decode([*main[: tie.step], token, *rest])
        assert ended == tie.branch.ended
        assert more <= after
    assert spent <= budget
    assert any(t.branch is None and not t.ends for t in followed.near_ties), "the budget runs out before the ties do"


def test_a_template_that_refuses_a_system_message_leaves_no_chat_to_judge(
    original: Path, spec: ModelSpec, tmp_path: Path
) -> None:
    """Users get the template's refusal as an error (HTTP 400), not a wrong answer: nothing of a chat to compare."""
    refusing = copy_checkpoint(original, tmp_path / "refusing")
    config = json.loads((refusing / "tokenizer_config.json").read_text())
    config["chat_template"] = (
        "{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}"
        + CHAT_TEMPLATE
    )
    (refusing / "tokenizer_config.json").write_text(json.dumps(config))

    judged = judge_reference(load_llama(refusing), refusing, spec)

    assert judged.chats == () and len(judged.plain) == len(GPT_REFERENCE_PROMPTS)
