"""OpenAI ``POST /v1/embeddings`` for encoder ensembles (:mod:`tritonft.encoder.repo`: text_input -> embedding).

Request (OpenAI's shape): ``model``; ``input`` a string or a list of strings (token-id arrays are refused: this
gateway embeds text with the model's own tokenizer); ``encoding_format`` ``float`` (default) or ``base64`` (the
little-endian float32 bytes, base64-encoded, as OpenAI sends them); ``dimensions`` only when it equals the
model's width (these models cannot shorten their vectors); ``user`` accepted (a string for the caller's own
records). Any other field is refused by name (:mod:`tritonft.gateway.parameters`' table).

The texts go to the ensemble as the rows of one gRPC ModelInfer call per ``max_batch_size`` rows (calls of one
request run concurrently); the answer keeps the input order and counts ``usage.prompt_tokens`` from the
tokenizer's ``num_tokens`` (special tokens included). An empty text, a text over the model's token limit, or
too many texts are answered 400 in OpenAI's error shape naming the offending ``input[i]``.
"""

from __future__ import annotations

import asyncio
import base64
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tritonft.gateway.errors import ApiError, bad_parameter, from_triton
from tritonft.gateway.parameters import EMBEDDINGS, checked_body

TEXT_INPUT = "text_input"
EMBEDDING = "embedding"
NUM_TOKENS = "num_tokens"
MAX_INPUTS = 2048
"""Most texts one request may carry (OpenAI's own limit)."""
_POSITION = re.compile(r"input\[(\d+)\]")


@dataclass(frozen=True)
class EmbeddingModel:
    """One encoder ensemble served under ``/v1/embeddings``."""

    name: str
    max_batch_size: int = 32
    """The ensemble's ``max_batch_size``: the most texts one ModelInfer call carries."""


@dataclass(frozen=True)
class EmbeddingsRequest:
    texts: tuple[str, ...]
    base64: bool
    dimensions: int | None


def parse_request(body: dict[str, Any]) -> EmbeddingsRequest:
    """The validated request; :class:`ApiError` (400) naming the field and the fix otherwise."""
    body = checked_body(body, EMBEDDINGS)
    raw = body.get("input")
    if isinstance(raw, str):
        texts: list[str] = [raw]
    elif isinstance(raw, list) and raw and all(isinstance(t, str) for t in raw):
        texts = list(raw)
    elif isinstance(raw, list) and raw and all(isinstance(t, int | list) for t in raw):
        raise bad_parameter("input", "token-id input is not supported here; send the text (a string or strings)")
    elif isinstance(raw, list) and not raw:
        raise bad_parameter("input", "input is an empty list; send at least one string")
    else:
        raise bad_parameter("input", "input must be a string or a list of strings")
    if len(texts) > MAX_INPUTS:
        raise bad_parameter("input", f"input has {len(texts)} strings; send at most {MAX_INPUTS} per request")
    for index, text in enumerate(texts):
        if not text:
            raise bad_parameter("input", f"input[{index}] is an empty string; send non-empty text")
    encoding = body.get("encoding_format", "float")
    if encoding not in ("float", "base64"):
        raise bad_parameter("encoding_format", f"encoding_format {encoding!r} must be 'float' or 'base64'")
    dimensions = body.get("dimensions")
    if dimensions is not None and (not isinstance(dimensions, int) or isinstance(dimensions, bool) or dimensions < 1):
        raise bad_parameter("dimensions", "dimensions must be a positive integer")
    return EmbeddingsRequest(tuple(texts), encoding == "base64", dimensions)


def infer_request(model: str, texts: Sequence[str]) -> Any:
    from tritonclient.grpc import service_pb2

    encoded = [t.encode("utf-8") for t in texts]
    raw = b"".join(len(t).to_bytes(4, "little") + t for t in encoded)
    text = service_pb2.ModelInferRequest.InferInputTensor(name=TEXT_INPUT, datatype="BYTES", shape=(len(texts), 1))
    outputs = [service_pb2.ModelInferRequest.InferRequestedOutputTensor(name=n) for n in (EMBEDDING, NUM_TOKENS)]
    return service_pb2.ModelInferRequest(model_name=model, inputs=(text,), outputs=outputs, raw_input_contents=(raw,))


def read_response(response: Any, rows: int) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """``(embeddings [rows, width] float32, token counts [rows])`` from a ModelInferResponse."""
    found: dict[str, np.ndarray[Any, Any]] = {}
    for index, output in enumerate(response.outputs):
        dtype = {"FP32": np.float32, "INT32": np.int32}.get(output.datatype)
        if dtype is None or index >= len(response.raw_output_contents):
            continue
        found[output.name] = np.frombuffer(response.raw_output_contents[index], dtype=dtype).reshape(
            tuple(output.shape)
        )
    if EMBEDDING not in found or NUM_TOKENS not in found or found[EMBEDDING].shape[0] != rows:
        raise ApiError(502, f"the model's answer has no {EMBEDDING} / {NUM_TOKENS} for {rows} texts", "server_error")
    return found[EMBEDDING], found[NUM_TOKENS].reshape(-1)


def _shifted(error: ApiError, offset: int) -> ApiError:
    """A Triton error about ``input[i]`` of one call, renumbered to the request's own ``input`` list."""
    if not offset and error.status != 400:
        return error
    message = _POSITION.sub(lambda m: f"input[{int(m.group(1)) + offset}]", error.message)
    code = "context_length_exceeded" if "tokens long" in message else error.code
    return ApiError(error.status, message, error.type, "input" if error.status == 400 else error.param, code)


async def embed(
    stub: Any, model: EmbeddingModel, request: EmbeddingsRequest, deadline: float, deadline_s: float
) -> tuple[np.ndarray[Any, Any], int]:
    """All texts' embeddings (input order) and the token count, one ModelInfer call per ``max_batch_size`` texts."""
    import grpc  # type: ignore[import-untyped]  # no types-grpcio in the lock

    size = max(1, model.max_batch_size)
    chunks = [request.texts[i : i + size] for i in range(0, len(request.texts), size)]

    async def one(offset: int, texts: Sequence[str]) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
        remaining = max(deadline - time.monotonic(), 0.001)
        try:
            response = await stub.ModelInfer(infer_request(model.name, texts), timeout=remaining)
        except grpc.aio.AioRpcError as exc:
            error = from_triton(exc.code().name, str(exc.details() or "").strip(), deadline_s)
            if exc.code().name == "INVALID_ARGUMENT" or "tokens long" in error.message:
                error = ApiError(400, str(exc.details() or "").strip(), "invalid_request_error", "input", None)
            raise _shifted(error, offset) from exc
        except Exception as exc:
            raise ApiError(
                503, f"the inference server is unreachable: {exc}", "server_error", None, "triton_down"
            ) from exc
        return read_response(response, len(texts))

    answers = await asyncio.gather(*(one(i * size, chunk) for i, chunk in enumerate(chunks)))
    vectors = answers[0][0] if len(answers) == 1 else np.concatenate([a[0] for a in answers])
    return vectors, int(sum(int(a[1].sum()) for a in answers))


def response_body(model: str, request: EmbeddingsRequest, vectors: np.ndarray[Any, Any], tokens: int) -> dict[str, Any]:
    if request.dimensions is not None and request.dimensions != vectors.shape[1]:
        raise bad_parameter(
            "dimensions",
            f"model {model!r} answers {vectors.shape[1]}-dimensional embeddings; drop dimensions or set it to "
            f"{vectors.shape[1]}",
        )
    if request.base64:
        items: list[Any] = [base64.b64encode(row.astype("<f4").tobytes()).decode("ascii") for row in vectors]
    else:
        items = vectors.tolist()
    return {
        "object": "list",
        "data": [{"object": "embedding", "index": i, "embedding": item} for i, item in enumerate(items)],
        "model": model,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }
