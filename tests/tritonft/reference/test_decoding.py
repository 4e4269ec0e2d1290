"""Decoding rules as FasterTransformer documents them, one behaviour per test, on a converted golden GPT-2/T5."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.tritonft.reference.checkpoints import MAX_NEW_TOKENS, PROMPTS
from tests.tritonft.reference.conftest import golden
from tritonft.reference import GenerationRequest, build_model, generate, load_checkpoint
from tritonft.reference.decoding import apply_penalties, banned_tokens, parse_word_list, sample

PROMPT = PROMPTS["gptj"][0]


@pytest.fixture(scope="module")
def gptj(converted):
    return build_model(load_checkpoint(converted("gptj", 1)))


@pytest.fixture(scope="module")
def greedy_tokens():
    case = next(c for c in golden("gptj")["cases"] if c["mode"] == "greedy" and tuple(c["prompt"]) == PROMPT)
    tokens: list[int] = case["outputs"][0]
    return tokens


def tokens_of(model: Any, **options: Any) -> list[int]:
    return generate(model, [GenerationRequest(PROMPT, MAX_NEW_TOKENS, **options)]).generated[0][0]


def test_word_lists_are_read_in_fts_two_row_format():
    words = np.array([[5, 6, 7, 0], [2, 3, -1, -1]], dtype=np.int32)
    assert parse_word_list(words) == ((5, 6), (7,))


def test_an_empty_word_list_has_no_phrases():
    assert parse_word_list(np.array([[0], [-1]], dtype=np.int32)) == ()


def test_a_one_token_bad_word_is_never_generated(gptj, greedy_tokens):
    banned = greedy_tokens[0]
    got = tokens_of(gptj, bad_words=((banned,),))
    assert banned not in got
    assert got[0] != greedy_tokens[0]


def test_a_bad_phrase_bans_its_last_token_only_after_its_other_tokens(gptj, greedy_tokens):
    first, second = greedy_tokens[0], greedy_tokens[1]
    got = tokens_of(gptj, bad_words=((first, second),))
    assert got[0] == first
    assert got[1] != second
    assert banned_tokens([9, first], [(first, second)]) == [second]
    assert banned_tokens([first, 9], [(first, second)]) == []


def test_a_stop_phrase_ends_the_row_and_stays_in_the_output(gptj, greedy_tokens):
    phrase = tuple(greedy_tokens[2:4])
    result = generate(gptj, [GenerationRequest(PROMPT, MAX_NEW_TOKENS, stop_words=(phrase,))])
    assert result.generated[0][0] == greedy_tokens[:4]
    assert result.sequence_length[0, 0] == len(PROMPT) + 4
    assert (result.output_ids[0, 0, len(PROMPT) + 4 :] == gptj.end_id).all()


def test_the_end_id_ends_the_row_and_is_counted(gptj, greedy_tokens):
    end = greedy_tokens[2]
    result = generate(gptj, [GenerationRequest(PROMPT, MAX_NEW_TOKENS, end_id=end)])
    assert result.generated[0][0] == greedy_tokens[: greedy_tokens.index(end) + 1]
    assert result.sequence_length[0, 0] == len(PROMPT) + greedy_tokens.index(end) + 1


def test_request_output_len_bounds_the_generated_tokens(gptj, greedy_tokens):
    result = generate(gptj, [GenerationRequest(PROMPT, 3)])
    assert result.generated[0][0] == greedy_tokens[:3]
    assert result.output_ids.shape == (1, 1, len(PROMPT) + 3)


def test_sampling_is_deterministic_per_random_seed(gptj):
    options = {"top_k": 20, "temperature": 2.0}
    assert tokens_of(gptj, random_seed=7, **options) == tokens_of(gptj, random_seed=7, **options)


def test_different_random_seeds_sample_different_sequences(gptj):
    runs = {tuple(tokens_of(gptj, top_k=50, temperature=3.0, random_seed=seed)) for seed in range(4)}
    assert len(runs) > 1


def test_top_k_of_one_is_greedy(gptj, greedy_tokens):
    assert tokens_of(gptj, top_k=1, random_seed=3, temperature=5.0) == greedy_tokens


def test_a_tiny_top_p_keeps_only_the_most_likely_token(gptj, greedy_tokens):
    assert tokens_of(gptj, top_p=1e-6, random_seed=11) == greedy_tokens


def test_top_k_samples_only_among_the_k_best_in_proportion_to_their_probability():
    logits = np.array([0.0, 3.0, 1.0, 2.9, -1.0], dtype=np.float32)
    request = GenerationRequest((1,), 1, top_k=2)
    rng = np.random.default_rng(0)
    draws = [sample(logits, request, rng) for _ in range(4000)]
    counts = np.bincount(draws, minlength=5)
    assert set(np.flatnonzero(counts)) == {1, 3}
    expected = np.exp(3.0) / (np.exp(3.0) + np.exp(2.9))
    assert abs(counts[1] / 4000 - expected) < 0.03


def test_top_p_samples_from_the_smallest_set_reaching_p():
    logits = np.log(np.array([0.5, 0.3, 0.15, 0.05], dtype=np.float32))
    request = GenerationRequest((1,), 1, top_p=0.7)
    rng = np.random.default_rng(1)
    draws = {sample(logits, request, rng) for _ in range(2000)}
    assert draws == {0, 1}


def test_repetition_penalty_divides_positive_and_multiplies_negative_logits_of_seen_tokens():
    logits = np.array([2.0, -2.0, 1.0], dtype=np.float32)
    out = apply_penalties(logits, [0, 1, 1], GenerationRequest((1,), 1, repetition_penalty=2.0))
    assert out.tolist() == [1.0, -4.0, 1.0]


def test_temperature_scales_the_logits_when_sampling():
    logits = np.array([2.0, -1.0], dtype=np.float32)
    out = apply_penalties(logits, [], GenerationRequest((1,), 1, top_k=2, temperature=0.5))
    assert out.tolist() == [4.0, -2.0]


def test_a_large_repetition_penalty_changes_a_repeating_greedy_continuation(gptj, greedy_tokens):
    got = tokens_of(gptj, repetition_penalty=10.0)
    assert len(set(got)) > len(set(greedy_tokens)) or got != greedy_tokens


def test_beam_search_returns_beam_width_sequences_best_first(gptj):
    result = generate(gptj, [GenerationRequest(PROMPT, MAX_NEW_TOKENS, beam_width=3, len_penalty=1.0)])
    assert result.output_ids.shape == (1, 3, len(PROMPT) + MAX_NEW_TOKENS)
    assert list(result.cum_log_probs[0]) == sorted(result.cum_log_probs[0], reverse=True)
