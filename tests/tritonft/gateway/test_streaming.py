"""A streamed answer is primed: an error before its first chunk is raised for an HTTP error answer, one after it is
an SSE error event; and the one rule that turns Triton unreachable into a model waking up."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import pytest

from tritonft.gateway.errors import ApiError, client_error, deadline_expired, from_triton
from tritonft.gateway.streaming import Chunks, primed

DOWN = from_triton("UNAVAILABLE", "connection refused", 60)
TOO_LONG = from_triton("INVALID_ARGUMENT", "the prompt is 80 tokens; max_input_len is 64", 60)
CHUNKS = Chunks("cmpl-1", 1700000000, "gpt", chat=False)
ASLEEP = frozenset({"gpt"})


async def failing_after(pieces: list[str], error: ApiError) -> AsyncGenerator[bytes, None]:
    for index, text in enumerate(pieces):
        yield CHUNKS.piece(index, text, None)
    raise error


def unchanged(error: ApiError) -> ApiError:
    return error


async def read(events: AsyncIterator[bytes]) -> list[Any]:
    out: list[Any] = []
    async for event in events:
        data = event.removeprefix(b"data: ").removesuffix(b"\n\n")
        out.append(data.decode() if data == b"[DONE]" else json.loads(data))
    return out


def test_an_error_before_the_first_chunk_is_raised_not_streamed() -> None:
    with pytest.raises(ApiError) as caught:
        asyncio.run(primed((), failing_after([], TOO_LONG), unchanged))
    assert caught.value is TOO_LONG


def test_an_error_after_the_first_chunk_is_an_error_event_then_done() -> None:
    async def run() -> list[Any]:
        return await read(await primed((), failing_after(["hello"], TOO_LONG), unchanged))

    events = asyncio.run(run())
    assert events[0]["choices"][0]["text"] == "hello"
    assert events[1:] == [TOO_LONG.body(), "[DONE]"]


def test_the_error_event_is_the_error_the_client_is_answered() -> None:
    async def run() -> list[Any]:
        return await read(await primed((), failing_after(["hello"], DOWN), lambda e: client_error(e, "gpt", ASLEEP)))

    assert asyncio.run(run())[1]["error"]["code"] == "model_starting"


def test_a_chat_stream_names_the_assistant_before_the_first_chunk() -> None:
    chat = Chunks("chatcmpl-1", 1700000000, "gpt", chat=True)

    async def pieces() -> AsyncGenerator[bytes, None]:
        yield chat.piece(0, "hi", None)
        yield chat.piece(0, "", "stop")

    async def run() -> list[Any]:
        return await read(await primed(chat.opening(), pieces(), unchanged))

    events = asyncio.run(run())
    assert [e["choices"][0]["delta"] for e in events[:-1]] == [{"role": "assistant"}, {"content": "hi"}, {}]
    assert [e["object"] for e in events[:-1]] == ["chat.completion.chunk"] * 3
    assert events[-1] == "[DONE]"


def test_triton_unreachable_for_a_model_that_scales_to_zero_is_model_starting_with_retry_after() -> None:
    error = client_error(DOWN, "gpt", ASLEEP)
    assert (error.status, error.code, error.retry_after_s) == (503, "model_starting", 60)


def test_triton_unreachable_for_a_model_that_does_not_scale_to_zero_stays_triton_down() -> None:
    assert client_error(DOWN, "gpt", frozenset({"t5"})) is DOWN


@pytest.mark.parametrize("error", [TOO_LONG, deadline_expired(60)], ids=["refused", "deadline"])
def test_other_errors_of_a_model_that_scales_to_zero_are_answered_as_they_are(error: ApiError) -> None:
    assert client_error(error, "gpt", ASLEEP) is error


def event_body(event: bytes) -> Any:
    return json.loads(event.removeprefix(b"data: ").removesuffix(b"\n\n"))


def test_a_stream_asked_for_usage_ends_with_a_chunk_of_usage_and_no_choices() -> None:
    chunks = Chunks("cmpl-1", 1700000000, "gpt", chat=True, include_usage=True)
    last = event_body(chunks.usage({"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}))
    assert last["choices"] == [] and last["usage"] == {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
    assert last["object"] == "chat.completion.chunk"
    assert event_body(chunks.piece(0, "hi", None))["usage"] is None


def test_a_stream_not_asked_for_usage_has_no_usage_field() -> None:
    assert "usage" not in event_body(CHUNKS.piece(0, "hi", None))
