"""Graceful drain through a rollout and a scale-in, under a steady loopback load: the gateway (in this process,
served by uvicorn as the container runs it) in front of real Triton servers (2.33.0, the FT image's), one model's
pods coming and going the way Kubernetes makes them.

Kubernetes deletes a pod in two things at once: the endpoints controller removes it from the headless Service (the
gateway stops resolving it after DNS and its own re-resolve interval) and the kubelet runs the container's
``preStop`` hook, then sends SIGTERM. The hook's sleep (:func:`components.common.workload.drain`) must outlast both
the removal reaching the gateway and the longest request already sent: on SIGTERM Triton refuses new work to every
model, so an ensemble between two steps fails. Here the resolver the test controls is DNS, and the hook's sleep is
the one ``drain`` computes for this test's (shorter) re-resolve interval and deadline."""

from __future__ import annotations

import re
import signal
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
import uvicorn

from components.common.workload import drain
from tests.system.realtriton.conftest import ServeTriton
from tests.system.realtriton.repos import matrix_spec, render_with_cli
from tritonft.gateway.app import build_app
from tritonft.gateway.config import GatewayConfig, ServedModel
from tritonft.gateway.triton import Triton
from tritonft.kube import wait_for
from tritonft.local_triton import LocalTriton, free_port
from tritonft.repo.naming import RepoNames
from tritonft.spec import Family
from tritonft.standin import set_behaviour, standin_all

pytestmark = pytest.mark.slow

MODEL = "gpt2-stream"
"""A streaming (decoupled) GPT-2: the gateway streams it, or answers at once when the client does not stream."""
TOKEN_S = 0.05
"""The stand-in's pause before each token: a completion lasts about half a second, so some are always in flight."""
PROMPT = "one two three four five six seven eight"
CLIENTS = 2
"""Clients that stream, and as many that do not."""
REFRESH_S = 0.5
"""The gateway's re-resolve interval here (the deployed one: ``tritonft.gateway.triton.REFRESH_S``)."""
DEADLINE_S = 8
"""The gateway's ``--deadline`` here: the longest request a pod may still have when it is told to go."""
DNS_LAG_S = 0
"""Here the resolver answers the new endpoints at once (CoreDNS's record TTL in a cluster)."""


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory, tokenizers: dict[Family, Path]) -> Path:
    out = tmp_path_factory.mktemp("drain-repo")
    render_with_cli(matrix_spec(MODEL), out, tokenizers[Family.GPT2], tmp_path_factory.mktemp("scratch"))
    standin_all(out)
    set_behaviour(out / RepoNames.of(matrix_spec(MODEL)).ft, token_interval_s=TOKEN_S)
    return out


def served(server: LocalTriton) -> int:
    with urllib.request.urlopen(server.metrics_url, timeout=10) as answer:
        text = answer.read().decode()
    found = re.search(rf'^nv_inference_request_success{{model="{MODEL}",version="1"}} (\d+)', text, flags=re.M)
    return int(found.group(1)) if found else 0


def completion(client: httpx.Client, stream: bool) -> str | None:
    """One completion of ``PROMPT`` (streamed when ``stream``); None when it came whole, else what went wrong. A
    stream must end with ``[DONE]`` and carry no error event."""
    body = {"model": MODEL, "prompt": PROMPT, "max_tokens": 8, "stream": stream}
    try:
        if not stream:
            answer = client.post("/v1/completions", json=body)
            return None if answer.status_code == 200 else f"{answer.status_code}: {answer.text[:300]}"
        with client.stream("POST", "/v1/completions", json=body) as answer:
            events = [line for line in answer.iter_lines() if line.startswith("data: ")]
        if answer.status_code != 200:
            return f"stream {answer.status_code}: {events[:1]}"
        errors = [e for e in events if '"error"' in e]
        if errors or not events or events[-1] != "data: [DONE]":
            return f"stream cut: {(errors or events[-1:])[0][:300]}"
        return None
    except httpx.HTTPError as exc:
        return f"{'stream' if stream else 'unary'}: {type(exc).__name__}: {exc}"


@dataclass
class Load:
    """A steady client: ``CLIENTS`` streaming and ``CLIENTS`` unary loops, each sending one completion after the
    other."""

    url: str
    ok: int = 0
    failures: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self, stream: bool) -> None:
        with httpx.Client(base_url=self.url, timeout=DEADLINE_S + 10) as client:
            while not self.stop.is_set():
                failure = completion(client, stream)
                if failure is None:
                    self.ok += 1
                else:
                    self.failures.append(failure)


@contextmanager
def gateway(pods: list[str]) -> Iterator[str]:
    """The gateway app on a free loopback port, its Triton transport resolving ``pods`` (the live list)."""

    async def resolve() -> list[str]:
        return list(pods)

    models = (ServedModel.from_spec(matrix_spec(MODEL)),)
    config = GatewayConfig("", models, deadline_s=float(DEADLINE_S), routes={MODEL: "pods"})
    triton = Triton(f"{MODEL}-pods.triton.svc:8001", resolve=resolve, refresh_s=REFRESH_S)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(build_app(config, triton), host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "the gateway did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)


@contextmanager
def steady(url: str) -> Iterator[Load]:
    load = Load(url)
    threads = [threading.Thread(target=load.run, args=(stream,), daemon=True) for stream in [True, False] * CLIENTS]
    for thread in threads:
        thread.start()
    try:
        yield load
    finally:
        load.stop.set()
        for thread in threads:
            thread.join(DEADLINE_S + 15)


def delete_pod(server: LocalTriton, pods: list[str], *, pre_stop_s: float) -> None:
    """What Kubernetes does to a deleted pod: out of the endpoints, and at the same time the ``preStop`` hook (a
    sleep of ``pre_stop_s``), then SIGTERM to the container's process (the server), which exits."""
    pods.remove(server.grpc_url)
    time.sleep(pre_stop_s)
    assert server.process is not None
    server.process.send_signal(signal.SIGTERM)
    server.process.wait(60)


def rollout_and_scale_in(serve_triton: ServeTriton, repository: Path, pre_stop_s: float) -> tuple[Load, int]:
    """Two pods serving under the steady load; a rollout (a surge pod joins, an old pod is deleted), then a
    scale-in (the other old pod is deleted). Returns the load and what the surge pod served."""
    first, second, surge = (serve_triton(repository, shared=False) for _ in range(3))
    pods = [first.grpc_url, second.grpc_url]
    with gateway(pods) as url, steady(url) as load:
        wait_for("both first pods to serve", lambda: min(served(first), served(second)) > 0, 60)
        pods.append(surge.grpc_url)  # the rollout's surge pod is ready: the endpoints list it
        wait_for("the surge pod to serve", lambda: served(surge) > 0, 60)
        delete_pod(first, pods, pre_stop_s=pre_stop_s)  # the rollout removes an old pod
        delete_pod(second, pods, pre_stop_s=pre_stop_s)  # the autoscaler scales in
        at_scale_in = served(surge)
        wait_for("the last pod to serve on", lambda: served(surge) > at_scale_in, 60)
    return load, served(surge)


def test_a_rollout_and_a_scale_in_fail_no_request_when_pods_drain(serve_triton: ServeTriton, repository: Path) -> None:
    pre_stop_s = drain(REFRESH_S + DNS_LAG_S, DEADLINE_S).pre_stop_seconds
    load, _ = rollout_and_scale_in(serve_triton, repository, pre_stop_s)
    assert load.ok > 0
    assert load.failures == [], f"{len(load.failures)} failed of {load.ok + len(load.failures)}: {load.failures[:3]}"


def test_without_the_drain_the_same_rollout_and_scale_in_fail_requests(
    serve_triton: ServeTriton, repository: Path
) -> None:
    load, _ = rollout_and_scale_in(serve_triton, repository, pre_stop_s=0.0)
    assert load.ok > 0
    assert load.failures, "a pod stopped at once takes the calls it holds, or is picked before the gateway knows"
