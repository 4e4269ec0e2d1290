"""Latency statistics shared by the probe and ``tritonft bench``."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) with linear interpolation between closest ranks (numpy's default).

    Raises ``ValueError`` for an empty sequence or ``q`` outside 0..100.
    """
    if not values:
        raise ValueError("percentile of no values")
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"percentile q must be within 0..100, got {q}")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100.0
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


@dataclass(frozen=True)
class LatencySummary:
    """Client-side latency of ``count`` successful requests, in milliseconds."""

    count: int
    p50_ms: float
    p95_ms: float
    mean_ms: float
    max_ms: float

    @classmethod
    def of_seconds(cls, latencies_s: Sequence[float]) -> LatencySummary:
        ms = [s * 1000.0 for s in latencies_s]
        return cls(
            count=len(ms),
            p50_ms=round(percentile(ms, 50), 3),
            p95_ms=round(percentile(ms, 95), 3),
            mean_ms=round(sum(ms) / len(ms), 3),
            max_ms=round(max(ms), 3),
        )
