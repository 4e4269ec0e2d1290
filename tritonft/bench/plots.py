"""The sweep's plots (matplotlib, Agg): throughput against p95 latency for every workload, and for the streamed
routes time to first token and inter-token latency against the load level. Rendered to bytes (PNG or SVG)."""

from __future__ import annotations

import io
from collections.abc import Sequence
from itertools import groupby
from typing import TYPE_CHECKING

from tritonft.bench.results import SweepPoint

if TYPE_CHECKING:
    from matplotlib.figure import Figure

FORMATS = ("png", "svg")


def _series(results: Sequence[SweepPoint]) -> list[tuple[str, list[SweepPoint]]]:
    """Points grouped by workload (tool, route, model), each series in load order."""

    def key(r: SweepPoint) -> tuple[str, str, str]:
        return (r.tool, r.route, r.model)

    ordered = sorted(results, key=key)
    return [
        (f"{route} {model} ({tool})", sorted(points, key=lambda p: p.level))
        for (tool, route, model), points in ((k, list(g)) for k, g in groupby(ordered, key=key))
    ]


def _values(points: Sequence[SweepPoint], attr: str) -> list[float]:
    """``attr`` of each point, a missing figure as NaN (a gap in the line)."""
    values: list[float | None] = [getattr(p, attr) for p in points]
    return [float("nan") if v is None else v for v in values]


def _figure(width: float, height: float) -> Figure:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=100)


def _save(fig: Figure, fmt: str) -> bytes:
    if fmt not in FORMATS:
        raise ValueError(f"plot format {fmt!r}: use one of {FORMATS}")
    buffer = io.BytesIO()
    fig.savefig(buffer, format=fmt, metadata={"Date": None} if fmt == "svg" else None)
    return buffer.getvalue()


def level_name(mode: str) -> str:
    return "concurrency" if mode == "concurrency" else "request rate (req/s)"


def throughput_latency(results: Sequence[SweepPoint], title: str, fmt: str = "png") -> bytes:
    """p95 request latency against throughput, one line per workload, each point labelled with its level."""
    fig = _figure(8, 5)
    ax = fig.add_subplot()
    for label, points in _series(results):
        measured = [p for p in points if p.throughput_rps is not None and p.latency_p95_ms is not None]
        if not measured:
            continue
        x, y = _values(measured, "throughput_rps"), _values(measured, "latency_p95_ms")
        ax.plot(x, y, "o-", label=label)
        for p, px, py in zip(measured, x, y, strict=True):
            ax.annotate(f"{p.level:g}", (px, py), textcoords="offset points", xytext=(4, 4))
    ax.set_xlabel("throughput (requests/s)")
    ax.set_ylabel("p95 latency (ms)")
    ax.set_title(f"{title}\nthroughput vs p95 latency (point labels: {level_name(_mode(results))})", fontsize=11)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    return _save(fig, fmt)


def _mode(results: Sequence[SweepPoint]) -> str:
    return results[0].mode if results else "concurrency"


def streaming_latency(results: Sequence[SweepPoint], title: str, fmt: str = "png") -> bytes | None:
    """TTFT and inter-token latency (p50 solid, p95 dashed) against the load level for the streamed workloads;
    ``None`` when the sweep streamed nothing."""
    streamed = [(label, [p for p in pts if p.streaming]) for label, pts in _series(results)]
    streamed = [(label, pts) for label, pts in streamed if pts]
    if not streamed:
        return None
    fig = _figure(11, 4.5)
    ttft, itl = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    for label, points in streamed:
        levels = [p.level for p in points]
        (line,) = ttft.plot(levels, _values(points, "ttft_p50_ms"), "o-", label=f"{label} p50")
        color = line.get_color()
        ttft.plot(levels, _values(points, "ttft_p95_ms"), "s--", color=color, label=f"{label} p95")
        itl.plot(levels, _values(points, "itl_p50_ms"), "o-", color=color, label=f"{label} p50")
        itl.plot(levels, _values(points, "itl_p95_ms"), "s--", color=color, label=f"{label} p95")
    axis = level_name(_mode(results))
    ticks = sorted({p.level for _, pts in streamed for p in pts})
    for ax, name in ((ttft, "time to first token"), (itl, "inter-token latency")):
        ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
        ax.set_xlabel(axis)
        ax.set_ylabel(f"{name} (ms)")
        ax.set_title(name)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small")
    fig.suptitle(f"{title}: streamed routes", fontsize=11)
    fig.tight_layout()
    return _save(fig, fmt)
