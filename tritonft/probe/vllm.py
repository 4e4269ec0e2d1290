"""Asking a model served by Triton's vLLM backend (``family: llama``), over both protocols, as its users must.

NVIDIA's backend (:mod:`tritonft.engines.vllm.contract`) is decoupled and reads its generation settings from the
``sampling_parameters`` input: a request with the prompt alone would be sampled (vLLM's default temperature 1) and
answered in one piece with its prompt in front. The probe therefore sends ``stream: true``,
``exclude_input_in_output: true`` and greedy ``sampling_parameters`` (``temperature: 0``, ``max_tokens``), over gRPC
on a ``ModelStreamInfer`` stream (tensors shaped ``[1]``: the model's ``max_batch_size`` is 0), over HTTP through
Triton's ``generate_stream`` route; each response carries only its new text (the backend's delta), so the answer is
the responses' texts joined. Greedy, the answer is what the same prompt gets through the gateway with
``temperature: 0`` and the same ``max_tokens``, so exact expected answers judge both.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any

from tritonft.probe.endpoint import Endpoint
from tritonft.probe.endpoint import Protocol as Transport
from tritonft.probe.retry import PermanentError, TransientError
from tritonft.probe.streaming import (
    _TRANSIENT_STATUS,
    StreamedAnswer,
    _http_error,
    _lines_until,
    generate_stream_url,
    read_grpc_stream,
    sse_events,
)

TEXT_INPUT = "text_input"
TEXT_OUTPUT = "text_output"
PROBE_MAX_TOKENS = 16
"""The answer length the probe asks a vLLM model for (directly and through the gateway)."""


def sampling_parameters(max_tokens: int) -> str:
    """Greedy decoding of at most ``max_tokens`` tokens, as vLLM's ``SamplingParams`` JSON."""
    return json.dumps({"max_tokens": max_tokens, "temperature": 0})


def generate_body(prompt: str, max_tokens: int) -> dict[str, Any]:
    """The ``generate_stream`` request body: NVIDIA's inputs by name."""
    return {
        TEXT_INPUT: prompt,
        "stream": True,
        "exclude_input_in_output": True,
        "sampling_parameters": sampling_parameters(max_tokens),
    }


def _joined(pieces: list[str], started: float, first: float | None, action: str) -> StreamedAnswer:
    if first is None:
        raise PermanentError(f"{action}: the stream ended without a response carrying text")
    return StreamedAnswer("".join(pieces), len(pieces), first - started, time.perf_counter() - started)


def grpc_vllm_stream(
    endpoint: Endpoint, model: str, prompt: str, *, max_tokens: int, headers: Mapping[str, str], timeout_s: float
) -> StreamedAnswer:
    """``prompt`` to the vLLM ``model`` on a ``ModelStreamInfer`` stream, every response read until Triton ends it."""
    from tritonclient.grpc import service_pb2

    action = f"model {model!r} streamed inference (gRPC ModelStreamInfer, vLLM backend)"
    tensor = service_pb2.ModelInferRequest.InferInputTensor

    def text(value: str) -> bytes:
        data = value.encode("utf-8")
        return len(data).to_bytes(4, "little") + data

    request = service_pb2.ModelInferRequest(
        model_name=model,
        inputs=[
            tensor(name=TEXT_INPUT, datatype="BYTES", shape=[1]),
            tensor(name="stream", datatype="BOOL", shape=[1]),
            tensor(name="exclude_input_in_output", datatype="BOOL", shape=[1]),
            tensor(name="sampling_parameters", datatype="BYTES", shape=[1]),
        ],
        raw_input_contents=[text(prompt), b"\x01", b"\x01", text(sampling_parameters(max_tokens))],
    )
    read = read_grpc_stream(endpoint, request, TEXT_OUTPUT, action, headers=headers, timeout_s=timeout_s)
    return _joined(read.pieces, read.started, read.first, action)


def http_vllm_stream(
    endpoint: Endpoint, model: str, prompt: str, *, max_tokens: int, headers: Mapping[str, str], timeout_s: float
) -> StreamedAnswer:
    """``prompt`` to the vLLM ``model`` through ``POST .../generate_stream``, every event read until it ends."""
    url = generate_stream_url(endpoint, model)
    action = f"model {model!r} streamed inference (POST {url}, vLLM backend)"
    request = urllib.request.Request(
        url,
        data=json.dumps(generate_body(prompt, max_tokens)).encode(),
        headers={"Content-Type": "application/json", "Accept": "text/event-stream", **headers},
        method="POST",
    )
    pieces: list[str] = []
    first: float | None = None
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as answer:
            for data in sse_events(_lines_until(answer, started, timeout_s, action)):
                event = json.loads(data)
                if not isinstance(event, dict):
                    raise PermanentError(f"{action}: an event is not a JSON object: {data[:120]!r}")
                if "error" in event:
                    raise PermanentError(f"{action}: the server sent an error event: {event['error']}")
                value = event.get(TEXT_OUTPUT)
                if isinstance(value, list):
                    value = value[0] if value else None
                if value is not None:
                    first = first if first is not None else time.perf_counter()
                    pieces.append(str(value))
    except urllib.error.HTTPError as exc:
        text = f"{action}: HTTP {exc.code}: {_http_error(exc)}"
        raise (TransientError if exc.code in _TRANSIENT_STATUS else PermanentError)(text) from exc
    except ValueError as exc:
        raise PermanentError(f"{action}: an event is not JSON: {exc}") from exc
    except TimeoutError as exc:
        raise TransientError(f"{action}: no answer within {timeout_s:.1f} s") from exc
    except urllib.error.URLError as exc:
        raise TransientError(f"{action}: {exc.reason}") from exc
    except OSError as exc:
        raise TransientError(f"{action}: {type(exc).__name__}: {exc}") from exc
    return _joined(pieces, started, first, action)


def vllm_stream(
    endpoint: Endpoint, model: str, prompt: str, *, max_tokens: int, headers: Mapping[str, str], timeout_s: float
) -> StreamedAnswer:
    """The vLLM model's greedy streamed answer over the endpoint's protocol."""
    ask = http_vllm_stream if endpoint.protocol is Transport.HTTP else grpc_vllm_stream
    return ask(endpoint, model, prompt, max_tokens=max_tokens, headers=headers, timeout_s=timeout_s)
