"""``stream: true`` answers: the OpenAI chunk events, and the stream primed before its status is sent.

A streamed answer's HTTP status goes out with its first byte, so an error after that can only be an SSE error
event, which a client reads as a broken stream: the ``openai`` client retries a 503 (a model waking from zero) by
itself, never an error event. So the first event of the completion is awaited before the response starts
(:func:`primed`): whatever fails before it (Triton unreachable, a model asleep, a prompt Triton refuses, the
deadline before the first token) is answered as a plain HTTP error with its status and headers, exactly as the same
request unstreamed; only an error after it is an error event.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from tritonft.gateway import sse
from tritonft.gateway.errors import ApiError


@dataclass(frozen=True)
class Chunks:
    """The chunk events of one streamed answer: ``chat.completion.chunk`` deltas for chat, else
    ``text_completion`` pieces."""

    rid: str
    created: int
    model: str
    chat: bool
    include_usage: bool = False
    """``stream_options.include_usage``: the last chunk has ``usage`` (:meth:`usage`); every other chat chunk has
    ``usage: null`` (OpenAI's ``CreateChatCompletionStreamResponse``: nullable), every other completion chunk none
    (``CreateCompletionResponse``'s ``usage`` is not nullable)."""

    def _event(self, choice: dict[str, Any] | None, usage: dict[str, int] | None = None) -> bytes:
        kind = "chat.completion.chunk" if self.chat else "text_completion"
        payload: dict[str, Any] = {
            "id": self.rid,
            "object": kind,
            "created": self.created,
            "model": self.model,
            "choices": [] if choice is None else [choice],
        }
        if self.include_usage and (self.chat or usage is not None):
            payload["usage"] = usage
        return sse.event(payload)

    def usage(self, usage: dict[str, int]) -> bytes:
        """The last chunk of a stream that asked for usage: no choices, the whole answer's ``usage``."""
        return self._event(None, usage)

    def opening(self) -> tuple[bytes, ...]:
        """What comes before the completion: a chat stream's first delta names the assistant's role."""
        if not self.chat:
            return ()
        return (self._event({"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}),)

    def piece(self, index: int, text: str, finish: str | None) -> bytes:
        """``text`` of choice ``index``; ``finish`` (``stop``/``length``) on the choice's last chunk."""
        if self.chat:
            return self._event({"index": index, "delta": {"content": text} if text else {}, "finish_reason": finish})
        return self._event({"index": index, "text": text, "logprobs": None, "finish_reason": finish})


async def primed(
    opening: tuple[bytes, ...], pieces: AsyncGenerator[bytes, None], answered: Callable[[ApiError], ApiError]
) -> AsyncIterator[bytes]:
    """The whole event stream (``opening``, then ``pieces``, then ``[DONE]``) once ``pieces`` has produced its first
    event. An :class:`ApiError` before that is raised here, for the caller to answer as an HTTP error; one after it
    becomes an error event (what ``answered`` makes of it) that ends the stream."""
    try:
        first: tuple[bytes, ...] = (await pieces.__anext__(),)
    except StopAsyncIteration:
        first = ()
    return _events(opening + first, pieces, answered)


async def _events(
    sent: tuple[bytes, ...], rest: AsyncGenerator[bytes, None], answered: Callable[[ApiError], ApiError]
) -> AsyncIterator[bytes]:
    try:
        for event in sent:
            yield event
        async for event in rest:
            yield event
    except ApiError as exc:
        yield sse.event(answered(exc).body())
    finally:
        await rest.aclose()  # a client gone mid-stream: end the Triton call now, not when the generator is collected
    yield sse.DONE
