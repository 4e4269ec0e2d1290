"""The Triton part of the start-up budget measured on a real ``tritonserver`` on this machine: process start →
READY (``/v2/health/ready`` 200, every model loaded) → first answer, with Triton's own per-model load times from
its log (:func:`tritonft.rollout.startup.triton_load`). Used by the real-Triton tests and the benchmark.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tritonft.local_triton import LocalTriton, TritonRuntime
from tritonft.rollout.startup import TritonLoad, triton_load


@dataclass(frozen=True)
class LocalStart:
    """Seconds from spawning the server: READY, first answer; and what its log says (model loads, HTTP up)."""

    ready_s: float
    first_answer_s: float
    load: TritonLoad
    answer: object

    def as_output(self) -> dict[str, object]:
        return {
            "ready": round(self.ready_s, 3),
            "first_answer": round(self.first_answer_s, 3),
            "server_up": self.load.server_up_s,
            "models": dict(self.load.models),
        }


def measure_start(
    runtime: TritonRuntime,
    repositories: Path | Sequence[Path],
    log_path: Path,
    ask: Callable[[LocalTriton], object],
    *,
    extra_args: Sequence[str] = (),
) -> tuple[LocalTriton, LocalStart]:
    """Start a server, time it to READY and to ``ask``'s first answer; returns the running server (the caller stops
    it) and the figures."""
    server = LocalTriton(runtime, repositories, log_path=log_path, extra_args=extra_args)
    began = time.monotonic()
    server.start()
    ready = time.monotonic() - began
    try:
        answer = ask(server)
    except BaseException:
        server.stop()
        raise
    first = time.monotonic() - began
    return server, LocalStart(ready, first, triton_load(server.log_text()), answer)
