"""Benchmark the reference engine served by a real Triton: ensemble latency per family (issue 13).

The golden checkpoints of ``tests/tritonft/reference`` (T5, GPT-2, GPT-J at test size) are rebuilt from their seed,
converted with ``tritonft convert`` at TP 2 and rendered with ``tritonft repo --engine reference`` (the word
tokenizer of ``tests/system/realtriton/golden.py``), exactly as the end-to-end tests serve them; then, per model,
over gRPC:
``--requests`` sequential requests of one prompt and of a batch of the three golden prompts (different lengths),
each generating up to 12 tokens greedily, after ``--warmup`` requests. Printed: p50/p95 latency, the generated
tokens per answer, and the load average before and after.

    .venv/bin/python benchmarks/reference_serving.py [--requests 30] [--warmup 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import tritonclient.grpc as grpcclient

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.system.realtriton.golden import SERVED, TP, golden_cases, golden_spec, render_golden
from tests.tritonft.reference.checkpoints import VARIANTS
from tritonft.cli import main as tritonft
from tritonft.local_triton import LocalTriton, prepare_runtime


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def latencies(client: grpcclient.InferenceServerClient, model: str, prompts: list[str], count: int) -> list[float]:
    array = np.array([[p.encode()] for p in prompts], dtype=np.object_)
    text = grpcclient.InferInput("text_input", list(array.shape), "BYTES")
    text.set_data_from_numpy(array)
    out = []
    for _ in range(count):
        started = time.perf_counter()
        client.infer(model, [text])
        out.append((time.perf_counter() - started) * 1000)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--requests", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tritonft-bench-refserve-") as tmp:
        root = Path(tmp)
        repo, scratch = root / "repo", root / "scratch"
        scratch.mkdir()
        for name in SERVED:
            variant = next(v for v in VARIANTS if v.name == name)
            hf = variant.save(root / "hf" / name)
            out = root / "ft" / name
            code = tritonft(["convert", "--input", str(hf), "--output", str(out), "--tp", str(TP)])
            if code != 0:
                return code
            render_golden(name, out / f"{TP}-gpu", repo, scratch)
        print(f"load average before: {load()}")
        print(f"{'model':<14} {'1 prompt p50/p95 ms':>20} {'batch 3 p50/p95 ms':>20} {'tokens/answer':>14}")
        with LocalTriton(prepare_runtime(), repo, log_path=root / "tritonserver.log") as server:
            client = grpcclient.InferenceServerClient(server.grpc_url)
            for name in SERVED:
                model = golden_spec(name).name
                cases = [c for c in golden_cases(name) if c.beam_width == 1]
                prompts = [c.prompt for c in cases]
                latencies(client, model, prompts, args.warmup)
                one = latencies(client, model, prompts[:1], args.requests)
                batch = latencies(client, model, prompts, args.requests)
                tokens = "/".join(str(len(c.answers[0].split())) for c in cases)
                p = np.percentile
                print(
                    f"{model:<14} {p(one, 50):>10.1f} / {p(one, 95):<7.1f} {p(batch, 50):>10.1f} / {p(batch, 95):<7.1f}"
                    f" {tokens:>14}"
                )
        print(f"load average after: {load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
