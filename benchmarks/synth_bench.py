"""Time `tritonft synth` (per stack) and the whole test suite; print medians over runs.

Usage: .venv/bin/python benchmarks/synth_bench.py [--runs 5] [--stacks prod,local] [--suite-runs 1]
Each synth run is a fresh `tritonft synth` process (what a user or CI pays: interpreter start, imports, the
program under the mock engine, writing the plan). The suite is `pytest -q` as run by scripts/test.sh.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def timed(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=REPO, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--stacks", default="prod,local")
    parser.add_argument("--suite-runs", type=int, default=1)
    args = parser.parse_args()
    tritonft = str(REPO / ".venv" / "bin" / "tritonft")
    with tempfile.TemporaryDirectory() as tmp:
        for stack in args.stacks.split(","):
            times = [
                timed([tritonft, "synth", "--stack", stack, "--quiet", "--out", f"{tmp}/{stack}"])
                for _ in range(args.runs)
            ]
            print(
                f"synth {stack:8s} median {statistics.median(times):6.2f} s  "
                f"(min {min(times):.2f}, max {max(times):.2f}, runs {len(times)})"
            )
    if args.suite_runs:
        times = [
            timed([str(REPO / ".venv" / "bin" / "pytest"), "-q", "-p", "no:cacheprovider"])
            for _ in range(args.suite_runs)
        ]
        print(f"test suite     median {statistics.median(times):6.1f} s  (runs {len(times)})")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
