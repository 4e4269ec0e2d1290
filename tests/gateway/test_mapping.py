"""OpenAI request bodies -> ensemble inputs (pure)."""

from __future__ import annotations

import csv

import pytest

from tritonft.gateway.config import ServedModel
from tritonft.gateway.errors import ApiError, from_triton
from tritonft.gateway.mapping import ensemble_request, held_back, stream_delta
from tritonft.spec import Family

GPT = ServedModel("gpt", Family.GPT2, streaming=False, max_output_len=32, max_input_len=64)


def params(body: dict[str, object]) -> dict[str, object]:
    return {p.name: p.value for p in ensemble_request({"model": "gpt", **body}, GPT).parameters}


def test_temperature_zero_is_greedy_decoding() -> None:
    assert params({"prompt": "hi", "temperature": 0}) == {"max_output_len": 16, "runtime_top_k": 1}


def test_sampling_uses_the_nucleus_at_the_temperature() -> None:
    got = params({"prompt": "hi", "temperature": 0.7, "top_p": 0.9, "max_tokens": 5, "seed": 11})
    assert got == {"max_output_len": 5, "runtime_top_k": 0, "runtime_top_p": 0.9, "temperature": 0.7, "random_seed": 11}


def test_n_becomes_the_beam_width() -> None:
    assert params({"prompt": "hi", "n": 3})["beam_width"] == 3


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
