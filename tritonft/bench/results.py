"""A sweep's results: one :class:`SweepPoint` per tool run, carrying the tool's own figures (pure).

The columns are read from what the tools wrote, never recomputed: AIPerf's ``profile_export_aiperf.json`` (its
metric tags, milliseconds) and perf_analyzer's ``-f`` CSV (microseconds, so divided by 1000 into the same
milliseconds column: a unit, not a new statistic). Each point also keeps the tool's whole record under ``raw`` in
the JSON results (AIPerf redacts headers itself).
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from tritonft.bench.plan import Point


@dataclass(frozen=True)
class SweepPoint:
    """What one tool measured for one workload at one load level (``None``: the tool reports no such figure)."""

    tool: str
    route: str
    model: str
    url: str
    mode: str
    level: float
    requests: float | None
    errors: float | None
    throughput_rps: float | None
    latency_avg_ms: float | None
    latency_p50_ms: float | None
    latency_p90_ms: float | None
    latency_p95_ms: float | None
    latency_p99_ms: float | None
    ttft_p50_ms: float | None = None
    ttft_p95_ms: float | None = None
    itl_p50_ms: float | None = None
    itl_p95_ms: float | None = None
    output_tokens_per_s: float | None = None
    output_tokens: float | None = None
    """Output tokens counted over the run: AIPerf's ``total_usage_completion_tokens``, the server's ``usage``."""
    goodput_rps: float | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False)

    @property
    def streaming(self) -> bool:
        return self.ttft_p50_ms is not None


CSV_COLUMNS = tuple(f.name for f in fields(SweepPoint) if f.name != "raw")


def _stat(record: Mapping[str, Any], tag: str, stat: str) -> float | None:
    metric = record.get(tag)
    if not isinstance(metric, Mapping):
        return None
    value = metric.get(stat)
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


def from_aiperf(point: Point, mode: str, export: Mapping[str, Any]) -> SweepPoint:
    """A point from AIPerf's ``profile_export_aiperf.json`` (AIPerf's metric tags: ``request_latency`` in ms, ...)."""
    errors = _stat(export, "error_request_count", "avg")
    if errors is None:
        errors = float(sum(int(e.get("count", 0)) for e in export.get("error_summary") or [] if isinstance(e, dict)))
    return SweepPoint(
        tool="aiperf",
        route=point.workload.route.value,
        model=point.workload.model,
        url=point.workload.base_url,
        mode=mode,
        level=point.level,
        requests=_stat(export, "request_count", "avg"),
        errors=errors,
        throughput_rps=_stat(export, "request_throughput", "avg"),
        latency_avg_ms=_stat(export, "request_latency", "avg"),
        latency_p50_ms=_stat(export, "request_latency", "p50"),
        latency_p90_ms=_stat(export, "request_latency", "p90"),
        latency_p95_ms=_stat(export, "request_latency", "p95"),
        latency_p99_ms=_stat(export, "request_latency", "p99"),
        ttft_p50_ms=_stat(export, "time_to_first_token", "p50"),
        ttft_p95_ms=_stat(export, "time_to_first_token", "p95"),
        itl_p50_ms=_stat(export, "inter_token_latency", "p50"),
        itl_p95_ms=_stat(export, "inter_token_latency", "p95"),
        output_tokens_per_s=_stat(export, "output_token_throughput", "avg"),
        output_tokens=_stat(export, "total_usage_completion_tokens", "avg"),
        goodput_rps=_stat(export, "goodput", "avg"),
        raw=dict(export),
    )


def _usec_to_ms(row: Mapping[str, str], column: str) -> float | None:
    text = (row.get(column) or "").strip()
    return float(text) / 1000.0 if text else None


def read_perf_analyzer_csv(text: str) -> dict[str, str]:
    """The one measurement row of perf_analyzer's ``-f`` CSV (one level per run). ``ValueError`` when absent."""
    rows = list(csv.DictReader(io.StringIO(text)))
    if len(rows) != 1:
        raise ValueError(f"perf_analyzer's CSV report has {len(rows)} measurement rows, expected 1")
    return dict(rows[0])


def from_perf_analyzer(point: Point, mode: str, row: Mapping[str, str]) -> SweepPoint:
    """A point from perf_analyzer's CSV row (``Inferences/Second``, ``p50 latency`` ... in µs)."""
    throughput = (row.get("Inferences/Second") or "").strip()
    return SweepPoint(
        tool="perf_analyzer",
        route=point.workload.route.value,
        model=point.workload.model,
        url=point.workload.base_url,
        mode=mode,
        level=point.level,
        requests=None,
        errors=0.0,  # perf_analyzer stops with an error instead of reporting failed requests
        throughput_rps=float(throughput) if throughput else None,
        latency_avg_ms=_usec_to_ms(row, "Avg latency"),
        latency_p50_ms=_usec_to_ms(row, "p50 latency"),
        latency_p90_ms=_usec_to_ms(row, "p90 latency"),
        latency_p95_ms=_usec_to_ms(row, "p95 latency"),
        latency_p99_ms=_usec_to_ms(row, "p99 latency"),
        raw=dict(row),
    )


def _cell(value: object) -> object:
    return "" if value is None else value


def to_csv(results: Sequence[SweepPoint]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for r in results:
        writer.writerow({**{k: _cell(getattr(r, k)) for k in CSV_COLUMNS}, "level": f"{r.level:g}"})
    return buffer.getvalue()


def to_json(results: Sequence[SweepPoint], meta: Mapping[str, Any]) -> str:
    """``{"meta": ..., "points": [{<CSV columns>, "raw": <the tool's record>}]}``."""
    return json.dumps({"meta": dict(meta), "points": [asdict(r) for r in results]}, indent=2, default=str) + "\n"


def _fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def format_table(results: Sequence[SweepPoint]) -> str:
    """One line per point: the figures a person reads first."""
    header = (
        f"{'tool':<13} {'route':<11} {'model':<18} {'level':>6} {'req/s':>8} {'p50 ms':>8} {'p95 ms':>8} "
        f"{'TTFT p95':>9} {'ITL p95':>8} {'out tok/s':>9} {'goodput':>8} {'errors':>6}"
    )
    rows = [
        f"{r.tool:<13} {r.route:<11} {r.model[:18]:<18} {r.level:>6g} {_fmt(r.throughput_rps, 2):>8} "
        f"{_fmt(r.latency_p50_ms):>8} {_fmt(r.latency_p95_ms):>8} {_fmt(r.ttft_p95_ms):>9} {_fmt(r.itl_p95_ms, 2):>8} "
        f"{_fmt(r.output_tokens_per_s):>9} {_fmt(r.goodput_rps, 2):>8} {_fmt(r.errors, 0):>6}"
        for r in results
    ]
    return "\n".join([header, *rows])


def from_json(payload: Mapping[str, Any]) -> list[SweepPoint]:
    """The points of :func:`to_json`'s document (e.g. collected from an in-cluster Job's log)."""
    names = {f.name for f in fields(SweepPoint)}
    return [SweepPoint(**{k: v for k, v in point.items() if k in names}) for point in payload.get("points", [])]
