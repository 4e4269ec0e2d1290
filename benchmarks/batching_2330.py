"""The FT ensemble's latency at concurrency 1 and throughput at concurrency 8 on tritonserver 2.33.0 (NGC 23.04, the
FasterTransformer image's server), with the FT step's dynamic-batcher queue delay at the spec's old default (1000 us)
and at 0.

The served repository is the ``dev`` stack's ``gpt2`` rendered by ``tritonft.repo`` with a small trained byte-level
BPE tokenizer, the FT step stood in for by the echo stand-in (``tritonft.standin``): the Triton side of the path
(ensemble, both tokenizer models, the batchers), not FT's GPU time. Both variants are served at once, one server
each, and measured alternately run after run (the machine drifts more than the differences measured); the load is
``tritonft bench``'s, so perf_analyzer's (gRPC, one prompt, closed loop, its stability check relaxed: the busy
machine's windows never agree within 10%), on 127.0.0.1 only. Prints every run and the medians over runs.

(The figures recorded in BENCHMARKS.md for this change were taken with the project's former asyncio load loop, which
``tritonft bench`` retired in favour of perf_analyzer while this benchmark was written; a rerun prints perf_analyzer's.)

Usage: .venv/bin/python benchmarks/batching_2330.py [--runs 3] [--seconds 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.system.realtriton.repos import stack_specs
from tests.tritonft.repo.conftest import train_gpt_tokenizer
from tritonft.local_triton import FT_IMAGE_SERVER, LocalTriton, prepare_runtime
from tritonft.repo.render import write_repository
from tritonft.spec import Family
from tritonft.standin import standin_all

VARIANTS = {"queue delay 1000 us (before)": 1000, "queue delay 0 (after)": 0}
PROMPT = "the quick brown fox jumps over the lazy dog"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    (gpt2,) = [spec for spec in stack_specs("dev") if spec.family is Family.GPT2]
    runtime = prepare_runtime(release=FT_IMAGE_SERVER)
    with tempfile.TemporaryDirectory(prefix="batching-2330-") as tmp:
        work = Path(tmp)
        tokenizer = train_gpt_tokenizer(work / "tokenizer")
        servers: dict[str, LocalTriton] = {}
        try:
            for label, delay in VARIANTS.items():
                spec = replace(gpt2, batching=replace(gpt2.batching, max_queue_delay_us=delay))
                repo = work / f"repo-{delay}"
                write_repository(spec, repo, tokenizer_dir=tokenizer, model_root=str(repo))
                standin_all(repo)
                servers[label] = LocalTriton(runtime, repo, log_path=work / f"triton-{delay}.log")
                servers[label].start()
            latency: dict[str, list[float]] = {label: [] for label in VARIANTS}
            throughput: dict[str, list[float]] = {label: [] for label in VARIANTS}
            for run in range(1, args.runs + 1):
                for label, server in servers.items():
                    out = work / f"bench-{run}-{VARIANTS[label]}"
                    command = [sys.executable, "-m", "tritonft", "bench", "--triton", f"grpc://{server.grpc_url}"]
                    command += ["--kserve", gpt2.name, "--prompt", PROMPT, "--concurrency", "1,8"]
                    command += ["--duration", f"{args.seconds:g}", "--out", str(out)]
                    command += ["--perf-analyzer-arg=--stability-percentage=1000"]
                    subprocess.run(command, check=True)
                    points = {p["level"]: p for p in json.loads((out / "bench.json").read_text())["points"]}
                    one, eight = points[1], points[8]
                    if one["latency_p50_ms"] is None or one["errors"] or eight["errors"]:
                        raise SystemExit(f"{label}: failed requests ({one['errors']} at c=1, {eight['errors']} at c=8)")
                    latency[label].append(one["latency_p50_ms"])
                    throughput[label].append(eight["throughput_rps"])
                    print(
                        f"run {run} {label}: c=1 p50 {one['latency_p50_ms']:.2f} ms, c=8 {eight['throughput_rps']:.1f} "
                        f"req/s (p50 {eight['latency_p50_ms'] or 0:.2f} ms)",
                        flush=True,
                    )
            print(f"\nmedians over {args.runs} runs (tritonserver {FT_IMAGE_SERVER.version}, {args.seconds:g} s each):")
            for label in VARIANTS:
                print(
                    f"  {label}: c=1 p50 {statistics.median(latency[label]):.2f} ms, "
                    f"c=8 {statistics.median(throughput[label]):.1f} req/s"
                )
        finally:
            for server in servers.values():
                server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
