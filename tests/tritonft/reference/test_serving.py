"""FT's Triton tensors in and out of the reference (what the reference engine's model.py runs), one rule per test."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.tritonft.reference.checkpoints import MAX_NEW_TOKENS, PROMPTS
from tests.tritonft.reference.conftest import golden
from tritonft.reference import GenerationRequest, build_model, generate, load_checkpoint
from tritonft.reference.decoding import decayed_top_p
from tritonft.reference.serving import (
    REFUSED_WHEN_SET,
    local_checkpoint,
    output_tensors,
    requests_from_inputs,
    streamed_steps,
)
from tritonft.spec import Family

VOCAB = 100


def gpt_inputs(**extra: np.ndarray) -> dict[str, np.ndarray]:
    return {
        "input_ids": np.array([[5, 6, 7], [8, 0, 0]], np.uint32),
        "input_lengths": np.array([3, 1], np.uint32),
        "request_output_len": np.array([[4], [2]], np.uint32),
        **extra,
    }


def test_each_row_is_its_prompt_up_to_its_length_with_its_own_output_length_and_fts_defaults() -> None:
    rows = requests_from_inputs(gpt_inputs(), Family.GPT2, VOCAB)

    assert rows == [GenerationRequest((5, 6, 7), 4), GenerationRequest((8,), 2)]
    assert not rows[0].sampling and rows[0].beam_width == 1 and rows[0].end_id is None


def test_t5_reads_sequence_length_and_max_output_len() -> None:
    inputs = {
        "input_ids": np.array([[5, 6, 1]], np.uint32),
        "sequence_length": np.array([3], np.uint32),
        "max_output_len": np.array([7], np.uint32),
    }
    assert requests_from_inputs(inputs, Family.T5, VOCAB) == [GenerationRequest((5, 6, 1), 7)]


def test_every_per_row_decoding_input_reaches_its_row() -> None:
    per_row: dict[str, np.ndarray] = {
        "runtime_top_k": np.array([3, 0], np.uint32),
        "runtime_top_p": np.array([0.0, 0.8], np.float32),
        "temperature": np.array([0.5, 2.0], np.float32),
        "len_penalty": np.array([1.0, 0.0], np.float32),
        "repetition_penalty": np.array([1.5, 1.0], np.float32),
        "random_seed": np.array([11, 12], np.uint64),
        "end_id": np.array([9, 10], np.uint32),
        "start_id": np.array([1, 2], np.uint32),
        "top_p_decay": np.array([1.0, 0.5], np.float32),
        "top_p_min": np.array([0.1, 0.2], np.float32),
        "top_p_reset_ids": np.array([4, 5], np.uint32),
    }
    rows = requests_from_inputs(gpt_inputs(**per_row), Family.GPT2, VOCAB)

    assert (rows[0].top_k, rows[1].top_k) == (3, 0)
    assert rows[1].top_p == pytest.approx(0.8) and rows[1].temperature == 2.0
    assert (rows[0].len_penalty, rows[0].repetition_penalty) == (1.0, 1.5)
    assert (rows[0].random_seed, rows[1].random_seed) == (11, 12)
    assert (rows[0].end_id, rows[1].end_id) == (9, 10)
    assert (rows[1].top_p_decay, rows[1].top_p_reset_id) == (0.5, 5)
    assert rows[1].top_p_min == pytest.approx(0.2)
    assert rows[0].start_id is None, "GPT starts from its prompt; FT ignores start_id there"


def test_a_value_sent_once_applies_to_every_row() -> None:
    rows = requests_from_inputs(gpt_inputs(beam_width=np.array([3], np.uint32)), Family.GPT2, VOCAB)
    assert [r.beam_width for r in rows] == [3, 3]


def test_word_lists_become_each_rows_phrases() -> None:
    stop = np.array([[[5, 6, 9], [2, 3, -1]], [[0, 0, 0], [-1, -1, -1]]], np.int32)
    rows = requests_from_inputs(gpt_inputs(stop_words_list=stop), Family.GPT2, VOCAB)
    assert (rows[0].stop_words, rows[1].stop_words) == (((5, 6), (9,)), ())


def test_rows_asking_for_different_beam_widths_are_refused() -> None:
    with pytest.raises(ValueError, match="beam_width: rows ask for \\[1, 2\\]; FasterTransformer takes one"):
        requests_from_inputs(gpt_inputs(beam_width=np.array([1, 2], np.uint32)), Family.GPT2, VOCAB)


@pytest.mark.parametrize("name", sorted(REFUSED_WHEN_SET))
def test_an_input_the_reference_cannot_honour_is_refused_when_set_and_accepted_when_zero(name: str) -> None:
    dtype = np.bool_ if name.startswith("is_") else np.float32
    with pytest.raises(ValueError, match=f"^{name}: "):
        requests_from_inputs(gpt_inputs(**{name: np.array([0, 1], dtype)}), Family.GPT2, VOCAB)
    assert len(requests_from_inputs(gpt_inputs(**{name: np.array([0, 0], dtype)}), Family.GPT2, VOCAB)) == 2


def test_a_prompt_length_beyond_the_ids_names_the_row() -> None:
    inputs = gpt_inputs(input_lengths=np.array([3, 4], np.uint32))
    with pytest.raises(ValueError, match="input_lengths: row 1 says 4 tokens but input_ids has 3 columns"):
        requests_from_inputs(inputs, Family.GPT2, VOCAB)


def test_a_token_outside_the_vocabulary_is_refused() -> None:
    inputs = gpt_inputs(input_ids=np.array([[5, 6, 700], [8, 0, 0]], np.uint32))
    with pytest.raises(ValueError, match="input_ids: row 0 holds token 700 but the model's vocabulary is 100"):
        requests_from_inputs(inputs, Family.GPT2, VOCAB)


def test_a_missing_required_input_is_named() -> None:
    inputs = gpt_inputs()
    del inputs["request_output_len"]
    with pytest.raises(ValueError, match="request_output_len is required"):
        requests_from_inputs(inputs, Family.GPT2, VOCAB)


@pytest.fixture(scope="module")
def gpt2(converted):
    return build_model(load_checkpoint(converted("gpt2", 1)))


def test_gpt_outputs_carry_fts_names_and_log_probs_only_when_asked(gpt2) -> None:
    rows = [GenerationRequest(p, 3) for p in PROMPTS["gpt2"][:2]]
    result = generate(gpt2, rows)

    plain = output_tensors(result, rows, Family.GPT2, log_probs=False)
    with_log_probs = output_tensors(result, rows, Family.GPT2, log_probs=True)

    assert sorted(plain) == ["output_ids", "response_input_lengths", "sequence_length"]
    assert plain["response_input_lengths"].tolist() == [len(r.input_ids) for r in rows]
    assert sorted(with_log_probs) == sorted([*plain, "cum_log_probs", "output_log_probs"])
    np.testing.assert_allclose(with_log_probs["output_log_probs"].sum(axis=-1), with_log_probs["cum_log_probs"])
    assert (with_log_probs["output_log_probs"] < 0).all()


def test_streamed_steps_grow_one_token_per_step_up_to_the_full_answer(gpt2) -> None:
    rows = [GenerationRequest(p, 4) for p in PROMPTS["gpt2"][:2]]
    result = generate(gpt2, rows)
    prompt_lengths = np.array([[len(r.input_ids)] for r in rows])

    steps = list(streamed_steps(result, rows, Family.GPT2, [gpt2.end_id] * 2))

    assert len(steps) == 4
    for count, step in enumerate(steps, start=1):
        assert (step.sequence_length == np.minimum(result.sequence_length, prompt_lengths + count)).all()
        for row in range(2):
            n = int(step.sequence_length[row, 0])
            assert step.output_ids[row, 0, :n].tolist() == result.output_ids[row, 0, :n].tolist()
            assert (step.output_ids[row, 0, n:] == gpt2.end_id).all()
    assert (steps[-1].output_ids == result.output_ids).all()


def test_top_p_decays_by_its_factor_down_to_its_floor_and_resets_on_the_reset_token() -> None:
    request = GenerationRequest((1,), 4, top_p=0.9, top_p_decay=0.5, top_p_min=0.2, top_p_reset_id=7)
    assert decayed_top_p(0.9, 3, request) == pytest.approx(0.45)
    assert decayed_top_p(0.3, 3, request) == pytest.approx(0.2)
    assert decayed_top_p(0.2, 7, request) == pytest.approx(0.9)


def test_top_p_decay_outside_zero_to_one_is_no_decay_as_in_ft() -> None:
    request = GenerationRequest((1,), 4, top_p=0.9, top_p_decay=1.5)
    assert decayed_top_p(0.9, 3, request) == pytest.approx(0.9)


def test_t5_decodes_from_the_requested_start_id(converted) -> None:
    t5 = build_model(load_checkpoint(converted("t5", 1)))
    prompt = PROMPTS["t5"][0]
    default = generate(t5, [GenerationRequest(prompt, MAX_NEW_TOKENS)]).generated[0][0]
    case = next(c for c in golden("t5")["cases"] if c["mode"] == "greedy" and tuple(c["prompt"]) == prompt)

    own = generate(t5, [GenerationRequest(prompt, MAX_NEW_TOKENS, start_id=t5.start_id)]).generated[0][0]
    other = generate(t5, [GenerationRequest(prompt, MAX_NEW_TOKENS, start_id=5)]).generated[0][0]

    assert default == own == case["outputs"][0]
    assert other != default


def test_the_checkpoint_path_rendered_for_the_server_is_found_inside_a_moved_repository(tmp_path: Path) -> None:
    model_dir = tmp_path / "repo" / "demo-ft"
    (model_dir / "1" / "2-gpu").mkdir(parents=True)

    assert local_checkpoint("/models/demo-ft/1/2-gpu", model_dir) == model_dir / "1" / "2-gpu"
    assert local_checkpoint(str(model_dir / "1" / "2-gpu"), tmp_path) == model_dir / "1" / "2-gpu"
