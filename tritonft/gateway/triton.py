"""The gateway's calls to Triton over ``tritonclient.grpc.aio``; every failure becomes an :class:`ApiError`."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import numpy as np

from tritonft.gateway.errors import ApiError, from_triton
from tritonft.gateway.mapping import EnsembleRequest

TEXT_INPUT = "text_input"
TEXT_OUTPUT = "text_output"
_NUMPY = {"UINT32": np.uint32, "UINT64": np.uint64, "FP32": np.float32, "BYTES": np.object_}


def ensemble_inputs(request: EnsembleRequest, prompt: str) -> list[Any]:
    import tritonclient.grpc as grpcclient

    tensors = []
    text = grpcclient.InferInput(TEXT_INPUT, [1, 1], "BYTES")
    text.set_data_from_numpy(np.array([[prompt.encode()]], dtype=np.object_))
    tensors.append(text)
    for p in request.parameters:
        value = p.value.encode() if isinstance(p.value, str) else p.value
        tensor = grpcclient.InferInput(p.name, [1, 1], p.datatype)
        tensor.set_data_from_numpy(np.array([[value]], dtype=_NUMPY[p.datatype]))
        tensors.append(tensor)
    return tensors


def _texts(result: Any) -> list[str]:
    array = result.as_numpy(TEXT_OUTPUT)
    if array is None:
        raise ApiError(502, f"the model's answer has no {TEXT_OUTPUT} output", "server_error")
    return [v.decode("utf-8", errors="replace") if isinstance(v, bytes) else str(v) for v in array.reshape(-1)]


def _error(exc: BaseException, deadline_s: float) -> ApiError:
    from tritonclient.utils import InferenceServerException

    if isinstance(exc, InferenceServerException):
        status = str(exc.status() or "").removeprefix("StatusCode.")
        return from_triton(status, str(exc.message() or "").strip(), deadline_s)
    return ApiError(
        503, f"the inference server is unreachable: {type(exc).__name__}: {exc}", "server_error", None, "triton_down"
    )


class Triton:
    """One async gRPC client shared by all requests (grpc multiplexes them over one channel)."""

    def __init__(self, url: str) -> None:
        from tritonclient.grpc import aio

        self.url = url
        self._client = aio.InferenceServerClient(url)

    async def ready(self, models: list[str], timeout_s: float) -> bool:
        try:
            if not await self._client.is_server_ready(client_timeout=timeout_s):
                return False
            for name in models:
                if not await self._client.is_model_ready(name, client_timeout=timeout_s):
                    return False
        except Exception:
            return False
        return True

    async def generate(self, request: EnsembleRequest, prompt: str, deadline: float, deadline_s: float) -> list[str]:
        """The answer (one string per beam) to ``prompt``; ``deadline`` is the ``time.monotonic()`` instant the
        request's ``deadline_s`` ends at."""
        remaining = max(deadline - time.monotonic(), 0.001)
        try:
            inputs = ensemble_inputs(request, prompt)
            result = await self._client.infer(request.model.name, inputs, client_timeout=remaining)
        except Exception as exc:
            raise _error(exc, deadline_s) from exc
        return _texts(result)

    async def stream(self, request: EnsembleRequest, prompt: str, deadline_s: float) -> AsyncIterator[str]:
        """Each decoupled response's text (the whole sequence so far) as the model sends it.

        The request stream is half-closed after the one request; Triton ends the stream once its last response
        is sent, which ends the iteration."""

        async def one() -> AsyncIterator[dict[str, Any]]:
            yield {"model_name": request.model.name, "inputs": ensemble_inputs(request, prompt)}

        try:
            async for result, error in self._client.stream_infer(one(), stream_timeout=deadline_s):
                if error is not None:
                    raise _error(error, deadline_s)
                if result.as_numpy(TEXT_OUTPUT) is not None:
                    yield _texts(result)[0]
        except ApiError:
            raise
        except Exception as exc:
            raise _error(exc, deadline_s) from exc

    async def close(self) -> None:
        await self._client.close()
