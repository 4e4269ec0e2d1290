"""Benchmark results: one row per concurrency level, rendered as a table, CSV and a latency/throughput plot."""

from __future__ import annotations

import csv
import io
import os
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from tritonft.probe.stats import percentile


@dataclass(frozen=True)
class LevelResult:
    """What ``concurrency`` concurrent clients achieved during a ``window_s`` measurement window.

    ``requests`` counts successful requests started inside the window; ``throughput_rps`` is
    ``requests / window_s``; latencies (milliseconds, client side) are ``None`` when nothing succeeded.
    """

    concurrency: int
    requests: int
    errors: int
    window_s: float
    throughput_rps: float
    p50_ms: float | None
    p90_ms: float | None
    p95_ms: float | None
    p99_ms: float | None
    mean_ms: float | None

    @classmethod
    def from_latencies(
        cls, concurrency: int, latencies_s: Sequence[float], errors: int, window_s: float
    ) -> LevelResult:
        ms = [s * 1000.0 for s in latencies_s]

        def pct(q: float) -> float | None:
            return round(percentile(ms, q), 3) if ms else None

        return cls(
            concurrency=concurrency,
            requests=len(ms),
            errors=errors,
            window_s=round(window_s, 3),
            throughput_rps=round(len(ms) / window_s, 3) if window_s > 0 else 0.0,
            p50_ms=pct(50),
            p90_ms=pct(90),
            p95_ms=pct(95),
            p99_ms=pct(99),
            mean_ms=round(sum(ms) / len(ms), 3) if ms else None,
        )


CSV_COLUMNS = tuple(f.name for f in fields(LevelResult))


def _cell(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def format_table(results: Sequence[LevelResult]) -> str:
    """A perf_analyzer-style summary: a table, then the "Inferences/Second vs. Client p95 Latency" lines."""
    header = (
        f"{'Concurrency':>11}  {'Requests':>8}  {'Errors':>6}  {'Throughput (infer/s)':>20}  "
        f"{'p50 (ms)':>9}  {'p90 (ms)':>9}  {'p95 (ms)':>9}  {'p99 (ms)':>9}"
    )
    rows = [
        f"{r.concurrency:>11}  {r.requests:>8}  {r.errors:>6}  {r.throughput_rps:>20.2f}  "
        f"{_cell(r.p50_ms):>9}  {_cell(r.p90_ms):>9}  {_cell(r.p95_ms):>9}  {_cell(r.p99_ms):>9}"
        for r in results
    ]
    summary = ["", "Inferences/Second vs. Client p95 Latency"]
    summary += [
        f"Concurrency: {r.concurrency}, throughput: {r.throughput_rps:g} infer/sec, latency "
        + ("n/a" if r.p95_ms is None else f"{round(r.p95_ms * 1000)} usec")
        for r in results
    ]
    return "\n".join([header, *rows, *summary])


def to_csv(results: Sequence[LevelResult]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for r in results:
        writer.writerow({k: "" if v is None else v for k, v in asdict(r).items()})
    return buffer.getvalue()


def _atomic_write(path: Path, data: bytes) -> None:
    """Write via a temporary file in the same directory and rename: a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_csv(results: Sequence[LevelResult], path: Path) -> None:
    _atomic_write(path, to_csv(results).encode("utf-8"))


def render_plot(results: Sequence[LevelResult], title: str) -> bytes:
    """PNG of client latency (p50/p95/p99) against throughput, one point per concurrency level."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    measured = [r for r in results if r.p50_ms is not None]
    fig = Figure(figsize=(7, 4.5), dpi=100)
    ax = fig.add_subplot()
    x = [r.throughput_rps for r in measured]
    for label, attr, style in (("p50", "p50_ms", "o-"), ("p95", "p95_ms", "s-"), ("p99", "p99_ms", "^--")):
        ax.plot(x, [getattr(r, attr) for r in measured], style, label=label)
    for r in measured:
        ax.annotate(
            f"c={r.concurrency}", (r.throughput_rps, r.p95_ms or 0.0), textcoords="offset points", xytext=(4, 6)
        )
    ax.set_xlabel("throughput (infer/s)")
    ax.set_ylabel("client latency (ms)")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return buffer.getvalue()


def write_plot(results: Sequence[LevelResult], path: Path, title: str) -> None:
    _atomic_write(path, render_plot(results, title))
