"""The gateway's calls to Triton over gRPC (``grpc.aio`` and Triton's generated stub); every failure becomes an
:class:`ApiError`.

The request protobuf is built straight from the ensemble's inputs (KServe V2 raw little-endian contents, BYTES as
4-byte length + bytes) and the answer read straight from ``raw_output_contents``: tritonclient's ``InferInput`` /
``as_numpy`` round trip through numpy cost the gateway about a fifth of its CPU per request.
"""

from __future__ import annotations

import asyncio
import itertools
import socket
import struct
import time
from collections.abc import AsyncGenerator, Callable, Coroutine, Sequence
from functools import lru_cache
from typing import Any

from tritonft.gateway.errors import ApiError, from_triton
from tritonft.gateway.mapping import Beam, EnsembleRequest, Row, TensorValue

TEXT_INPUT = "text_input"
TEXT_OUTPUT = "text_output"
PROMPT_TOKENS = "input_lengths"
"""Each prompt's token count (the preprocessing model's; an output of the unary ensembles only)."""
COMPLETION_TOKENS = "output_lengths"
TOKEN_TEXTS = "output_tokens"
LOG_PROBS = "output_log_probs"
_SCALAR = {
    "UINT32": struct.Struct("<I"),
    "UINT64": struct.Struct("<Q"),
    "FP32": struct.Struct("<f"),
    "BOOL": struct.Struct("<?"),
}
_NUMBERS = {"INT32": "i", "UINT32": "I", "FP32": "f"}
_LENGTH = struct.Struct("<I")
_MAX_MESSAGE = 2**31 - 1


def raw_value(datatype: str, value: int | float | str | bytes) -> bytes:
    """One ``[1, 1]`` tensor's raw contents as Triton reads them."""
    if datatype == "BYTES":
        data = value.encode() if isinstance(value, str) else value
        if not isinstance(data, bytes):
            raise TypeError(f"a BYTES value must be str or bytes, got {type(value).__name__}")
        return _LENGTH.pack(len(data)) + data
    return _SCALAR[datatype].pack(value)


def bytes_elements(raw: bytes) -> list[bytes]:
    """The elements of a BYTES tensor's raw contents (each a 4-byte little-endian length, then the bytes)."""
    out, at = [], 0
    while at + 4 <= len(raw):
        (size,) = _LENGTH.unpack_from(raw, at)
        out.append(raw[at + 4 : at + 4 + size])
        at += 4 + size
    return out


@lru_cache(maxsize=256)
def _parameter_tensors(parameters: tuple[TensorValue, ...], rows: int) -> tuple[tuple[Any, ...], tuple[bytes, ...]]:
    from tritonclient.grpc import service_pb2

    tensors = tuple(
        service_pb2.ModelInferRequest.InferInputTensor(name=p.name, datatype=p.datatype, shape=(rows, 1))
        for p in parameters
    )
    return tensors, tuple(raw_value(p.datatype, p.value) * rows for p in parameters)


def requested_outputs(streaming: bool, logprobs: bool, ranked: bool = False) -> tuple[str, ...]:
    """The ensemble outputs to ask for: the text and token counts, each token's text and log-probability when
    ``logprobs``, the log-probabilities alone when ``ranked`` (``best_of``); a streaming ensemble has no prompt token
    count (:mod:`tritonft.repo.pbtxt`)."""
    names = (TEXT_OUTPUT, COMPLETION_TOKENS) + (() if streaming else (PROMPT_TOKENS,))
    if logprobs:
        return (*names, TOKEN_TEXTS, LOG_PROBS)
    return (*names, LOG_PROBS) if ranked else names


@lru_cache(maxsize=8)
def _output_tensors(names: tuple[str, ...]) -> tuple[Any, ...]:
    from tritonclient.grpc import service_pb2

    return tuple(service_pb2.ModelInferRequest.InferRequestedOutputTensor(name=name) for name in names)


def infer_request(request: EnsembleRequest, prompt: str, *more: str) -> Any:
    """The ``ModelInferRequest`` for ``prompt`` (and ``more`` prompts, one row each, same parameters) of
    ``request``; the parameter tensors are built once per set and row count."""
    from tritonclient.grpc import service_pb2

    rows = 1 + len(more)
    tensors, raws = _parameter_tensors(request.parameters, rows)
    text = service_pb2.ModelInferRequest.InferInputTensor(name=TEXT_INPUT, datatype="BYTES", shape=(rows, 1))
    texts = raw_value("BYTES", prompt)
    if more:
        texts += b"".join(raw_value("BYTES", p) for p in more)
    return service_pb2.ModelInferRequest(
        model_name=request.model.name,
        inputs=(text, *tensors),
        raw_input_contents=(texts, *raws),
        outputs=_output_tensors(requested_outputs(request.model.streaming, request.logprobs, request.ranked)),
    )


def prompt_tokens_request(model: str, prompt: str) -> Any:
    """A ``ModelInferRequest`` to the preprocessing model ``model``: ``prompt``'s token count only."""
    from tritonclient.grpc import service_pb2

    return service_pb2.ModelInferRequest(
        model_name=model,
        inputs=(service_pb2.ModelInferRequest.InferInputTensor(name=TEXT_INPUT, datatype="BYTES", shape=(1, 1)),),
        raw_input_contents=(raw_value("BYTES", prompt),),
        outputs=_output_tensors((PROMPT_TOKENS,)),
    )


def _output(response: Any, name: str) -> tuple[Any, bytes | None] | None:
    """Output ``name`` of a ``ModelInferResponse`` and its raw contents (``None`` when sent as typed contents)."""
    for index, output in enumerate(response.outputs):
        if output.name == name:
            return output, response.raw_output_contents[index] if index < len(response.raw_output_contents) else None
    return None


def _strings(found: tuple[Any, bytes | None]) -> list[str]:
    output, raw = found
    values = bytes_elements(raw) if raw is not None else list(output.contents.bytes_contents)
    return [v.decode("utf-8", errors="replace") for v in values]


def _numbers(found: tuple[Any, bytes | None]) -> list[Any]:
    output, raw = found
    code = _NUMBERS.get(output.datatype)
    if code is None:
        raise ApiError(502, f"the model's {output.name} is {output.datatype}, not a number type", "server_error")
    if raw is None:
        contents = output.contents
        return list(contents.fp32_contents if code == "f" else contents.int_contents or contents.uint_contents)
    return list(struct.unpack(f"<{len(raw) // 4}{code}", raw))


def answer_texts(response: Any) -> list[str] | None:
    """The ``text_output`` strings of a ``ModelInferResponse`` (one per beam), ``None`` when it has none."""
    found = _output(response, TEXT_OUTPUT)
    return None if found is None else _strings(found)


def _per_row(values: list[Any], rows: int, what: str) -> list[list[Any]]:
    if rows == 1:
        return [values]
    width, extra = divmod(len(values), rows)
    if extra or not width:
        raise ApiError(502, f"the model answered {len(values)} {what} for {rows} prompts", "server_error")
    return [values[row * width : (row + 1) * width] for row in range(rows)]


def split_rows(texts: list[str], rows: int) -> list[list[str]]:
    """A ``[rows, beams]`` text tensor's elements (row-major) as one list per row."""
    return _per_row(texts, rows, "texts")


def answer_rows(response: Any, rows: int) -> list[Row]:
    """A ``ModelInferResponse`` of the ensemble as one :class:`Row` per prompt: each beam's text, token count and,
    when the response has them, each token's text and log-probability; the prompt's token count when it has it."""
    raws = response.raw_output_contents
    found = {o.name: (o, raws[i] if i < len(raws) else None) for i, o in enumerate(response.outputs)}
    if TEXT_OUTPUT not in found:
        raise ApiError(502, f"the model's answer has no {TEXT_OUTPUT} output", "server_error")
    texts = split_rows(_strings(found[TEXT_OUTPUT]), rows)
    beams = len(texts[0])
    counts = _per_row(_numbers(found[COMPLETION_TOKENS]), rows, "token counts") if COMPLETION_TOKENS in found else None
    prompts = _numbers(found[PROMPT_TOKENS]) if PROMPT_TOKENS in found else None
    pieces = _per_row(_strings(found[TOKEN_TEXTS]), rows * beams, "token texts") if TOKEN_TEXTS in found else None
    log_probs = _per_row(_numbers(found[LOG_PROBS]), rows * beams, "log-probabilities") if LOG_PROBS in found else None
    out = []
    for row in range(rows):
        row_beams = []
        for k in range(beams):
            count = 0 if counts is None else int(counts[row][min(k, len(counts[row]) - 1)])
            at = row * beams + k
            row_beams.append(
                Beam(
                    texts[row][k],
                    count,
                    () if pieces is None else tuple(pieces[at][:count]),
                    () if log_probs is None else tuple(log_probs[at][:count]),
                )
            )
        out.append(Row(tuple(row_beams), None if prompts is None else int(prompts[row])))
    return out


def _error(exc: BaseException, deadline_s: float) -> ApiError:
    import grpc  # type: ignore[import-untyped]  # no types-grpcio in the lock

    if isinstance(exc, grpc.aio.AioRpcError):
        return from_triton(exc.code().name, str(exc.details() or "").strip(), deadline_s)
    return ApiError(
        503, f"the inference server is unreachable: {type(exc).__name__}: {exc}", "server_error", None, "triton_down"
    )


REFRESH_S = 5.0
"""How often the gateway asks DNS again for a Triton service's addresses: a pod the autoscaler adds gets traffic
within this long; one that leaves gets no new call once DNS has dropped it (it is not ready)."""
CLOSE_GRACE_S = 120.0
"""How long a dropped address's channel keeps its calls in flight before it is closed, at the least: the gateway
gives each Triton its models' longest deadline when that is longer (a vLLM model's answer may take many minutes)."""

Resolver = Callable[[], Coroutine[Any, Any, list[str]]]
"""Returns the ``HOST:PORT`` targets a Triton URL stands for now."""


def split_target(url: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT`` too) -> host and port; ``ValueError`` naming the form otherwise."""
    host, sep, port = url.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"Triton URL {url!r}: expected HOST:PORT (e.g. t5-small-pods.triton.svc:8001)")
    return host.strip("[]"), int(port)


def join_target(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def dns_resolver(url: str) -> Resolver:
    """Every address DNS gives for ``url``'s host, each with ``url``'s port, sorted. A headless Service's name gives
    one address per ready pod (a ClusterIP Service's gives its one virtual IP: kube-proxy then balances connections,
    not requests, so one long-lived gRPC connection pins every call to one pod)."""
    host, port = split_target(url)

    async def resolve() -> list[str]:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
        return sorted({join_target(str(info[4][0]), port) for info in infos})

    return resolve


def plan_targets(current: Sequence[str], resolved: Sequence[str]) -> tuple[list[str], list[str], list[str]]:
    """(targets to use, targets to open, targets to close) when DNS answers ``resolved``: an empty or failed answer
    keeps ``current`` (a DNS hiccup must not take every pod away)."""
    if not resolved:
        return list(current), [], []
    wanted = sorted(set(resolved))
    return wanted, [t for t in wanted if t not in current], [t for t in current if t not in wanted]


class Triton:
    """Calls to the Triton pods behind one URL, spread over every pod: client-side round robin.

    The URL's host is resolved again every :data:`REFRESH_S` (a headless Service's name: one address per ready pod),
    with one gRPC channel per address (grpc multiplexes each pod's calls over one HTTP/2 connection); each call goes
    to the next address in turn. A call that cannot reach its pod (``UNAVAILABLE``: refused, reset, the pod went
    away) is sent once more to the next pod and DNS is asked again at once. ``resolve`` replaces DNS (tests). A
    dropped address's channel is closed once its calls have ended, or after ``close_grace_s`` (at least the longest
    deadline of a call to it: a draining pod's streams are not cut).
    """

    def __init__(
        self,
        url: str,
        *,
        resolve: Resolver | None = None,
        refresh_s: float = REFRESH_S,
        close_grace_s: float = CLOSE_GRACE_S,
    ) -> None:
        self.url = url
        self._close_grace_s = close_grace_s
        self._resolve = resolve or dns_resolver(url)
        self._refresh_s = refresh_s
        self._channels: dict[str, tuple[Any, Any]] = {}
        self._targets: list[str] = []
        self._turn = itertools.count()
        self._due = 0.0
        self._closing: set[asyncio.Task[None]] = set()

    @property
    def targets(self) -> list[str]:
        """The ``HOST:PORT`` addresses calls go to now."""
        return list(self._targets)

    def _open(self, target: str) -> tuple[Any, Any]:
        import grpc
        from tritonclient.grpc import service_pb2_grpc

        options = [("grpc.max_send_message_length", _MAX_MESSAGE), ("grpc.max_receive_message_length", _MAX_MESSAGE)]
        channel = grpc.aio.insecure_channel(target, options=options)
        return channel, service_pb2_grpc.GRPCInferenceServiceStub(channel)

    async def refresh(self, *, force: bool = False) -> None:
        """Ask DNS again when due (or ``force``); open channels to new addresses, close dropped ones gracefully."""
        now = time.monotonic()
        if not force and now < self._due and self._targets:
            return
        self._due = now + self._refresh_s
        try:
            resolved = await self._resolve()
        except OSError:
            resolved = []
        if not resolved and not self._targets:
            resolved = [self.url]  # DNS has nothing yet: let the call itself say the server is unreachable
        self._targets, opened, closed = plan_targets(self._targets, resolved)
        for target in opened:
            self._channels[target] = self._open(target)
        for target in closed:
            channel, _ = self._channels.pop(target)
            task = asyncio.ensure_future(channel.close(grace=self._close_grace_s))
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)

    def _next_stub(self) -> Any:
        if not self._targets:
            raise ApiError(503, "the inference server is unreachable: no address", "server_error", None, "triton_down")
        return self._channels[self._targets[next(self._turn) % len(self._targets)]][1]

    async def _unary(self, method: str, request: Any, timeout: float) -> Any:
        """``method`` on the next pod; once more on the one after when the first cannot be reached."""
        import grpc

        await self.refresh()
        try:
            return await getattr(self._next_stub(), method)(request, timeout=timeout)
        except grpc.aio.AioRpcError as exc:
            if exc.code() is not grpc.StatusCode.UNAVAILABLE:
                raise
            await self.refresh(force=True)
            if not self._targets:
                raise
            return await getattr(self._next_stub(), method)(request, timeout=timeout)

    @property
    def stub(self) -> Any:
        """The next pod's ``GRPCInferenceService`` stub (for calls other than text generation: embeddings)."""
        if not self._targets:
            self._targets = [self.url]
            self._channels[self.url] = self._open(self.url)
        return self._next_stub()

    async def ready(self, models: list[str], timeout_s: float) -> bool:
        from tritonclient.grpc import service_pb2

        try:
            if not (await self._unary("ServerReady", service_pb2.ServerReadyRequest(), timeout_s)).ready:
                return False
            for name in models:
                answer = await self._unary("ModelReady", service_pb2.ModelReadyRequest(name=name), timeout_s)
                if not answer.ready:
                    return False
        except Exception:
            return False
        return True

    async def generate(self, request: EnsembleRequest, prompt: str, deadline: float, deadline_s: float) -> Row:
        """The answer to ``prompt``; ``deadline`` is the ``time.monotonic()`` instant the request's ``deadline_s``
        ends at."""
        return (await self.generate_rows(request, (prompt,), deadline, deadline_s))[0]

    async def generate_rows(
        self, request: EnsembleRequest, prompts: tuple[str, ...], deadline: float, deadline_s: float
    ) -> list[Row]:
        """The answers to ``prompts`` sent as the rows of one ModelInfer call: one :class:`Row` per prompt."""
        remaining = max(deadline - time.monotonic(), 0.001)
        try:
            response = await self._unary("ModelInfer", infer_request(request, *prompts), remaining)
        except Exception as exc:
            raise _error(exc, deadline_s) from exc
        return answer_rows(response, len(prompts))

    async def prompt_tokens(self, model: str, prompt: str, deadline_s: float) -> int:
        """``prompt``'s token count as the preprocessing model ``model`` tokenizes it (for a streaming ensemble,
        which has no such output)."""
        try:
            response = await self._unary("ModelInfer", prompt_tokens_request(model, prompt), deadline_s)
        except Exception as exc:
            raise _error(exc, deadline_s) from exc
        found = _output(response, PROMPT_TOKENS)
        if found is None:
            raise ApiError(502, f"{model} answered no {PROMPT_TOKENS}", "server_error")
        return int(_numbers(found)[0])

    async def stream(self, request: EnsembleRequest, prompt: str, deadline_s: float) -> AsyncGenerator[Beam, None]:
        """Each decoupled response (the whole sequence so far, and its token count) as the model sends it.

        The request stream is half-closed after the one request; Triton ends the stream once its last response
        is sent, which ends the iteration. Closed before that (the caller stopped at a stop phrase, its client went
        away), the call is cancelled at once: Triton cancels the request instead of generating on for nobody."""
        await self.refresh()
        call = self._next_stub().ModelStreamInfer(iter((infer_request(request, prompt),)), timeout=deadline_s)
        try:
            async for answer in call:
                if answer.error_message:
                    raise from_triton("", answer.error_message.strip(), deadline_s)
                if _output(answer.infer_response, TEXT_OUTPUT) is not None:
                    rows = answer_rows(answer.infer_response, 1)
                    if rows[0].beams:
                        yield rows[0].beams[0]
        except ApiError:
            raise
        except Exception as exc:
            raise _error(exc, deadline_s) from exc
        finally:
            call.cancel()  # a no-op once the stream has ended

    async def stream_responses(
        self, request: Any, deadline_s: float, error: Callable[[str], ApiError]
    ) -> AsyncGenerator[Any, None]:
        """Every ``ModelInferResponse`` a decoupled model sends for ``request`` (one ``ModelStreamInfer`` call, half
        closed after it), until Triton ends the stream; an error Triton sends on it becomes ``error(message)``.
        Closed before the end, the call is cancelled (Triton cancels the request)."""
        await self.refresh()
        call = self._next_stub().ModelStreamInfer(iter((request,)), timeout=deadline_s)
        try:
            async for answer in call:
                if answer.error_message:
                    raise error(answer.error_message.strip())
                yield answer.infer_response
        except ApiError:
            raise
        except Exception as exc:
            raise _error(exc, deadline_s) from exc
        finally:
            call.cancel()  # a no-op once the stream has ended

    async def close(self) -> None:
        for channel, _ in self._channels.values():
            await channel.close()
        self._channels.clear()
        self._targets = []
        for task in list(self._closing):
            task.cancel()
