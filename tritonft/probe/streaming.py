"""Asking a decoupled (streaming) model: the calls its clients must make, and the answer its responses make up.

Triton refuses a decoupled model on the unary calls (HTTP ``/infer``: ``501 ... doesn't support models with
decoupled transaction policy``; gRPC ``ModelInfer``: ``UNIMPLEMENTED``): it answers only over a stream, one
response per generated step. The probe therefore asks such a model the way the gateway and every client must:

* **gRPC** (``probeProtocol: grpc``): one request on a ``ModelStreamInfer`` stream, which is then half-closed, and
  every response until Triton ends the stream (as the gateway does; the final-response flag tritonclient's stream
  API asks for is refused by tritonserver 2.33.0, the FT image's).
* **HTTP** (``probeProtocol: http``): Triton's generate extension, ``POST /v2/models/<model>/generate_stream``
  (server-sent events, one ``data:`` event per response). It goes through the same HTTP ingress as every other
  probe call, so the HTTP setting still tests the HTTP path users take, not a gRPC side door. **tritonserver
  2.33.0 (NGC 23.04, the FT image's server) has no generate routes**: there a streaming model is probed over gRPC
  only, and the HTTP probe says so (:data:`NO_GENERATE_ROUTE`).

The responses of the ensembles ``tritonft.repo`` renders each carry the whole sequence so far (a GPT model's
prompt included); a model that sends only each step's new text is assembled by concatenation. The judged answer is
that text with the prompt's echo removed: the same text the model's unstreamed twin answers, and what the gateway
returns for an unstreamed request (:func:`tritonft.gateway.mapping.stream_delta`).

Two latencies are measured per request: to the first response (time to first token) and to the last one (the whole
answer); :class:`StreamedAnswer` keeps both and the report says which is which.
"""

from __future__ import annotations

import itertools
import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from tritonft.probe.contract import TextContract
from tritonft.probe.endpoint import Endpoint
from tritonft.probe.retry import PermanentError, TransientError, classify

_TRANSIENT_STATUS = {408, 429, 502, 503, 504}


@dataclass(frozen=True)
class StreamedAnswer:
    """One streamed answer: the judged ``text``, how many responses made it, and when the first and the last
    response arrived (seconds after the request was sent)."""

    text: str
    responses: int
    first_s: float
    last_s: float
    finish_reason: str | None = None
    """How the answer ended, where the server says (vLLM's ``stop`` or ``length``); None otherwise."""
    prompt_tokens: int | None = None
    """How many tokens the server made of the prompt, where it says (vLLM's ``num_input_tokens``); None otherwise."""


def assemble(pieces: Sequence[str], prompt: str) -> str:
    """The answer ``pieces`` (each response's text, in order) make up, without the prompt's echo.

    Cumulative responses (each extends the one before, as the rendered ensembles send them) give the last one;
    otherwise each response is a new piece and they are joined. A leading echo of ``prompt`` is removed.
    """
    if not pieces:
        return ""
    cumulative = all(later.startswith(earlier) for earlier, later in itertools.pairwise(pieces))
    text = pieces[-1] if cumulative else "".join(pieces)
    return text[len(prompt) :] if prompt and text.startswith(prompt) else text


def _answer(pieces: list[str], prompt: str, started: float, first: float | None, action: str) -> StreamedAnswer:
    if not pieces or first is None:
        raise PermanentError(f"{action}: the stream ended without a response carrying text")
    return StreamedAnswer(assemble(pieces, prompt), len(pieces), first - started, time.perf_counter() - started)


# --- gRPC ------------------------------------------------------------------------------------------------------


def grpc_stream(
    endpoint: Endpoint,
    model: str,
    contract: TextContract,
    prompt: str,
    *,
    headers: Mapping[str, str],
    timeout_s: float,
) -> StreamedAnswer:
    """``prompt`` to ``model`` on a ``ModelStreamInfer`` stream to ``endpoint``, every response read until the
    stream ends, within ``timeout_s``.

    The request stream carries the one request and is then half-closed; Triton ends the stream after the request's
    last response. That is how the end is known on every Triton: tritonserver 2.33.0 (the FT image's, NGC 23.04)
    refuses ``enable_empty_final_response`` (the ``triton_final_response`` flag tritonclient's stream API needs) and
    keeps a stream the client has not half-closed open after the last response.
    """
    from tritonclient.grpc import service_pb2

    action = f"model {model!r} streamed inference (gRPC ModelStreamInfer)"
    data = prompt.encode("utf-8")
    request = service_pb2.ModelInferRequest(
        model_name=model,
        inputs=[
            service_pb2.ModelInferRequest.InferInputTensor(name=contract.text_input, datatype="BYTES", shape=[1, 1])
        ],
        raw_input_contents=[len(data).to_bytes(4, "little") + data],
        outputs=[service_pb2.ModelInferRequest.InferRequestedOutputTensor(name=contract.text_output)],
    )
    read = read_grpc_stream(endpoint, request, contract.text_output, action, headers=headers, timeout_s=timeout_s)
    return _answer(read.pieces, prompt, read.started, read.first, action)


@dataclass(frozen=True)
class StreamRead:
    """What one stream's responses carried: each response's text piece, in order, and when the first came."""

    pieces: list[str]
    started: float
    """``time.perf_counter()`` when the request was sent."""
    first: float | None
    """``time.perf_counter()`` at the first piece (None: the stream ended without one)."""
    extras: dict[str, str] = field(default_factory=dict)
    """The last value each of the ``extras`` outputs asked for carried (as text)."""


def read_grpc_stream(
    endpoint: Endpoint,
    request: Any,
    output: str,
    action: str,
    *,
    headers: Mapping[str, str],
    timeout_s: float,
    extras: tuple[str, ...] = (),
) -> StreamRead:
    """Send the one ``request`` (a ``ModelInferRequest``) on a ``ModelStreamInfer`` stream, half-closed after it,
    and read the first value of ``output`` from every response until Triton ends the stream, within ``timeout_s``;
    a failure is classified (:func:`tritonft.probe.retry.classify`) and named by ``action``."""
    import grpc  # type: ignore[import-untyped]  # no types-grpcio in the lock
    from tritonclient.grpc import InferResult, service_pb2_grpc
    from tritonclient.utils import InferenceServerException

    channel = (
        grpc.secure_channel(endpoint.address, grpc.ssl_channel_credentials())
        if endpoint.ssl
        else grpc.insecure_channel(endpoint.address)
    )
    pieces: list[str] = []
    first: float | None = None
    seen: dict[str, str] = {}
    started = time.perf_counter()
    try:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        metadata = [(key.lower(), value) for key, value in headers.items()]
        for answer in stub.ModelStreamInfer(iter((request,)), timeout=timeout_s, metadata=metadata):
            if answer.error_message:
                raise InferenceServerException(msg=answer.error_message)
            if not answer.infer_response.outputs:
                continue
            result = InferResult(answer.infer_response)
            for name in extras:
                extra = result.as_numpy(name)
                if extra is not None and extra.size:
                    value = extra.reshape(-1)[0]
                    seen[name] = value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value)
            array = result.as_numpy(output)
            if array is None:
                raise PermanentError(f"{action}: a response has no output {output!r}")
            values = array.reshape(-1).tolist()
            if values:
                first = first if first is not None else time.perf_counter()
                value = values[0]
                pieces.append(value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value))
    except (TransientError, PermanentError):
        raise
    except grpc.RpcError as exc:
        raise classify(InferenceServerException(msg=exc.details(), status=str(exc.code())), action, timeout_s) from exc
    except Exception as exc:
        raise classify(exc, action, timeout_s) from exc
    finally:
        channel.close()
    return StreamRead(pieces, started, first, seen)


# --- HTTP: Triton's generate extension ---------------------------------------------------------------------------


def generate_stream_url(endpoint: Endpoint, model: str) -> str:
    """``http(s)://host:port[/prefix]/v2/models/<model>/generate_stream``."""
    scheme = "https" if endpoint.ssl else "http"
    return f"{scheme}://{endpoint.address}/v2/models/{quote(model, safe='')}/generate_stream"


def sse_events(lines: Iterable[bytes]) -> Iterator[str]:
    """The ``data`` of each server-sent event in ``lines`` (multi-line data joined with newlines)."""
    data: list[str] = []
    for raw in lines:
        line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
        if not line:
            if data:
                yield "\n".join(data)
                data = []
            continue
        if line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
    if data:
        yield "\n".join(data)


def event_text(data: str, contract: TextContract, action: str) -> str | None:
    """The text of one generate-stream event; raises for an error event. ``None`` when it carries no text."""
    try:
        event = json.loads(data)
    except ValueError as exc:
        raise PermanentError(f"{action}: an event is not JSON: {data[:120]!r}") from exc
    if not isinstance(event, dict):
        raise PermanentError(f"{action}: an event is not a JSON object: {data[:120]!r}")
    if "error" in event:
        raise PermanentError(f"{action}: the server sent an error event: {event['error']}")
    value = event.get(contract.text_output)
    if isinstance(value, list):
        value = value[0] if value else None
    return None if value is None else str(value)


NO_GENERATE_ROUTE = (
    "the server has no generate_stream route (an empty HTTP {code}): Triton's generate extension is newer than the "
    "FasterTransformer image's Triton 23.04 (tritonserver 2.33.0), which streams over gRPC only (and "
    "refuses the triton_final_response flag): probe streaming models over gRPC (probeProtocol: grpc)"
)
"""What the probe says when ``generate_stream`` does not exist on the server (checked on the real 2.33.0)."""


def _http_error(exc: urllib.error.HTTPError) -> str:
    """The server's error text: Triton sends a failed stream's error as an event (``data: {"error": ...}``) with
    the status, a refused request as a JSON body; a route the server does not have, an empty 400 or 404."""
    try:
        raw = exc.read() or b""
    except OSError:
        raw = b""
    if exc.code in (400, 404) and not raw.strip():
        return NO_GENERATE_ROUTE.format(code=exc.code)
    for data in [*sse_events(raw.splitlines(keepends=True)), raw.decode("utf-8", errors="replace")]:
        try:
            body: Any = json.loads(data)
        except ValueError:
            continue
        if isinstance(body, dict) and body.get("error"):
            return str(body["error"])
    return str(exc.reason)


def http_generate_stream(
    endpoint: Endpoint,
    model: str,
    contract: TextContract,
    prompt: str,
    *,
    headers: Mapping[str, str],
    timeout_s: float,
) -> StreamedAnswer:
    """``prompt`` to ``model`` through ``POST .../generate_stream``, every event read until the stream ends, within
    ``timeout_s`` (each read is bounded by what is left of it)."""
    url = generate_stream_url(endpoint, model)
    action = f"model {model!r} streamed inference (POST {url})"
    body = json.dumps({contract.text_input: prompt}).encode()
    request = urllib.request.Request(
        url,
        data=body,
        headers={"Content-Type": "application/json", "Accept": "text/event-stream", **headers},
        method="POST",
    )
    pieces: list[str] = []
    first: float | None = None
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as answer:
            for data in sse_events(_lines_until(answer, started, timeout_s, action)):
                text = event_text(data, contract, action)
                if text is not None:
                    first = first if first is not None else time.perf_counter()
                    pieces.append(text)
    except urllib.error.HTTPError as exc:
        text = f"{action}: HTTP {exc.code}: {_http_error(exc)}"
        raise (TransientError if exc.code in _TRANSIENT_STATUS else PermanentError)(text) from exc
    except TimeoutError as exc:
        raise TransientError(f"{action}: no answer within {timeout_s:.1f} s") from exc
    except urllib.error.URLError as exc:
        raise TransientError(f"{action}: {exc.reason}") from exc
    except OSError as exc:
        raise TransientError(f"{action}: {type(exc).__name__}: {exc}") from exc
    return _answer(pieces, prompt, started, first, action)


def _lines_until(answer: Any, started: float, timeout_s: float, action: str) -> Iterator[bytes]:
    """The response's lines while the overall ``timeout_s`` lasts (a socket timeout bounds each single read)."""
    while True:
        if time.perf_counter() - started > timeout_s:
            raise TransientError(f"{action}: the stream did not end within {timeout_s:.1f} s")
        line = answer.readline()
        if not line:
            return
        yield line
