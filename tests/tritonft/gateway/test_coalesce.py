"""Which completions the gateway merges into one Triton call, and how a merged call's answers and errors reach each
request (the calls are recorded by an in-process ``send``; the real-Triton behaviour is in
``tests/system/realtriton/test_gateway_coalescing.py``)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from typing import Any

import pytest

from tritonft.gateway.coalesce import Coalescer, merge_key, retry_alone, take_batch
from tritonft.gateway.config import ServedModel
from tritonft.gateway.errors import ApiError
from tritonft.gateway.mapping import EnsembleRequest, ensemble_request
from tritonft.spec import Family

GPT = ServedModel("gpt", Family.GPT2, streaming=False, max_output_len=32, max_input_len=64, max_batch_size=4)


def request(prompt: str | list[str] = "hi", **body: Any) -> EnsembleRequest:
    return ensemble_request({"model": "gpt", "prompt": prompt, "temperature": 0, **body}, GPT)


def test_greedy_requests_with_the_same_parameters_share_a_key() -> None:
    assert merge_key(request("one")) == merge_key(request("two")) is not None


def test_greedy_n_choices_are_the_same_call_as_one_choice() -> None:
    assert merge_key(request("one", n=3)) == merge_key(request("two")) is not None


@pytest.mark.parametrize(
    "other",
    [
        {"max_tokens": 5},
        {"stop": "x"},
        {"n": 2, "best_of": 2},
        {"temperature": 0.5, "seed": 1},
        {"logprobs": 0},
    ],
)
def test_a_different_parameter_is_a_different_key(other: dict[str, Any]) -> None:
    assert merge_key(request("one", **other)) != merge_key(request("one"))


def test_a_greedy_request_s_seed_does_not_split_its_key() -> None:
    assert merge_key(request("one", seed=3)) == merge_key(request("two")) is not None


def test_sampled_requests_with_different_seeds_are_different_keys() -> None:
    assert merge_key(request(temperature=0.7, seed=1)) != merge_key(request(temperature=0.7, seed=2))


def test_the_same_parameters_of_two_models_are_different_keys() -> None:
    other = ensemble_request({"model": "gpt", "prompt": "hi", "temperature": 0}, replace(GPT, name="gpt-b"))
    assert merge_key(other) != merge_key(request())


def test_a_seeded_sampled_request_is_mergeable() -> None:
    assert merge_key(request(temperature=0.7, seed=5)) is not None


def test_an_unseeded_sampled_request_is_never_merged() -> None:
    assert merge_key(request(temperature=0.7)) is None


def test_a_streaming_request_is_never_merged() -> None:
    assert merge_key(request(stream=True)) is None


def test_a_batch_takes_the_oldest_requests_that_fit() -> None:
    assert take_batch([1, 1, 2, 1], 4) == 3


def test_a_batch_takes_a_request_larger_than_the_limit_alone() -> None:
    assert take_batch([6, 1], 4) == 1


def test_a_batch_takes_every_waiting_request_that_fits() -> None:
    assert take_batch([1, 1], 8) == 2


@pytest.mark.parametrize(
    ("error", "retried"),
    [
        (ApiError(400, "prompt too long", code="context_length_exceeded"), True),
        (ApiError(502, "model failed", "server_error"), True),
        (ApiError(503, "unreachable", "server_error", None, "triton_down"), False),
        (ApiError(504, "deadline", "timeout", None, "timeout"), False),
    ],
)
def test_only_errors_that_may_be_one_rows_are_retried_alone(error: ApiError, retried: bool) -> None:
    assert retry_alone(error) is retried


class Recorder:
    """A Triton stand-in for ``send``: records each call's prompts, answers each prompt with itself after
    ``delay_s``; a prompt starting with "bad" fails its whole call."""

    def __init__(self, delay_s: float = 0.05) -> None:
        self.calls: list[tuple[str, ...]] = []
        self.delay_s = delay_s

    async def __call__(self, req: EnsembleRequest, prompts: tuple[str, ...], deadline: float) -> list[list[str]]:
        self.calls.append(prompts)
        await asyncio.sleep(self.delay_s)
        bad = [p for p in prompts if p.startswith("bad")]
        if bad:
            raise ApiError(400, f"{bad[0]} is too long", code="context_length_exceeded")
        return [[p.upper()] for p in prompts]


async def concurrently(
    coalescer: Coalescer[list[str]], *requests: EnsembleRequest, deadline_s: float = 5.0
) -> list[Any]:
    deadline = time.monotonic() + deadline_s
    return list(await asyncio.gather(*(coalescer.answer(r, deadline) for r in requests), return_exceptions=True))


def test_a_lone_request_is_sent_in_the_turn_it_arrives() -> None:
    async def scenario() -> None:
        send = Recorder()
        answer = asyncio.ensure_future(Coalescer(send, 5.0, 1).answer(request("one"), time.monotonic() + 5))
        await asyncio.sleep(0)
        assert send.calls == [("one",)]
        assert await answer == [["ONE"]]

    asyncio.run(scenario())


def test_requests_arriving_while_a_call_is_in_flight_go_together_in_the_next_call() -> None:
    send = Recorder()
    answers = asyncio.run(concurrently(Coalescer(send, 5.0, 1), *(request(p) for p in ("a", "b", "c", "d"))))
    assert send.calls == [("a",), ("b", "c", "d")]
    assert answers == [[["A"]], [["B"]], [["C"]], [["D"]]]


def test_calls_in_flight_sets_how_many_calls_go_before_requests_wait() -> None:
    send = Recorder()
    asyncio.run(concurrently(Coalescer(send, 5.0, 2), *(request(p) for p in "abcde")))
    assert send.calls == [("a",), ("b",), ("c", "d", "e")]


def test_a_merged_call_carries_at_most_max_batch_size_rows() -> None:
    send = Recorder()
    asyncio.run(concurrently(Coalescer(send, 5.0, 1), *(request(p) for p in "abcdefg")))
    assert send.calls == [("a",), ("b", "c", "d", "e"), ("f", "g")]


def test_a_request_with_a_list_of_prompts_is_merged_whole_and_answered_in_order() -> None:
    send = Recorder()
    answers = asyncio.run(concurrently(Coalescer(send, 5.0, 1), request("a"), request(["b", "c"]), request("d")))
    assert send.calls == [("a",), ("b", "c", "d")]
    assert answers[1] == [["B"], ["C"]]


def test_more_prompts_than_max_batch_size_go_in_calls_of_at_most_that_many_rows() -> None:
    send = Recorder()
    answers = asyncio.run(concurrently(Coalescer(send, 5.0, 1), request(list("abcdef"))))
    assert sorted(send.calls) == [("a", "b", "c", "d"), ("e", "f")]
    assert answers == [[[p.upper()] for p in "abcdef"]]


def test_requests_with_different_parameters_are_not_merged() -> None:
    send = Recorder()
    asyncio.run(concurrently(Coalescer(send, 5.0, 1), request("a"), request("b"), request("c", max_tokens=4)))
    assert send.calls == [("a",), ("c",), ("b",)]


def test_unseeded_sampled_requests_are_each_sent_alone() -> None:
    send = Recorder()
    asyncio.run(concurrently(Coalescer(send, 5.0, 1), *(request(p, temperature=0.9) for p in "abc")))
    assert sorted(send.calls) == [("a",), ("b",), ("c",)]


def test_switched_off_every_prompt_is_its_own_call() -> None:
    send = Recorder()
    asyncio.run(concurrently(Coalescer(send, 5.0, 1, enabled=False), request("a"), request(["b", "c"])))
    assert sorted(send.calls) == [("a",), ("b",), ("c",)]


def test_one_bad_row_fails_only_its_own_request() -> None:
    send = Recorder()
    requests = (request("a"), request("b"), request("bad"), request("c"))
    answers = asyncio.run(concurrently(Coalescer(send, 5.0, 1), *requests))
    assert send.calls[:2] == [("a",), ("b", "bad", "c")]
    assert sorted(send.calls[2:]) == [("b",), ("bad",), ("c",)]
    assert answers[:2] == [[["A"]], [["B"]]] and answers[3] == [["C"]]
    assert isinstance(answers[2], ApiError) and answers[2].code == "context_length_exceeded"


def test_an_unreachable_triton_fails_a_merged_call_without_retries() -> None:
    calls: list[tuple[str, ...]] = []

    async def down(req: EnsembleRequest, prompts: tuple[str, ...], deadline: float) -> list[list[str]]:
        calls.append(prompts)
        await asyncio.sleep(0.01)
        raise ApiError(503, "unreachable", "server_error", None, "triton_down")

    answers = asyncio.run(concurrently(Coalescer(down, 5.0, 1), *(request(p) for p in "abc")))
    assert calls == [("a",), ("b", "c")]
    assert all(isinstance(a, ApiError) and a.status == 503 for a in answers)


def test_a_waiting_request_is_answered_504_at_its_own_deadline_while_its_call_goes_on() -> None:
    calls: list[tuple[str, ...]] = []
    gates = [asyncio.Event(), asyncio.Event()]

    async def gated(req: EnsembleRequest, prompts: tuple[str, ...], deadline: float) -> list[list[str]]:
        calls.append(prompts)
        await gates[len(calls) - 1].wait()
        return [[p.upper()] for p in prompts]

    async def scenario() -> None:
        coalescer = Coalescer(gated, 0.2, 1)
        now = time.monotonic()
        a = asyncio.ensure_future(coalescer.answer(request("a"), now + 10))
        await asyncio.sleep(0)
        b = asyncio.ensure_future(coalescer.answer(request("b"), now + 0.2))
        c = asyncio.ensure_future(coalescer.answer(request("c"), now + 10))
        await asyncio.sleep(0)
        gates[0].set()
        assert await a == [["A"]]
        await asyncio.sleep(0.3)
        assert calls == [("a",), ("b", "c")]
        assert b.done() and not c.done()
        with pytest.raises(ApiError) as expired:
            b.result()
        assert expired.value.status == 504 and "0.2 s deadline" in expired.value.message
        gates[1].set()
        assert await c == [["C"]]

    asyncio.run(scenario())
