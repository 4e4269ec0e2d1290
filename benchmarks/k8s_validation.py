"""How long the Kubernetes half takes to plan and check: mock-engine build, strict schema validation, checkov.

Run: ``.venv/bin/python benchmarks/k8s_validation.py [--runs 5]`` (needs ``.tools/checkov``). Prints medians.
The stack is the one tests/components/test_manifests_valid.py checks: T5 TP=1 (HPA) and GPT-J TP=4 (KEDA),
monitoring on.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.components.test_manifests_valid import _both_services
from tests.components.validation import run_checkov, validate_manifest, write_manifests
from tritonft.synth.engine import RecordingMocks, mock_engine, run_program
from tritonft.synth.manifests import manifests_of


def once() -> tuple[float, float, float, int]:
    mocks = RecordingMocks()
    start = time.perf_counter()
    with mock_engine(mocks, project="triton-ft", stack="bench"):
        run_program(_both_services)
    bodies = [m.body for m in manifests_of(mocks.resources)]
    built = time.perf_counter()
    problems = [p for b in bodies for p in validate_manifest(b)]
    validated = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        write_manifests(bodies, Path(tmp))
        _, failures = run_checkov(Path(tmp))
    scanned = time.perf_counter()
    if problems or failures:
        raise SystemExit(f"unexpected problems: {problems} {failures}")
    return built - start, validated - built, scanned - validated, len(bodies)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    runs = [once() for _ in range(parser.parse_args().runs)]
    print(f"manifests: {runs[0][3]}, runs: {len(runs)}")
    for i, label in enumerate(("build (mock engine)", "schema 1.29+1.33", "checkov")):
        print(f"{label:22s} median {statistics.median(r[i] for r in runs):6.2f} s")


if __name__ == "__main__":
    main()
