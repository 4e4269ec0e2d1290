"""The gateway's transport spreads one model's requests over every Triton pod behind its Service: two real Triton
servers (2.33.0, the FT image's), each counting what it served (``nv_inference_request_success``), then a third
that appears (the autoscaler added a pod) and one that goes away (a scale-in).

In a cluster the addresses come from DNS (a headless Service's name gives one address per ready pod); here the
:class:`~tritonft.gateway.triton.Triton` client is given the servers' loopback addresses by a resolver the test
controls, which is the only part replaced."""

from __future__ import annotations

import asyncio
import re
import time
import urllib.request
from pathlib import Path

import pytest

from tests.system.realtriton.conftest import ServeTriton
from tests.system.realtriton.repos import matrix_spec, render_with_cli
from tritonft.gateway.config import ServedModel
from tritonft.gateway.mapping import EnsembleRequest
from tritonft.gateway.triton import Triton
from tritonft.local_triton import LocalTriton
from tritonft.spec import Family
from tritonft.standin import standin_all

pytestmark = pytest.mark.slow

MODEL = "gpt2-tp1"
REQUESTS = 40


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory, tokenizers: dict[Family, Path]) -> Path:
    out = tmp_path_factory.mktemp("spread-repo")
    render_with_cli(matrix_spec(MODEL), out, tokenizers[Family.GPT2], tmp_path_factory.mktemp("scratch"))
    standin_all(out)
    return out


def served(server: LocalTriton) -> int:
    """The ensemble's successful requests on ``server`` (its own counter)."""
    with urllib.request.urlopen(server.metrics_url, timeout=10) as answer:
        text = answer.read().decode()
    found = re.search(rf'^nv_inference_request_success{{model="{MODEL}",version="1"}} (\d+)', text, flags=re.M)
    return int(found.group(1)) if found else 0


def counts(servers: list[LocalTriton]) -> list[int]:
    return [served(s) for s in servers]


async def ask(triton: Triton, how_many: int) -> list[str]:
    request = EnsembleRequest(ServedModel.from_spec(matrix_spec(MODEL)), ("hello world",), (), 1, False)
    texts = []
    for _ in range(how_many):
        row = await triton.generate(request, "hello world", time.monotonic() + 30, 30)
        texts.append(row.beams[0].text)
    return texts


def test_one_models_requests_are_spread_over_every_pod_and_follow_pods_that_come_and_go(
    serve_triton: ServeTriton, repository: Path
) -> None:
    servers = [serve_triton(repository, shared=False) for _ in range(3)]
    first, second, third = servers
    pods = [first.grpc_url, second.grpc_url]

    async def resolve() -> list[str]:
        return list(pods)

    async def scenario() -> tuple[list[int], list[int], list[int]]:
        triton = Triton("gpt2-tp1-pods.triton.svc:8001", resolve=resolve, refresh_s=0.0)
        try:
            assert await ask(triton, REQUESTS) == ["hello world"] * REQUESTS
            two = counts(servers)
            pods.append(third.grpc_url)  # the autoscaler added a pod; DNS now lists it
            assert await ask(triton, REQUESTS) == ["hello world"] * REQUESTS
            three = counts(servers)
            pods.remove(first.grpc_url)  # a scale-in: the pod left DNS (not ready) before it stops
            assert await ask(triton, REQUESTS) == ["hello world"] * REQUESTS
            return two, three, counts(servers)
        finally:
            await triton.close()

    before = counts(servers)
    two, three, after_scale_in = asyncio.run(scenario())
    per_pod = [b - a for a, b in zip(before, two, strict=True)]
    assert per_pod == [REQUESTS // 2, REQUESTS // 2, 0], "one channel per pod, calls in turn"
    grown = [b - a for a, b in zip(two, three, strict=True)]
    assert sum(grown) == REQUESTS and min(grown) >= REQUESTS // 3 - 1, f"the new pod gets its share: {grown}"
    shrunk = [b - a for a, b in zip(three, after_scale_in, strict=True)]
    assert shrunk[0] == 0 and shrunk[1] + shrunk[2] == REQUESTS, f"nothing goes to the pod that left: {shrunk}"


def test_a_pod_that_is_gone_before_dns_knows_costs_no_request(serve_triton: ServeTriton, repository: Path) -> None:
    """A pod killed while DNS still lists it: its call is refused (UNAVAILABLE) and sent to the next pod."""
    alive, doomed = serve_triton(repository, shared=False), serve_triton(repository, shared=False)
    pods = [alive.grpc_url, doomed.grpc_url]

    async def resolve() -> list[str]:
        return list(pods)

    async def scenario() -> list[str]:
        triton = Triton("gpt2-tp1-pods.triton.svc:8001", resolve=resolve, refresh_s=3600.0)
        try:
            await ask(triton, 2)  # both channels connected
            doomed.stop()
            return await ask(triton, 10)
        finally:
            await triton.close()

    before = served(alive)
    assert asyncio.run(scenario()) == ["hello world"] * 10
    assert served(alive) - before == 1 + 10, "one of the first two calls, then all ten"
