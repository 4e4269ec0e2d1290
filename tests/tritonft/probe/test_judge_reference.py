"""The judge's rule against the reference of the original weights (pure: answers in, verdict out)."""

from __future__ import annotations

import pytest

from tritonft.probe.judge_reference import (
    REFERENCE_PARAMETER,
    JudgeReference,
    NearTie,
    PromptReference,
    judge_against_reference,
    reference_from_model_config,
    tolerance_for,
)
from tritonft.spec import Family

STORY = PromptReference(
    "Once upon a time,",
    " there was a king who",
    steps=6,
    ended=False,
    near_ties=(NearTie(3, 0.21, " there was an"), NearTie(5, 0.4, " there was a king", ends=True)),
    min_gap=0.21,
)
FACT = PromptReference("The capital of France is", " Paris.", steps=3, ended=True, min_gap=2.5)


def reference(*prompts: PromptReference) -> JudgeReference:
    return JudgeReference(
        Family.GPT2, "openai-community/gpt2", "607a30d783dfa663caf39e06633721c8d4cfcd7e", "fp16", 0.5, prompts
    )


def test_answers_that_start_with_the_references_greedy_answers_pass() -> None:
    verdict = judge_against_reference(reference(STORY, FACT), [" there was a king who lived in", " Paris."])

    assert verdict.ok, verdict.detail
    assert "2 exactly" in verdict.detail


def test_an_answer_that_takes_a_near_tie_passes() -> None:
    verdict = judge_against_reference(reference(STORY), [" there was an old man"])

    assert verdict.ok, verdict.detail
    assert "1 through a near-tie within 0.5 nats" in verdict.detail


def test_a_near_tie_that_ends_the_answer_passes_only_when_the_answer_ends_there() -> None:
    assert judge_against_reference(reference(STORY), [" there was a king"]).ok
    assert not judge_against_reference(reference(STORY), [" there was a kingdom"]).ok


def test_an_answer_after_the_reference_ended_fails() -> None:
    verdict = judge_against_reference(reference(FACT), [" Paris. And Lyon"])

    assert not verdict.ok


def test_a_wrong_answer_fails_naming_the_prompt_the_served_answer_and_the_references() -> None:
    verdict = judge_against_reference(reference(STORY, FACT), [" there was a king who", " Berlin."])

    assert not verdict.ok
    assert "1 of 2 answers differ from the reference of the original weights (openai-community/gpt2@607a30d783df" in (
        verdict.detail
    )
    assert (
        "the answer to 'The capital of France is' is not the reference's: served ' Berlin.', reference ' Paris.'"
        in (verdict.detail)
    )


def test_whitespace_is_not_a_difference() -> None:
    assert judge_against_reference(reference(FACT), ["  Paris. "]).ok


def test_a_near_tie_whose_text_the_reference_already_says_opens_nothing() -> None:
    blank = PromptReference("Hi", " you are", steps=2, ended=False, near_ties=(NearTie(0, 0.1, ""),))

    assert not judge_against_reference(reference(blank), [" anything at all"]).ok


def test_a_near_tie_that_differs_from_the_reference_only_in_whitespace_can_be_taken() -> None:
    """A served precision may end the sentence with a line break where the fp32 reference goes on with a space."""
    capital = PromptReference(
        "The capital of France is",
        " Paris. The city is",
        steps=5,
        ended=False,
        near_ties=(NearTie(2, 0.3, " Paris.\n"),),
        min_gap=0.3,
    )

    verdict = judge_against_reference(reference(capital), [" Paris.\nIt has"])

    assert verdict.ok, verdict.detail
    assert "through a near-tie" in verdict.detail
    assert not judge_against_reference(reference(capital), [" Paris. Bananas"]).ok, "not the tie: another token"


def test_a_missing_answer_fails() -> None:
    assert not judge_against_reference(reference(STORY, FACT), [" there was a king who"]).ok


def test_the_reference_round_trips_through_the_model_configuration() -> None:
    original = reference(STORY, FACT)
    config = {"parameters": {REFERENCE_PARAMETER: {"string_value": original.to_json()}}}

    assert reference_from_model_config(config) == original
    assert reference_from_model_config({"parameters": {}}) is None


def test_an_unreadable_reference_is_an_error_naming_the_parameter() -> None:
    with pytest.raises(ValueError, match=REFERENCE_PARAMETER):
        reference_from_model_config({"parameters": {REFERENCE_PARAMETER: {"string_value": "{}"}}})


@pytest.mark.parametrize(("dtype", "nats"), [("fp32", 0.1), ("fp16", 0.5), ("bf16", 1.5)])
def test_the_tolerance_grows_with_the_served_precisions_rounding(dtype: str, nats: float) -> None:
    assert tolerance_for(dtype) == nats
