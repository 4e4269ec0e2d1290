"""Asking a model served by Triton's vLLM backend (``family: llama``), over both protocols, as its users must.

NVIDIA's backend (:mod:`tritonft.engines.vllm.contract`) is decoupled and reads its generation settings from the
``sampling_parameters`` input: a request with the prompt alone would be sampled (vLLM's default temperature 1) and
answered in one piece with its prompt in front. The probe therefore sends ``stream: true``,
``exclude_input_in_output: true`` and greedy ``sampling_parameters`` (``temperature: 0``, ``max_tokens``), over gRPC
on a ``ModelStreamInfer`` stream (tensors shaped ``[1]``: the model's ``max_batch_size`` is 0), over HTTP through
Triton's ``generate_stream`` route; each response carries only its new text (the backend's delta), so the answer is
the responses' texts joined. Greedy, the answer is what the same prompt gets through the gateway with
``temperature: 0`` and the same ``max_tokens``, so exact expected answers judge both. Every sampling knob a served
default could change is sent (:data:`GREEDY`), and the backend is asked how the answer ended (``finish_reason``) and
how many tokens it made of the prompt (``num_input_tokens``): the judge holds both against its reference.
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


GREEDY: Mapping[str, Any] = {
    "temperature": 0,
    "repetition_penalty": 1.0,
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
    "min_tokens": 0,
    "ignore_eos": False,
    "skip_special_tokens": True,
}
"""vLLM's ``SamplingParams`` fields that change a greedy answer, each at the value the reference computes with (no
penalty, no forced length, stop at the end ids, special tokens left out of the text as the gateway's users get it):
sent explicitly, so a served default (the backend's, a future vLLM's, a model's ``generation_config.json``
``repetition_penalty`` that a server applies as its default) cannot change what is judged. ``top_p``/``top_k``/
``min_p`` do not act at temperature 0 (vLLM samples greedily) and ``seed`` neither. Every key is a ``SamplingParams``
field of each vLLM the images ship: NVIDIA's backend generates with *no* parameters (sampled) when one is not
(``TritonSamplingParams.from_dict``)."""
ASKED_OUTPUTS = ("finish_reason", "num_input_tokens")
"""The backend's outputs the probe asks for besides the text (``return_finish_reason``, ``return_num_input_tokens``)."""


def sampling_parameters(max_tokens: int) -> str:
    """Greedy decoding of at most ``max_tokens`` tokens, as vLLM's ``SamplingParams`` JSON (:data:`GREEDY`)."""
    return json.dumps({"max_tokens": max_tokens, **GREEDY})


def generate_body(prompt: str, max_tokens: int) -> dict[str, Any]:
    """The ``generate_stream`` request body: NVIDIA's inputs by name."""
    return {
        TEXT_INPUT: prompt,
        "stream": True,
        "exclude_input_in_output": True,
        "sampling_parameters": sampling_parameters(max_tokens),
        **{f"return_{name}": True for name in ASKED_OUTPUTS},
    }


def _joined(
    pieces: list[str], started: float, first: float | None, action: str, extras: Mapping[str, str]
) -> StreamedAnswer:
    if first is None:
        raise PermanentError(f"{action}: the stream ended without a response carrying text")
    reason = extras.get("finish_reason")
    count = extras.get("num_input_tokens")
    return StreamedAnswer(
        "".join(pieces),
        len(pieces),
        first - started,
        time.perf_counter() - started,
        finish_reason=reason if reason not in (None, "", "None") else None,
        prompt_tokens=int(count) if count is not None and count.isdigit() else None,
    )


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
            *(tensor(name=f"return_{name}", datatype="BOOL", shape=[1]) for name in ASKED_OUTPUTS),
        ],
        raw_input_contents=[
            text(prompt),
            b"\x01",
            b"\x01",
            text(sampling_parameters(max_tokens)),
            *(b"\x01" for _ in ASKED_OUTPUTS),
        ],
    )
    read = read_grpc_stream(
        endpoint, request, TEXT_OUTPUT, action, headers=headers, timeout_s=timeout_s, extras=ASKED_OUTPUTS
    )
    return _joined(read.pieces, read.started, read.first, action, read.extras)


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
    extras: dict[str, str] = {}
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as answer:
            for data in sse_events(_lines_until(answer, started, timeout_s, action)):
                event = json.loads(data)
                if not isinstance(event, dict):
                    raise PermanentError(f"{action}: an event is not a JSON object: {data[:120]!r}")
                if "error" in event:
                    raise PermanentError(f"{action}: the server sent an error event: {event['error']}")
                for name in ASKED_OUTPUTS:
                    extra = _first(event.get(name))
                    if extra is not None:
                        extras[name] = str(extra)
                value = _first(event.get(TEXT_OUTPUT))
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
    return _joined(pieces, started, first, action, extras)


def _first(value: Any) -> Any:
    """An event's output value: the first element of a list (one per completion), or the value."""
    if isinstance(value, list):
        return value[0] if value else None
    return value


def vllm_stream(
    endpoint: Endpoint, model: str, prompt: str, *, max_tokens: int, headers: Mapping[str, str], timeout_s: float
) -> StreamedAnswer:
    """The vLLM model's greedy streamed answer over the endpoint's protocol."""
    ask = http_vllm_stream if endpoint.protocol is Transport.HTTP else grpc_vllm_stream
    return ask(endpoint, model, prompt, max_tokens=max_tokens, headers=headers, timeout_s=timeout_s)
