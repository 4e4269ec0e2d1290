"""The gateway's calls to Triton over gRPC (``grpc.aio`` and Triton's generated stub); every failure becomes an
:class:`ApiError`.

The request protobuf is built straight from the ensemble's inputs (KServe V2 raw little-endian contents, BYTES as
4-byte length + bytes) and the answer read straight from ``raw_output_contents``: tritonclient's ``InferInput`` /
``as_numpy`` round trip through numpy cost the gateway about a fifth of its CPU per request.
"""

from __future__ import annotations

import struct
import time
from collections.abc import AsyncGenerator
from functools import lru_cache
from typing import Any

from tritonft.gateway.errors import ApiError, from_triton
from tritonft.gateway.mapping import EnsembleRequest, TensorValue

TEXT_INPUT = "text_input"
TEXT_OUTPUT = "text_output"
_SCALAR = {"UINT32": struct.Struct("<I"), "UINT64": struct.Struct("<Q"), "FP32": struct.Struct("<f")}
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
    )


def answer_texts(response: Any) -> list[str] | None:
    """The ``text_output`` strings of a ``ModelInferResponse`` (one per beam), ``None`` when it has none."""
    for index, output in enumerate(response.outputs):
        if output.name == TEXT_OUTPUT:
            if index < len(response.raw_output_contents):
                raw = response.raw_output_contents[index]
                return [v.decode("utf-8", errors="replace") for v in bytes_elements(raw)]
            return [v.decode("utf-8", errors="replace") for v in output.contents.bytes_contents]
    return None


def split_rows(texts: list[str], rows: int) -> list[list[str]]:
    """A ``[rows, beams]`` text tensor's elements (row-major) as one list per row."""
    if rows == 1:
        return [texts]
    beams, extra = divmod(len(texts), rows)
    if extra or not beams:
        raise ApiError(502, f"the model answered {len(texts)} texts for {rows} prompts", "server_error")
    return [texts[row * beams : (row + 1) * beams] for row in range(rows)]


def _texts(response: Any) -> list[str]:
    texts = answer_texts(response)
    if texts is None:
        raise ApiError(502, f"the model's answer has no {TEXT_OUTPUT} output", "server_error")
    return texts


def _error(exc: BaseException, deadline_s: float) -> ApiError:
    import grpc  # type: ignore[import-untyped]  # no types-grpcio in the lock

    if isinstance(exc, grpc.aio.AioRpcError):
        return from_triton(exc.code().name, str(exc.details() or "").strip(), deadline_s)
    return ApiError(
        503, f"the inference server is unreachable: {type(exc).__name__}: {exc}", "server_error", None, "triton_down"
    )


class Triton:
    """One gRPC channel shared by all requests (grpc multiplexes them over one HTTP/2 connection)."""

    def __init__(self, url: str) -> None:
        import grpc
        from tritonclient.grpc import service_pb2_grpc

        self.url = url
        options = [("grpc.max_send_message_length", _MAX_MESSAGE), ("grpc.max_receive_message_length", _MAX_MESSAGE)]
        self._channel = grpc.aio.insecure_channel(url, options=options)
        self._stub = service_pb2_grpc.GRPCInferenceServiceStub(self._channel)

    @property
    def stub(self) -> Any:
        """The channel's ``GRPCInferenceService`` stub (for calls other than text generation: embeddings)."""
        return self._stub

    async def ready(self, models: list[str], timeout_s: float) -> bool:
        from tritonclient.grpc import service_pb2

        try:
            if not (await self._stub.ServerReady(service_pb2.ServerReadyRequest(), timeout=timeout_s)).ready:
                return False
            for name in models:
                answer = await self._stub.ModelReady(service_pb2.ModelReadyRequest(name=name), timeout=timeout_s)
                if not answer.ready:
                    return False
        except Exception:
            return False
        return True

    async def generate(self, request: EnsembleRequest, prompt: str, deadline: float, deadline_s: float) -> list[str]:
        """The answer (one string per beam) to ``prompt``; ``deadline`` is the ``time.monotonic()`` instant the
        request's ``deadline_s`` ends at."""
        return (await self.generate_rows(request, (prompt,), deadline, deadline_s))[0]

    async def generate_rows(
        self, request: EnsembleRequest, prompts: tuple[str, ...], deadline: float, deadline_s: float
    ) -> list[list[str]]:
        """The answers to ``prompts`` sent as the rows of one ModelInfer call: one list (per beam) per prompt."""
        remaining = max(deadline - time.monotonic(), 0.001)
        try:
            response = await self._stub.ModelInfer(infer_request(request, *prompts), timeout=remaining)
        except Exception as exc:
            raise _error(exc, deadline_s) from exc
        return split_rows(_texts(response), len(prompts))

    async def stream(self, request: EnsembleRequest, prompt: str, deadline_s: float) -> AsyncGenerator[str, None]:
        """Each decoupled response's text (the whole sequence so far) as the model sends it.

        The request stream is half-closed after the one request; Triton ends the stream once its last response
        is sent, which ends the iteration. Closed before that (the caller stopped at a stop phrase, its client went
        away), the call is cancelled at once: Triton cancels the request instead of generating on for nobody."""
        call = self._stub.ModelStreamInfer(iter((infer_request(request, prompt),)), timeout=deadline_s)
        try:
            async for answer in call:
                if answer.error_message:
                    raise from_triton("", answer.error_message.strip(), deadline_s)
                texts = answer_texts(answer.infer_response)
                if texts:
                    yield texts[0]
        except ApiError:
            raise
        except Exception as exc:
            raise _error(exc, deadline_s) from exc
        finally:
            call.cancel()  # a no-op once the stream has ended

    async def close(self) -> None:
        await self._channel.close()
