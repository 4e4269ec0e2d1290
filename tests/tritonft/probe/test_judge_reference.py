"""The judge's rule against the reference of the original weights (pure: answers in, verdict out)."""

from __future__ import annotations

import dataclasses

import pytest

from tritonft.probe.judge_reference import (
    REFERENCE_PARAMETER,
    Branch,
    JudgeReference,
    NearTie,
    PromptReference,
    ServedAnswer,
    conversation_label,
    judge_against_reference,
    reference_from_model_config,
    rendering_problems,
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


BRANCHED = PromptReference(
    "Once upon a time,",
    " there was a king who ruled",
    steps=7,
    ended=False,
    near_ties=(
        NearTie(3, 0.3, " there was an", branch=Branch(" there was an old queen who", 7, False)),
        NearTie(4, 0.2, " there was a queen"),
    ),
    min_gap=0.2,
)
"""A near-tie the reference followed (its branch) and one it did not (beyond its branch budget)."""


def test_an_answer_that_takes_a_branched_near_tie_is_compared_to_the_branchs_end() -> None:
    verdict = judge_against_reference(reference(BRANCHED), [" there was an old queen who"])

    assert verdict.ok, verdict.detail
    assert "through a near-tie" in verdict.detail


def test_an_answer_that_leaves_the_branch_after_its_near_tie_fails_naming_the_branch() -> None:
    verdict = judge_against_reference(reference(BRANCHED), [" there was an apple pie"])

    assert not verdict.ok
    assert "took the near-tie at step 3 (0.30 nats) but then left the reference's branch after it" in verdict.detail
    assert "' there was an old queen who'" in verdict.detail


def test_after_a_near_tie_without_a_branch_nothing_more_is_compared() -> None:
    verdict = judge_against_reference(reference(BRANCHED), [" there was a queen of hearts"])

    assert verdict.ok, verdict.detail


def test_a_branchs_own_near_tie_is_a_choice_a_served_precision_may_make() -> None:
    tie = NearTie(5, 0.1, " there was an old king")
    branched = dataclasses.replace(
        BRANCHED,
        near_ties=(NearTie(3, 0.3, " there was an", branch=Branch(" there was an old queen who", 7, False, (tie,))),),
    )

    assert judge_against_reference(reference(branched), [" there was an old king"]).ok
    assert not judge_against_reference(reference(branched), [" there was an old dog"]).ok


def test_a_branch_that_ended_must_be_the_whole_answer() -> None:
    ended = dataclasses.replace(
        BRANCHED, near_ties=(NearTie(3, 0.3, " there was an", branch=Branch(" there was an end.", 5, True)),)
    )

    assert judge_against_reference(reference(ended), [" there was an end."]).ok
    assert not judge_against_reference(reference(ended), [" there was an end. And more"]).ok


CHAT_MESSAGES = (
    {"role": "system", "content": "Answer with exactly one word, in French."},
    {"role": "user", "content": "What color is the sky on a clear day?"},
)
CHAT = PromptReference(
    conversation_label(CHAT_MESSAGES),
    "Bleu.",
    steps=3,
    ended=True,
    prompt_tokens=40,
    messages=CHAT_MESSAGES,
    rendered=(
        "system: Answer with exactly one word, in French.\nuser: What color is the sky on a clear day?\nassistant:"
    ),
)


def chat_reference(*prompts: PromptReference) -> JudgeReference:
    return dataclasses.replace(reference(*prompts), family=Family.LLAMA, template_tokens=("<|eot_id|>", "</s>"))


def test_a_chat_that_ends_where_the_reference_ends_passes() -> None:
    verdict = judge_against_reference(chat_reference(CHAT), [ServedAnswer("Bleu.", "stop", 40)])

    assert verdict.ok, verdict.detail
    assert "1 of them a chat through the candidate's chat template" in verdict.detail


def test_a_chat_rendered_without_the_system_message_fails_naming_the_conversation_and_both_answers() -> None:
    rendered = "user: What color is the sky on a clear day?\nassistant:"
    served = ServedAnswer(" The sky is blue on a", "length", 28, tuple(rendering_problems(CHAT_MESSAGES, rendered)))

    verdict = judge_against_reference(chat_reference(CHAT), [served])

    assert not verdict.ok
    assert (
        f"the answer to {CHAT.prompt!r} is not the reference's: served ' The sky is blue on a', reference 'Bleu.'"
        in verdict.detail
    )
    assert (
        "the candidate's chat template renders the conversation wrong: the system message's content "
        "'Answer with exactly one word, in French.' is not in it at all" in verdict.detail
    )
    assert "the server made 28 tokens of the conversation as the candidate's template renders it" in verdict.detail


def test_a_chat_whose_words_are_right_but_rendering_drops_a_message_still_fails() -> None:
    """Deterministic, not by luck of sampling: the rendering is checked whatever the model answers."""
    served = ServedAnswer("Bleu.", "stop", 40, ("the system message's content is not in it",))

    assert not judge_against_reference(chat_reference(CHAT), [served]).ok


def test_a_chat_cut_by_its_length_where_the_reference_ended_fails() -> None:
    verdict = judge_against_reference(chat_reference(CHAT), [ServedAnswer("Bleu.", "length", 40)])

    assert not verdict.ok
    assert "did not end at the model's end-of-turn (finish_reason 'length')" in verdict.detail


def test_a_chat_that_took_a_near_tie_no_branch_followed_may_be_cut_by_its_length() -> None:
    """Past a near-tie beyond the branch budget the reference does not know where the answer ends: a right bf16
    model that took it and ran to its length is not refused for ending late."""
    unbranched = dataclasses.replace(CHAT, near_ties=(NearTie(0, 0.4, "Blue"),))

    verdict = judge_against_reference(chat_reference(unbranched), [ServedAnswer("Blue sky, clear and", "length", 40)])

    assert verdict.ok, verdict.detail


def test_a_chat_answer_carrying_a_template_token_fails() -> None:
    verdict = judge_against_reference(chat_reference(CHAT), [ServedAnswer("Bleu.<|eot_id|>", "stop", 40)])

    assert not verdict.ok
    assert "carries the template's token(s) '<|eot_id|>'" in verdict.detail


def test_a_plain_prompt_the_server_tokenizes_differently_refuses_the_verdict() -> None:
    counted = dataclasses.replace(FACT, prompt_tokens=6)

    verdict = judge_against_reference(reference(counted), [ServedAnswer(" Paris.", "stop", 7)])

    assert not verdict.ok
    assert "cannot judge this server: it does not tokenize the judged prompts as the reference did" in verdict.detail
    assert "'The capital of France is': the server made 7 tokens of the prompt, the reference 6 of it" in (
        verdict.detail
    )


def test_an_unknown_token_count_is_not_a_difference() -> None:
    counted = dataclasses.replace(FACT, prompt_tokens=6)

    assert judge_against_reference(reference(counted), [ServedAnswer(" Paris.")]).ok


def test_the_expected_rendering_holds_every_messages_content_in_order() -> None:
    assert rendering_problems(CHAT_MESSAGES, CHAT.rendered) == []
    swapped = "user: What color is the sky on a clear day?\nsystem: Answer with exactly one word, in French."

    assert rendering_problems(CHAT_MESSAGES, swapped) == [
        "the user message's content 'What color is the sky on a clear day?' is not in it after the previous message's"
    ]


def test_branches_chats_and_token_counts_round_trip_through_the_model_configuration() -> None:
    original = chat_reference(BRANCHED, dataclasses.replace(FACT, prompt_tokens=6), CHAT)
    config = {"parameters": {REFERENCE_PARAMETER: {"string_value": original.to_json()}}}

    assert reference_from_model_config(config) == original
    assert (original.plain, original.chats) == ((BRANCHED, original.prompts[1]), (CHAT,))


def test_a_reference_of_the_first_format_is_still_read() -> None:
    raw = reference(STORY).to_dict() | {"format": 1}

    assert JudgeReference.from_dict(raw) == reference(STORY)


def test_a_chat_must_end_where_the_reference_path_it_followed_ends() -> None:
    """The reference ends after 'Bleu.'; a served precision taking the near-tie 'Azur' follows a branch that goes on."""
    branch = Branch("Azur, comme la mer", 5, False)
    tied = dataclasses.replace(CHAT, near_ties=(NearTie(0, 0.2, "Azur", branch=branch),))

    assert judge_against_reference(chat_reference(tied), [ServedAnswer("Azur, comme la mer", "length", 40)]).ok
    assert not judge_against_reference(chat_reference(tied), [ServedAnswer("Bleu.", "length", 40)]).ok
