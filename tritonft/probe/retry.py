"""Bounded retries: exponential backoff inside one overall deadline, never past it; and what is worth retrying
(:func:`classify`: a tritonclient or network error turned into a transient or permanent one, with its reason)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")

MIN_CALL_TIMEOUT_S = 0.05
"""Below this much remaining time another call cannot succeed: give up instead."""


class TransientError(Exception):
    """A failure worth retrying (server starting, connection refused, timeout, 502/503/504, model loading)."""


class PermanentError(Exception):
    """A failure retrying cannot fix (unknown route, bad request, wrong contract)."""


class Deadline:
    """An overall time budget measured on a monotonic clock."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        if seconds <= 0:
            raise ValueError(f"deadline must be positive, got {seconds}")
        self.seconds = seconds
        self._clock = clock
        self._start = clock()

    def elapsed(self) -> float:
        return self._clock() - self._start

    def remaining(self) -> float:
        return max(0.0, self.seconds - self.elapsed())

    def call_timeout(self, per_call_s: float) -> float:
        """The timeout for the next call: ``per_call_s``, shortened so the call cannot outlive the deadline."""
        return min(per_call_s, self.remaining())


def backoff_delays(initial_s: float = 0.2, factor: float = 2.0, cap_s: float = 5.0) -> Iterator[float]:
    """``initial_s, initial_s*factor, ...`` capped at ``cap_s``, forever."""
    delay = initial_s
    while True:
        yield delay
        delay = min(cap_s, delay * factor)


class RetriesExhaustedError(Exception):
    """Raised by :func:`retry` with the last reason and the number of attempts made."""

    def __init__(self, reason: str, attempts: int, timed_out: bool) -> None:
        self.reason = reason
        self.attempts = attempts
        self.timed_out = timed_out
        super().__init__(reason)


@dataclass(frozen=True)
class Success(Generic[T]):
    value: T
    attempts: int


def retry(
    call: Callable[[float], T],
    deadline: Deadline,
    per_call_timeout_s: float,
    sleep: Callable[[float], None] = time.sleep,
    delays: Iterator[float] | None = None,
) -> Success[T]:
    """Run ``call(timeout_s)`` until it returns, retrying :class:`TransientError` with backoff.

    Stops with :class:`RetriesExhaustedError` on a :class:`PermanentError` (at once) or when the deadline leaves
    no time for another call; sleeping between attempts never goes past the deadline.
    """
    schedule = delays if delays is not None else backoff_delays()
    attempts = 0
    last = "no attempt was made: the deadline had already passed"
    while True:
        timeout = deadline.call_timeout(per_call_timeout_s)
        if timeout < MIN_CALL_TIMEOUT_S:
            reason = f"{last} (gave up at the {deadline.seconds:g} s deadline)"
            raise RetriesExhaustedError(reason, attempts, timed_out=True)
        attempts += 1
        try:
            return Success(call(timeout), attempts)
        except PermanentError as exc:
            raise RetriesExhaustedError(str(exc), attempts, timed_out=False) from exc
        except TransientError as exc:
            last = str(exc)
        pause = min(next(schedule), deadline.remaining())
        if pause > 0:
            sleep(pause)


_TRANSIENT_GRPC = {"UNAVAILABLE", "DEADLINE_EXCEEDED", "RESOURCE_EXHAUSTED", "ABORTED"}
_TRANSIENT_HTTP = {"408", "429", "502", "503", "504"}


def status_code(exc: Any) -> str:
    """The status of a tritonclient ``InferenceServerException``: a gRPC code name or an HTTP status."""
    status = str(exc.status() or "")
    return status.removeprefix("StatusCode.")


def classify(exc: BaseException, action: str, timeout_s: float) -> TransientError | PermanentError:
    """Turn whatever tritonclient or the network raised during ``action`` into a retry decision with a reason."""
    from tritonclient.utils import InferenceServerException

    if isinstance(exc, InferenceServerException):
        status = status_code(exc)
        message = str(exc.message() or "").strip()
        if status == "DEADLINE_EXCEEDED":
            return TransientError(f"{action}: no answer within {timeout_s:.1f} s")
        text = f"{action}: server answered {status or 'an error'}: {message}"
        return TransientError(text) if status in _TRANSIENT_GRPC | _TRANSIENT_HTTP else PermanentError(text)
    if isinstance(exc, TimeoutError) or type(exc).__name__ in {"Timeout", "timeout", "ConnectionTimeout"}:
        return TransientError(f"{action}: no answer within {timeout_s:.1f} s")
    detail = str(exc) or type(exc).__name__
    return TransientError(f"{action}: {type(exc).__name__}: {detail}")
