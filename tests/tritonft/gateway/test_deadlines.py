"""Each model's deadline in the gateway: a vLLM model's requests get the gateway's ``--deadline`` plus its longest
answer at its stated pace (``vllm.time_per_output_token_s`` x its context), so an answer longer than the base
deadline is not cut; a model whose deadline is shorter than its answer still is.

The engine is a stand-in on real gRPC: Triton's ``GRPCInferenceService`` answering ``ModelStreamInfer`` as NVIDIA's
vLLM backend does (one response per generated token, the last with ``finish_reason: length``), a short sleep per
token. The numbers are scaled down: a base deadline of 0.2 s stands for the default 60 s, and an answer of 30
tokens at 20 ms each (0.6 s) for a long answer of a 16k-token model.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Iterator
from concurrent import futures
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import grpc  # type: ignore[import-untyped]  # no types-grpcio in the lock
import httpx
import pytest
import uvicorn
from tritonclient.grpc import service_pb2, service_pb2_grpc

from tests.tritonft.engines.vllm.test_engine import LLAMA_8B
from tests.tritonft.gateway.server import serving_app
from tests.tritonft.gateway.test_vllm import response
from tritonft.gateway.config import UNSTREAMED_DEADLINE_MAX_S, GatewayConfig, ServedModel, request_deadline_s
from tritonft.spec import ModelSpec

BASE_DEADLINE_S = 0.2
"""``--deadline``, scaled down (60 s in a stack)."""
TOKENS = 30
TOKEN_S = 0.02
"""The stand-in engine's time per generated token: its answer takes 0.6 s, three times the base deadline."""
CONTEXT = 64


class StandInEngine(service_pb2_grpc.GRPCInferenceServiceServicer):  # type: ignore[misc]  # untyped stubs
    """``ModelStreamInfer`` as the vLLM backend answers a streamed request: :data:`TOKENS` responses, one per
    token, :data:`TOKEN_S` apart (every other call: gRPC's UNIMPLEMENTED)."""

    def ModelStreamInfer(self, requests: Iterator[Any], context: Any) -> Iterator[Any]:  # noqa: N802  # gRPC's name
        for _ in requests:
            for n in range(TOKENS):
                time.sleep(TOKEN_S)
                if not context.is_active():  # the gateway gave up (its deadline): stop generating
                    return
                last = n == TOKENS - 1
                yield service_pb2.ModelStreamInferResponse(
                    infer_response=response(
                        {
                            "text_output": ("BYTES", [f" t{n}"]),
                            "finish_reason": ("BYTES", ["length" if last else "None"]),
                            "num_input_tokens": ("UINT32", [3]),
                            "num_output_tokens": ("UINT32", [1]),
                        }
                    )
                )


@contextmanager
def engine() -> Iterator[str]:
    """The stand-in engine on a free loopback port; yields its ``HOST:PORT``."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    service_pb2_grpc.add_GRPCInferenceServiceServicer_to_server(StandInEngine(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.stop(grace=None)


@contextmanager
def gateway_server(
    model: ServedModel, triton_url: str, unstreamed_cap_s: float = UNSTREAMED_DEADLINE_MAX_S
) -> Iterator[tuple[str, uvicorn.Server, threading.Thread]]:
    """The gateway app serving ``model`` on a free loopback port, as ``tritonft gateway`` runs it (uvicorn); yields
    its base URL, the server and the thread it runs in."""
    config = GatewayConfig(triton_url, (model,), deadline_s=BASE_DEADLINE_S, unstreamed_deadline_max_s=unstreamed_cap_s)
    with serving_app(config) as running:
        yield running


@contextmanager
def gateway(model: ServedModel, triton_url: str, unstreamed_cap_s: float = UNSTREAMED_DEADLINE_MAX_S) -> Iterator[str]:
    """The gateway app serving ``model`` on a free loopback port; yields its base URL."""
    with gateway_server(model, triton_url, unstreamed_cap_s) as (url, _, _):
        yield url


def spec(time_per_output_token_s: float) -> ModelSpec:
    assert LLAMA_8B.vllm is not None
    vllm = replace(LLAMA_8B.vllm, max_model_len=CONTEXT, time_per_output_token_s=time_per_output_token_s)
    return replace(LLAMA_8B, name="llama", vllm=vllm)


def streamed(model: ServedModel) -> list[dict[str, Any]]:
    """The events of a streamed completion of :data:`TOKENS` tokens through the gateway."""
    body = {"model": model.name, "prompt": "p", "max_tokens": TOKENS, "temperature": 0, "stream": True}
    with (
        engine() as triton,
        gateway(model, triton) as url,
        httpx.Client(timeout=30) as client,
        client.stream("POST", f"{url}/v1/completions", json=body) as answer,
    ):
        assert answer.status_code == 200
        lines = [line for line in answer.iter_lines() if line.startswith("data: ")]
    return [json.loads(line.removeprefix("data: ")) for line in lines if line != "data: [DONE]"]


def test_a_vllm_models_deadline_is_the_base_plus_its_context_at_its_pace() -> None:
    assert request_deadline_s(spec(0.05), 60.0) == pytest.approx(60 + CONTEXT * 0.05)


def test_a_stream_longer_than_the_base_deadline_is_not_cut_when_its_models_deadline_allows_it() -> None:
    model = ServedModel.from_spec(spec(0.05), base_deadline_s=BASE_DEADLINE_S)  # 0.2 + 64 x 0.05 = 3.4 s
    events = streamed(model)
    texts = [c["text"] for e in events for c in e.get("choices", ())]
    assert "".join(texts) == "".join(f" t{n}" for n in range(TOKENS))
    assert events[-1]["choices"][0]["finish_reason"] == "length"


def test_an_unstreamed_answer_longer_than_the_base_deadline_is_not_cut_either() -> None:
    model = ServedModel.from_spec(spec(0.05), base_deadline_s=BASE_DEADLINE_S)
    body = {"model": model.name, "prompt": "p", "max_tokens": TOKENS, "temperature": 0}
    with engine() as triton, gateway(model, triton) as url:
        answer = httpx.post(f"{url}/v1/completions", json=body, timeout=30)
    assert answer.status_code == 200, answer.text
    assert answer.json()["usage"]["completion_tokens"] == TOKENS


def test_a_stream_past_its_models_deadline_is_still_cut() -> None:
    model = ServedModel.from_spec(spec(0.001), base_deadline_s=BASE_DEADLINE_S)  # 0.2 + 64 x 0.001 = 0.264 s
    events = streamed(model)
    texts = [c["text"] for e in events for c in e.get("choices", ())]
    assert len(texts) < TOKENS
    assert events[-1]["error"]["code"] == "timeout"


def test_sigterm_lets_a_stream_under_way_end_whole_then_the_gateway_exits() -> None:
    """The gateway pod's drain (``components.gateway.spec.gateway_drain``) sends SIGTERM seconds after the pod left
    the endpoints, not after the longest answer: uvicorn's own handler must let the request under way finish."""
    model = ServedModel.from_spec(spec(0.05), base_deadline_s=BASE_DEADLINE_S)
    body = {"model": model.name, "prompt": "p", "max_tokens": TOKENS, "temperature": 0, "stream": True}
    with (
        engine() as triton,
        gateway_server(model, triton) as (url, server, thread),
        httpx.Client(timeout=30) as client,
        client.stream("POST", f"{url}/v1/completions", json=body) as answer,
    ):
        lines = answer.iter_lines()
        first = next(line for line in lines if line.startswith("data: "))
        server.handle_exit(signal.SIGTERM, None)  # what the kubelet's SIGTERM runs in `tritonft gateway`
        rest = [line for line in lines if line.startswith("data: ") and line != "data: [DONE]"]
        thread.join(30)
        assert not thread.is_alive(), "the gateway exited once its last request ended"
    events = [json.loads(line.removeprefix("data: ")) for line in [first, *rest]]
    texts = [c["text"] for e in events for c in e.get("choices", ())]
    assert "".join(texts) == "".join(f" t{n}" for n in range(TOKENS))
    assert events[-1]["choices"][0]["finish_reason"] == "length"


UNSTREAMED_CAP_S = 0.3
"""The cap on an unstreamed answer, scaled down (290 s in a stack: under the 300 s the proxies in front let a
response send nothing): half the stand-in's 0.6 s answer."""


def test_an_unstreamed_answer_past_the_unstreamed_cap_is_a_504_that_says_to_stream_it() -> None:
    model = ServedModel.from_spec(spec(0.05), base_deadline_s=BASE_DEADLINE_S)  # its own deadline: 3.4 s
    body = {"model": model.name, "prompt": "p", "max_tokens": TOKENS, "temperature": 0}
    with engine() as triton, gateway(model, triton, UNSTREAMED_CAP_S) as url:
        answer = httpx.post(f"{url}/v1/completions", json=body, timeout=30)
    assert answer.status_code == 504, answer.text
    error = answer.json()["error"]
    assert error["code"] == "timeout" and "`stream: true`" in error["message"]


def test_the_same_answer_streamed_is_not_held_to_the_unstreamed_cap() -> None:
    model = ServedModel.from_spec(spec(0.05), base_deadline_s=BASE_DEADLINE_S)
    body = {"model": model.name, "prompt": "p", "max_tokens": TOKENS, "temperature": 0, "stream": True}
    with (
        engine() as triton,
        gateway(model, triton, UNSTREAMED_CAP_S) as url,
        httpx.Client(timeout=30) as client,
        client.stream("POST", f"{url}/v1/completions", json=body) as answer,
    ):
        lines = [line for line in answer.iter_lines() if line.startswith("data: ") and line != "data: [DONE]"]
    texts = [c["text"] for e in map(json.loads, (line.removeprefix("data: ") for line in lines)) for c in e["choices"]]
    assert "".join(texts) == "".join(f" t{n}" for n in range(TOKENS))
