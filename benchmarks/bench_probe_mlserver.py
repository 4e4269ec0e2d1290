"""Throughput/latency of `tritonft bench` against a local MLServer (text echo-style model), HTTP and gRPC.

Usage: .venv/bin/python benchmarks/bench_probe_mlserver.py [RUNS] [DURATION_S]
Prints, per transport and concurrency, the median over RUNS of throughput and p50/p95/p99.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.tritonft.probe.conftest import SHARED_MODELS, start_mlserver, stop
from tritonft.bench.loadgen import LoadPlan, run_levels
from tritonft.probe.contract import TextContract
from tritonft.probe.endpoint import parse_endpoint


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    duration = float(sys.argv[2]) if len(sys.argv) > 2 else 3.0
    proc, server = start_mlserver(Path(tempfile.mkdtemp()) / "srv", SHARED_MODELS[:1])
    try:
        for url in (server.http_url, server.grpc_url):
            plan = LoadPlan(
                parse_endpoint(url),
                "t5",
                TextContract(),
                "translate English to German: That is good.",
                (1, 2, 4),
                duration,
                0.5,
                30.0,
            )
            per_level: dict[int, list[tuple[float, float, float, float]]] = {}
            for _ in range(runs):
                for r in asyncio.run(run_levels(plan)):
                    per_level.setdefault(r.concurrency, []).append(
                        (r.throughput_rps, r.p50_ms or 0.0, r.p95_ms or 0.0, r.p99_ms or 0.0)
                    )
            for c, rows in per_level.items():
                med = [statistics.median(col) for col in zip(*rows, strict=True)]
                print(
                    f"{url.split(':')[0]:5} c={c}  {med[0]:7.1f} infer/s  p50 {med[1]:.2f} ms  "
                    f"p95 {med[2]:.2f} ms  p99 {med[3]:.2f} ms  (median of {runs} runs x {duration:g} s)"
                )
    finally:
        stop(proc)


if __name__ == "__main__":
    main()
