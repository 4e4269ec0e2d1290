"""OpenAI request bodies -> ensemble inputs (pure)."""

from __future__ import annotations

import csv

import pytest

from tritonft.gateway.config import ServedModel
from tritonft.gateway.errors import ApiError, from_triton
from tritonft.gateway.mapping import (
    Beam,
    EnsembleRequest,
    Row,
    TensorValue,
    chat_body,
    choices,
    completion_body,
    ensemble_request,
    held_back,
    stream_delta,
    usage,
)
from tritonft.spec import Family

GPT = ServedModel("gpt", Family.GPT2, streaming=False, max_output_len=32, max_input_len=64, max_batch_size=8)


def params(body: dict[str, object]) -> dict[str, object]:
    return {p.name: p.value for p in ensemble_request({"model": "gpt", **body}, GPT).parameters}


def test_temperature_zero_is_greedy_decoding_with_ft_s_defaults_for_the_other_sampling_inputs() -> None:
    got = params({"prompt": "hi", "temperature": 0})
    assert got == {
        "max_output_len": 16,
        "runtime_top_k": 1,
        "runtime_top_p": 0.0,
        "temperature": 1.0,
        "random_seed": 0,
        "stop_words": "",
        "return_tokens": False,
    }


def test_sampling_uses_the_nucleus_at_the_temperature() -> None:
    got = params({"prompt": "hi", "temperature": 0.7, "top_p": 0.9, "max_tokens": 5, "seed": 11})
    expected = {"max_output_len": 5, "runtime_top_k": 0, "runtime_top_p": 0.9, "temperature": 0.7, "random_seed": 11}
    assert got == {**expected, "stop_words": "", "return_tokens": False}


BODIES: dict[str, dict[str, object]] = {
    "greedy": {"temperature": 0},
    "sampled": {"temperature": 0.8, "top_p": 0.5},
    "seeded": {"temperature": 0.8, "seed": 4},
    "stop phrases": {"temperature": 0, "stop": ["x", "y"]},
    "log-probabilities": {"temperature": 0, "logprobs": 0},
    "greedy n": {"temperature": 0, "n": 2},
    "chat-like stop": {"temperature": 0.3, "stop": "User:"},
}


def test_every_non_beam_request_of_a_model_sends_the_same_set_of_inputs() -> None:
    sets = {label: tuple(params({"prompt": "hi", **body})) for label, body in BODIES.items()}
    assert len(set(sets.values())) == 1, sets


def test_a_chat_request_sends_the_same_set_of_inputs_as_a_completion() -> None:
    chat = request({"messages": [{"role": "user", "content": "hi"}]}, chat=True)
    assert [p.name for p in chat.parameters] == list(params({"prompt": "hi"}))


def test_beam_search_alone_adds_the_beam_width_so_it_never_shares_a_batch_with_other_widths() -> None:
    beams = {p.name for p in request({"best_of": 2, "temperature": 0}).parameters}
    assert beams - set(params({"prompt": "hi"})) == {"beam_width"}


def test_a_sampled_request_without_a_seed_gets_a_seed_of_its_own() -> None:
    seeds = {params({"prompt": "hi", "temperature": 0.9})["random_seed"] for _ in range(8)}
    assert len(seeds) == 8


def test_a_streaming_model_is_sent_no_return_tokens_input() -> None:
    model = ServedModel("s", Family.GPT2, streaming=True, max_output_len=32, max_input_len=64)
    streaming = ensemble_request({"model": "s", "prompt": "hi", "stream": True}, model)
    assert "return_tokens" not in [p.name for p in streaming.parameters]


def test_best_of_with_greedy_decoding_becomes_the_beam_width() -> None:
    assert params({"prompt": "hi", "n": 2, "best_of": 3, "temperature": 0})["beam_width"] == 3


def test_stop_phrases_reach_the_ensemble_as_one_csv_line() -> None:
    line = str(params({"prompt": "hi", "stop": ["a, b", "c"]})["stop_words"])
    assert next(csv.reader([line])) == ["a, b", "c"]


def test_n_above_one_cannot_be_streamed() -> None:
    with pytest.raises(ApiError, match="cannot be streamed") as caught:
        ensemble_request({"prompt": "hi", "n": 2, "stream": True}, GPT)
    assert caught.value.param == "n"


def test_a_streamed_sequence_yields_only_the_new_text_after_the_prompt() -> None:
    assert stream_delta("hello", "hi there hello world", "hi there ", prompt_included=True) == " world"


@pytest.mark.parametrize(
    ("status", "code"),
    [("DEADLINE_EXCEEDED", 504), ("UNAVAILABLE", 503), ("INVALID_ARGUMENT", 400), ("INTERNAL", 502)],
)
def test_triton_statuses_map_to_http_statuses(status: str, code: int) -> None:
    assert from_triton(status, "boom", 5.0).status == code


@pytest.mark.parametrize(
    ("text", "held"),
    [("be brief\nUs", 2), ("be brief\nUser", 4), ("be brief\n", 0), ("a Use of U", 1), ("", 0), ("User: hi", 0)],
)
def test_a_stream_holds_back_the_end_that_may_begin_a_stop_phrase(text: str, held: int) -> None:
    assert held_back(text, ("User:", "###")) == held


def test_without_stop_phrases_a_stream_holds_nothing_back() -> None:
    assert held_back("be brief\nUser", ()) == 0


def request(body: dict[str, object], *, chat: bool = False) -> EnsembleRequest:
    base: dict[str, object] = {"model": "gpt"} if chat else {"model": "gpt", "prompt": "hi"}
    return ensemble_request(base | body, GPT, chat=chat)


def refused(body: dict[str, object], *, chat: bool = False) -> ApiError:
    with pytest.raises(ApiError) as caught:
        request(body, chat=chat)
    return caught.value


def test_greedy_n_is_one_call_whose_answer_is_every_choice() -> None:
    req = request({"n": 3, "temperature": 0})
    assert req.choice_requests() == (req,)
    row = Row((Beam("a", 2),), 5)
    assert choices(req, [[row]]) == [Row((Beam("a", 2),) * 3, 5)]


def test_sampled_n_is_one_call_per_choice_seeded_one_apart() -> None:
    parts = request({"n": 3, "temperature": 0.5, "seed": 10}).choice_requests()
    assert [next(p.value for p in part.parameters if p.name == "random_seed") for part in parts] == [10, 11, 12]
    assert all(part.n == 1 for part in parts)


def test_sampled_n_without_a_seed_still_gets_distinct_seeds() -> None:
    parts = request({"n": 2, "temperature": 0.5}).choice_requests()
    seeds = [next(p.value for p in part.parameters if p.name == "random_seed") for part in parts]
    assert seeds[1] == int(seeds[0]) + 1


def test_sampled_choices_are_the_first_beam_of_each_call() -> None:
    req = request({"n": 2, "temperature": 0.5, "seed": 1})
    calls = [[Row((Beam("a", 1),), 4)], [Row((Beam("b", 2),), 4)]]
    assert choices(req, calls) == [Row((Beam("a", 1), Beam("b", 2)), 4)]


def test_n_times_the_prompts_over_the_batch_limit_is_a_400_saying_the_limit() -> None:
    error = refused({"prompt": ["a", "b", "c"], "n": 3})
    assert error.param == "n" and "max_batch_size is 8" in error.message


def test_sampled_best_of_sends_best_of_seeded_rows_and_keeps_the_n_most_likely() -> None:
    req = request({"n": 2, "best_of": 3, "temperature": 0.7, "seed": 5})
    parts = req.choice_requests()
    assert [next(p.value for p in part.parameters if p.name == "random_seed") for part in parts] == [5, 6, 7]
    candidates = [Beam("a", 2, (), (-2.0, -2.0)), Beam("b", 1, (), (-0.5,)), Beam("c", 3, (), (-1.0, -1.0, -1.0))]
    calls = [[Row((beam,), 4)] for beam in candidates]
    assert choices(req, calls) == [Row((candidates[1], candidates[2]), 4)]


def test_sampled_best_of_times_the_prompts_over_the_batch_limit_is_refused() -> None:
    error = refused({"prompt": ["a", "b"], "best_of": 5, "temperature": 0.7})
    assert error.param == "best_of" and "max_batch_size is 8" in error.message


def test_best_of_below_n_is_refused() -> None:
    assert refused({"n": 3, "best_of": 2, "temperature": 0}).param == "best_of"


def test_usage_counts_each_prompt_once_and_every_choice() -> None:
    rows = [Row((Beam("a", 3), Beam("b", 4)), 5), Row((Beam("c", 1), Beam("d", 1)), 2)]
    assert usage(rows) == {"prompt_tokens": 7, "completion_tokens": 9, "total_tokens": 16}


def test_every_answer_carries_usage_and_echo_puts_the_prompt_first() -> None:
    req = request({"echo": True})
    body = completion_body("id", 0, req, [Row((Beam(" there", 1),), 1)])
    assert body["choices"][0]["text"] == "hi there"
    assert body["usage"] == {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}


def test_completion_logprobs_stop_where_the_stop_phrase_cut_the_text() -> None:
    req = request({"logprobs": 0, "stop": "!"})
    beam = Beam(" a b!", 4, (" a", " b", "!", " c"), (-0.5, -1.0, -2.0, -3.0))
    logprobs = completion_body("id", 0, req, [Row((beam,), 1)])["choices"][0]["logprobs"]
    assert logprobs == {
        "tokens": [" a", " b"],
        "token_logprobs": [-0.5, -1.0],
        "top_logprobs": [{" a": -0.5}, {" b": -1.0}],
        "text_offset": [0, 2],
    }


def test_chat_logprobs_list_each_token_with_its_bytes() -> None:
    req = request({"messages": [{"role": "user", "content": "x"}], "logprobs": True}, chat=True)
    body = chat_body("id", 0, req, Row((Beam(" é", 1, (" é",), (-0.25,)),), 3))
    assert body["choices"][0]["logprobs"]["content"] == [
        {"token": " é", "logprob": -0.25, "bytes": [32, 195, 169], "top_logprobs": []}
    ]


@pytest.mark.parametrize(
    ("body", "chat", "param"),
    [
        ({"logprobs": 1}, False, "logprobs"),
        ({"logprobs": True, "top_logprobs": 2}, True, "top_logprobs"),
        ({"top_logprobs": 0, "logprobs": "yes"}, True, "logprobs"),
        ({"logprobs": 0, "stream": True}, False, "logprobs"),
        ({"logprobs": 0, "echo": True}, False, "echo"),
        ({"stream_options": {"include_usage": True}}, False, "stream_options"),
        ({"stream": True, "stream_options": {"include_usage": 1}}, False, "stream_options"),
        ({"max_tokens": 4, "max_completion_tokens": 5}, True, "max_completion_tokens"),
    ],
)
def test_what_cannot_be_honoured_is_a_400_naming_the_parameter(body: dict[str, object], chat: bool, param: str) -> None:
    if chat:
        body = {"messages": [{"role": "user", "content": "x"}]} | body
    assert refused(body, chat=chat).param == param


def test_max_completion_tokens_is_chats_max_tokens() -> None:
    req = request({"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": 7}, chat=True)
    assert req.parameters[0] == TensorValue("max_output_len", "UINT32", 7)


def test_logprobs_ask_the_ensemble_for_each_tokens_text() -> None:
    assert TensorValue("return_tokens", "BOOL", True) in request({"logprobs": 0}).parameters
    assert TensorValue("return_tokens", "BOOL", False) in request({}).parameters


def test_logprobs_are_refused_for_a_model_rendered_streaming() -> None:
    streaming = ServedModel("s", Family.GPT2, streaming=True, max_output_len=32, max_input_len=64)
    with pytest.raises(ApiError) as caught:
        ensemble_request({"model": "s", "prompt": "hi", "logprobs": 0}, streaming)
    assert caught.value.param == "logprobs" and "streaming" in caught.value.message


@pytest.mark.parametrize("prompt", [[1212, 318], [[1212, 318]]], ids=["tokens", "token-lists"])
def test_a_token_id_prompt_is_refused_saying_to_send_the_text(prompt: object) -> None:
    error = refused({"prompt": prompt})
    assert error.param == "prompt"
    assert "token-id prompts are not supported" in error.message


def test_stream_obfuscation_is_refused_by_name_and_accepted_off() -> None:
    on = {"stream": True, "stream_options": {"include_usage": True, "include_obfuscation": True}}
    assert refused(on).param == "stream_options.include_obfuscation"
    off = {"stream": True, "stream_options": {"include_usage": True, "include_obfuscation": False}}
    assert request(off).include_usage


def test_a_chat_content_of_text_parts_reaches_the_ensemble_as_its_text() -> None:
    parts = [{"type": "text", "text": "hi"}, {"type": "text", "text": "there"}]
    req = request(
        {"messages": [{"role": "developer", "content": "be brief"}, {"role": "user", "content": parts}]}, chat=True
    )
    assert req.prompts == ("System: be brief\nUser: hi\nthere\nAssistant:",)
