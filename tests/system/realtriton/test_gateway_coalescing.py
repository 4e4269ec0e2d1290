"""Request coalescing in the gateway, against the real Triton (matrix repository, FT step stood in for: GPT answers
echo the prompt) with the official ``openai`` client as the peer: concurrent completions with the same parameters
reach the ensemble as fewer, batched executions, and each request still gets its own answer, error and deadline.

The stand-in sleeps per execution so that concurrent requests overlap a call in flight (they are merged while one
is under way, never by waiting)."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import openai
import pytest

from tests.system.realtriton.client import execution_stats
from tests.system.realtriton.repos import MATRIX
from tests.tritonft.gateway.server import GatewayProcess, started
from tritonft.local_triton import LocalTriton
from tritonft.repo.naming import RepoNames
from tritonft.standin import set_behaviour

pytestmark = pytest.mark.slow

MODEL = "gpt2-tp1"


@contextmanager
def gateway_at(
    triton: LocalTriton, workdir: Path, request: pytest.FixtureRequest, *extra: str
) -> Iterator[openai.OpenAI]:
    with started(GatewayProcess(triton.grpc_url, MATRIX, workdir, extra), request) as running:
        yield openai.OpenAI(base_url=f"{running.url}/v1", api_key="unused", max_retries=0, timeout=30)


@contextmanager
def slow_ft(repository: Path, sleep_s: float) -> Iterator[None]:
    ft = repository / RepoNames.of(next(s for s in MATRIX if s.name == MODEL)).ft
    set_behaviour(ft, sleep_s=sleep_s)
    try:
        yield
    finally:
        set_behaviour(ft)


def together(calls: Sequence[Callable[[], Any]], starts: Sequence[float] = ()) -> list[Any]:
    """Run ``calls`` concurrently, call ``i`` started ``starts[i]`` seconds in (default: 50 ms apart); their results
    or exceptions."""

    def run(index: int) -> Any:
        time.sleep(starts[index] if starts else index * 0.05)
        try:
            return calls[index]()
        except Exception as exc:
            return exc

    with ThreadPoolExecutor(len(calls)) as pool:
        return list(pool.map(run, range(len(calls))))


def complete(client: openai.OpenAI, prompt: str, **body: Any) -> str:
    answer = client.completions.create(model=MODEL, prompt=prompt, **{"max_tokens": 16, "temperature": 0, **body})
    return str(answer.choices[0].text)


def ensemble_executions(triton: LocalTriton) -> tuple[int, int]:
    """(rows inferred, executions) of the ensemble so far."""
    return execution_stats(triton, MODEL)


def gateway_calls(client: openai.OpenAI) -> tuple[float, float]:
    """(Triton calls, rows) the gateway reports for ``MODEL`` on its ``/metrics``."""
    with urllib.request.urlopen(str(client.base_url).replace("/v1/", "/metrics"), timeout=5) as answer:
        text = answer.read().decode()
    values = {
        line.split("{", 1)[0]: float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("tritonft_gateway_triton_call_rows_") and f'model="{MODEL}"' in line
    }
    return values.get("tritonft_gateway_triton_call_rows_count", 0.0), values.get(
        "tritonft_gateway_triton_call_rows_sum", 0.0
    )


PROMPTS = ["hello world", "the quick brown fox jumps", "once upon a time there was", "a", "b c d", "twelve words"]


def test_concurrent_same_parameter_requests_run_as_fewer_executions_with_their_own_answers(
    matrix_triton: LocalTriton, matrix_repository: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    with gateway_at(matrix_triton, tmp_path, request) as client:
        alone = [complete(client, p) for p in PROMPTS]
        before = ensemble_executions(matrix_triton)
        with slow_ft(matrix_repository, 0.5):
            merged = together([partial(complete, client, p) for p in PROMPTS])
        after = ensemble_executions(matrix_triton)
        calls, rows = gateway_calls(client)
    assert merged == alone == PROMPTS
    rows_inferred, executions = after[0] - before[0], after[1] - before[1]
    assert rows_inferred == len(PROMPTS)
    assert executions < len(PROMPTS), f"{len(PROMPTS)} requests ran as {executions} ensemble executions"
    assert (calls, rows) == (len(PROMPTS) + executions, 2 * len(PROMPTS))


def test_requests_with_different_parameters_are_not_merged(
    matrix_triton: LocalTriton, matrix_repository: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    with gateway_at(matrix_triton, tmp_path, request) as client:
        before = ensemble_executions(matrix_triton)
        with slow_ft(matrix_repository, 0.5):
            answers = together([partial(complete, client, "hello world", max_tokens=n) for n in (8, 9, 10, 11)])
        after = ensemble_executions(matrix_triton)
    assert answers == ["hello world"] * 4
    assert after[1] - before[1] == 4


def test_one_prompt_over_max_input_len_fails_only_its_own_request(
    matrix_triton: LocalTriton, matrix_repository: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    too_long = " ".join(["hello world"] * 80)
    prompts = ["first", "second", too_long, "fourth"]
    with gateway_at(matrix_triton, tmp_path, request) as client:
        with slow_ft(matrix_repository, 0.5):
            answers = together([partial(complete, client, p) for p in prompts])
        _, rows = gateway_calls(client)
    assert answers[:2] + answers[3:] == ["first", "second", "fourth"]
    assert isinstance(answers[2], openai.BadRequestError) and answers[2].code == "context_length_exceeded"
    assert rows > len(prompts), "the bad prompt was never merged with the others"


def test_a_merged_request_gets_a_504_at_its_own_deadline_while_the_call_answers_the_others(
    matrix_triton: LocalTriton, matrix_repository: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # deadline 4 s, 2.5 s per execution: "a" runs 0-2.5 s; "b" (from 0.5 s, deadline 4.5 s) and "c" (from 2 s,
    # deadline 6 s) wait for it, then run together 2.5-5 s: "b" expires during that call, "c" is answered by it.
    with gateway_at(matrix_triton, tmp_path, request, "--deadline", "4", "--calls-in-flight", "1") as client:
        with slow_ft(matrix_repository, 2.5):
            answers = together([partial(complete, client, p) for p in ("a", "b", "c")], (0, 0.5, 2.0))
        calls, rows = gateway_calls(client)
    assert answers[0] == "a" and answers[2] == "c"
    assert isinstance(answers[1], openai.APIStatusError) and answers[1].status_code == 504
    assert "4 s deadline" in answers[1].message
    assert (calls, rows) == (2, 3)


def test_switched_off_every_request_is_its_own_execution(
    matrix_triton: LocalTriton, matrix_repository: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    with gateway_at(matrix_triton, tmp_path, request, "--no-coalesce") as client:
        before = ensemble_executions(matrix_triton)
        with slow_ft(matrix_repository, 0.5):
            answers = together([partial(complete, client, p) for p in PROMPTS])
        after = ensemble_executions(matrix_triton)
        calls, rows = gateway_calls(client)
    assert answers == PROMPTS
    assert after[1] - before[1] == len(PROMPTS)
    assert (calls, rows) == (len(PROMPTS), len(PROMPTS))
