"""The FT step's dynamic batcher on the FT image's server (tritonserver 2.33.0, NGC 23.04) merges what production
sends it: T5 prompts of different lengths (``input_ids`` ragged) and the gateway's greedy, sampled and seeded
requests (one input set per model, :func:`tritonft.gateway.mapping.decoding_inputs`).

Triton batches only requests whose non-ragged inputs have equal shapes and that carry the same set of inputs. The
FT step is stood in for by the echo stand-in, made to sleep per execution so that the requests sent together queue
behind the first one; the FT step's own statistics (rows inferred, executions) say how many executions served
them. Requests are sent as the gateway sends them (its :class:`~tritonft.gateway.triton.Triton` client and
:func:`~tritonft.gateway.mapping.ensemble_request`)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.system.realtriton.client import execution_stats
from tests.system.realtriton.conftest import ServeTriton
from tests.system.realtriton.repos import matrix_spec, render_with_cli
from tritonft.gateway.config import ServedModel
from tritonft.gateway.mapping import EnsembleRequest, ensemble_request
from tritonft.gateway.triton import Triton
from tritonft.local_triton import LocalTriton
from tritonft.repo.naming import RepoNames
from tritonft.spec import Family
from tritonft.standin import set_behaviour, standin_all

pytestmark = pytest.mark.slow

SLEEP_S = 1.5
"""Each execution of the stood-in FT step: the requests sent together arrive while the first one executes."""


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory, tokenizers: dict[Family, Path]) -> Path:
    out = tmp_path_factory.mktemp("batching-repo")
    for name in ("t5-tp1", "gpt2-tp1"):
        scratch = tmp_path_factory.mktemp(f"scratch-{name}")
        render_with_cli(matrix_spec(name), out, tokenizers[matrix_spec(name).family], scratch)
    standin_all(out)
    return out


@pytest.fixture(scope="module")
def server(serve_triton: ServeTriton, repository: Path) -> LocalTriton:
    return serve_triton(repository, shared=False)


@pytest.fixture
def slow_steps(repository: Path) -> Iterator[None]:
    steps = [repository / RepoNames.of(matrix_spec(name)).ft for name in ("t5-tp1", "gpt2-tp1")]
    for step in steps:
        set_behaviour(step, sleep_s=SLEEP_S)
    try:
        yield
    finally:
        for step in steps:
            set_behaviour(step)


def send_together(server: LocalTriton, requests: list[tuple[EnsembleRequest, str]]) -> list[str]:
    """Every (request, prompt) at once through the gateway's client; each answer's text."""

    async def scenario() -> list[str]:
        triton = Triton(server.grpc_url)
        try:
            deadline = time.monotonic() + 60
            rows = await asyncio.gather(*(triton.generate(r, prompt, deadline, 60) for r, prompt in requests))
            return [row.beams[0].text for row in rows]
        finally:
            await triton.close()

    return asyncio.run(scenario())


def ft_step_counts(server: LocalTriton, model: str) -> tuple[int, int]:
    """(rows inferred, executions) of ``model``'s FT step so far."""
    return execution_stats(server, RepoNames.of(matrix_spec(model)).ft)


def gateway_request(model: str, body: dict[str, Any]) -> EnsembleRequest:
    return ensemble_request({"model": model, "prompt": "unused", **body}, ServedModel.from_spec(matrix_spec(model)))


def test_t5_prompts_of_different_lengths_share_an_execution_of_the_ft_step(
    server: LocalTriton, slow_steps: None
) -> None:
    prompts = [" ".join(["word"] * n) for n in range(1, 7)]
    greedy = gateway_request("t5-tp1", {"temperature": 0, "max_tokens": 4})
    rows_before, executions_before = ft_step_counts(server, "t5-tp1")
    answers = send_together(server, [(greedy, prompt) for prompt in prompts])
    rows_after, executions_after = ft_step_counts(server, "t5-tp1")
    assert all(answers), answers
    assert rows_after - rows_before == len(prompts)
    # Non-ragged, each length would need its own execution (six); ragged, the first runs alone and the rest
    # queue behind it and go together.
    assert executions_after - executions_before <= 2, (rows_after - rows_before, executions_after - executions_before)


def test_greedy_sampled_and_seeded_gateway_requests_share_an_execution_of_the_ft_step(
    server: LocalTriton, slow_steps: None
) -> None:
    kinds: list[dict[str, Any]] = [
        {"temperature": 0},
        {"temperature": 0.8, "top_p": 0.9},
        {"temperature": 0.8, "seed": 7},
    ]
    requests = [(gateway_request("gpt2-tp1", {**kind, "max_tokens": 4}), "hello world") for kind in kinds * 2]
    rows_before, executions_before = ft_step_counts(server, "gpt2-tp1")
    answers = send_together(server, requests)
    rows_after, executions_after = ft_step_counts(server, "gpt2-tp1")
    assert answers == ["hello world"] * len(requests)
    assert rows_after - rows_before == len(requests)
    # With a different input set per kind (greedy without the sampling inputs, sampling without a seed), at least
    # one execution per kind would follow the first: four or more.
    assert executions_after - executions_before <= 2, (rows_after - rows_before, executions_after - executions_before)
