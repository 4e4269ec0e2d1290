"""The quick start's second half: serve the offline demo's model repository on a real Triton, probe it, stop it.

Triton is the server PyPI's ``nvidia-pytriton`` bundles (CPU, Python backend; ``scripts/setup/triton.sh``); the
tokenizer models run with the server image's requirements. The FasterTransformer step needs a GPU, so a copy of
the repository is served with that step run by the reference engine (``tritonft.repo.engine``: tritonft's CPU
reference of FT reading the converted weights, behind the FT model's exact config): the answer is text the demo's
random T5 generated, through Triton, the ensemble and both tokenizer models.

Usage: .venv/bin/python scripts/serve_demo.py [--repository build/demo/model_repository]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repository", type=Path, default=REPO / "build" / "demo" / "model_repository")
    parser.add_argument("--requests", type=int, default=20, help="sequential requests for the latency (20)")
    args = parser.parse_args()
    if not (args.repository / "demo-t5" / "config.pbtxt").is_file():
        print(f"error: no demo repository in {args.repository}; run scripts/offline_demo.py first", file=sys.stderr)
        return 1

    from tritonft.local_triton import LocalTriton, TritonError, prepare_runtime
    from tritonft.probe import ModelTarget, ProbeConfig, run_probe
    from tritonft.repo.engine import use_reference_engine

    with tempfile.TemporaryDirectory(prefix="tritonft-demo-") as scratch:
        served = Path(scratch) / "model_repository"
        shutil.copytree(args.repository, served)
        switched = use_reference_engine(served)
        try:
            runtime = prepare_runtime()
            with LocalTriton(runtime, served, log_path=Path(scratch) / "tritonserver.log") as server:
                pid = server.pid
                print(f"tritonserver (pid {pid}): HTTP {server.http_url}, gRPC {server.grpc_url}")
                print(f"  FT step run on CPU by the reference engine (no GPU here): {', '.join(switched)}")
                target = ModelTarget("demo-t5")
                report = run_probe(ProbeConfig(f"grpc://{server.grpc_url}", (target,), latency_requests=args.requests))
                model = report.model("demo-t5")
                for check in report.checks:
                    print(f"  {'ok  ' if check.ok else 'FAIL'} {check.label}: {check.detail}")
                print(f"prompt:  {model.sample_prompt}")
                print(f"answer:  {model.sample_answer}")
                if model.latency is not None:
                    latency = model.latency
                    print(
                        f"latency: p50 {latency.p50_ms:.1f} ms, p95 {latency.p95_ms:.1f} ms ({latency.count} requests)"
                    )
        except TritonError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    print(f"tritonserver (pid {pid}) stopped")
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
