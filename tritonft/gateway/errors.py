"""OpenAI-style errors: ``{"error": {"message", "type", "param", "code"}}`` with the matching HTTP status."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ApiError(Exception):
    """An error answered to the client; ``message`` says what was wrong and how to fix it."""

    status: int
    message: str
    type: str = "invalid_request_error"
    param: str | None = None
    code: str | None = None
    retry_after_s: int | None = None
    """Sent as ``Retry-After`` (seconds): when the client should try again."""

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


def bad_parameter(param: str, message: str) -> ApiError:
    """A request field with a value the gateway (or the model) cannot honour: 400."""
    return ApiError(400, message, param=param, code="invalid_parameter")


def unknown_model(name: str, served: list[str]) -> ApiError:
    return ApiError(
        404,
        f"model {name!r} is not served here; served models: {', '.join(served) or 'none'} (see GET /v1/models)",
        param="model",
        code="model_not_found",
    )


STARTING_RETRY_AFTER_S = 60
"""``Retry-After`` for a model that is starting from zero replicas (a GPU pod takes minutes to serve)."""


def model_starting(name: str) -> ApiError:
    """A request for a model that scales to zero found no running replica: it is the demand that starts one."""
    return ApiError(
        503,
        f"model {name!r} has no running replica: it scales to zero when idle, and requests like this one start it; "
        f"retry in a minute or two",
        "server_error",
        None,
        "model_starting",
        STARTING_RETRY_AFTER_S,
    )


def client_error(error: ApiError, model: str, scales_to_zero: frozenset[str]) -> ApiError:
    """What the client is answered for ``error``, met serving ``model``: a model that scales to zero whose Triton is
    unreachable is asleep, not down (503 ``model_starting`` with ``Retry-After``); any other error as it is."""
    if error.code == "triton_down" and model in scales_to_zero:
        return model_starting(model)
    return error


def deadline_expired(deadline_s: float, *, stream_for_longer: bool = False) -> ApiError:
    """The 504 of a request past its deadline; ``stream_for_longer`` when an unstreamed answer hit the cap that only
    streaming lifts (``tritonft.gateway.config.UNSTREAMED_DEADLINE_MAX_S``)."""
    message = f"the model did not answer within the {deadline_s:g} s deadline"
    if stream_for_longer:
        message += (
            f"; an unstreamed answer may take at most {deadline_s:g} s (the proxies in front end a response that "
            "sends nothing for longer): ask with `stream: true` for a longer answer"
        )
    return ApiError(504, message, "timeout", None, "timeout")


def from_triton(status: str, message: str, deadline_s: float) -> ApiError:
    """Map a Triton gRPC status (``StatusCode.X`` name without prefix) and its message to the client's error."""
    if status == "DEADLINE_EXCEEDED":
        return deadline_expired(deadline_s)
    if status == "UNAVAILABLE":
        return ApiError(503, f"the inference server is unreachable: {message}", "server_error", None, "triton_down")
    if "max_input_len" in message:
        return ApiError(400, message, "invalid_request_error", "prompt", "context_length_exceeded")
    if status == "INVALID_ARGUMENT":
        return ApiError(400, f"the model rejected the request: {message}", "invalid_request_error", None, None)
    return ApiError(502, f"the inference server failed: {status or 'error'}: {message}", "server_error", None, None)
