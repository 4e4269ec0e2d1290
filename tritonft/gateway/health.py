"""The gateway's readiness, decided from which models' Tritons answered (pure)."""

from __future__ import annotations

from collections.abc import Sequence


def readiness(down: Sequence[str], any_up: bool, scales_to_zero: frozenset[str]) -> tuple[int, str]:
    """(HTTP status, body) of ``/health/ready`` given the models whose Triton is not ready.

    Ready while some Triton serves all its models: with one Triton per model (a deployed stack), one model rolling
    out must not take every gateway replica, and so every model, out of service. A model that scales to zero never
    counts: while it sleeps, the requests the gateway answers for it are what wakes it (KEDA reads their rate), so
    the gateway must stay in the Service even when every model sleeps.
    """
    if not down:
        return 200, "ok"
    missing = [name for name in down if name not in scales_to_zero]
    asleep = [name for name in down if name in scales_to_zero]
    parts = ([f"not ready: {', '.join(missing)}"] if missing else []) + (
        [f"asleep: {', '.join(asleep)}"] if asleep else []
    )
    return (200 if any_up or not missing else 503), "; ".join(parts)
