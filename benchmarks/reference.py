"""Benchmark the CPU reference of FT's model step (``tritonft.reference``): generation speed per family.

For each model (the golden test sizes of ``tests/tritonft/reference/checkpoints.py``, and random weights at t5-small and
gpt2 (124M) shapes), the seeded checkpoint is written, converted with ``tritonft convert`` (fp32, TP 1) and loaded
once; then ``--runs`` rounds each time a greedy generation and a beam search (width 4) of ``--new-tokens`` tokens
from a ``--prompt-tokens``-token prompt (batch 1; the end id is disabled so every run generates all tokens).
Printed per model: load time, and the medians of the greedy and beam tokens/s (beam: tokens of the best beam per
second) with every run.

    .venv/bin/python benchmarks/reference.py [--runs 3] [--new-tokens 32] [--prompt-tokens 16] [--models ...]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.tritonft.convert.models import Model
from tests.tritonft.reference import checkpoints
from tritonft.cli import main as tritonft
from tritonft.reference import GenerationRequest, build_model, generate, load_checkpoint

MODELS: dict[str, Callable[[], Model]] = {
    "t5 (test size)": lambda: checkpoints.t5(130, "fp32"),
    "gpt2 (test size)": lambda: checkpoints.gpt2(134, "fp32"),
    "gptj (test size)": lambda: checkpoints.gptj(136, "fp32"),
    "t5-small shapes": lambda: checkpoints.t5(1, "fp32", dims=checkpoints.T5_SMALL_DIMS),
    "gpt2 (124M) shapes": lambda: checkpoints.gpt2(2, "fp32", dims=checkpoints.GPT2_DIMS),
}


def tokens_per_second(model: object, prompt: list[int], new_tokens: int, beams: int) -> float:
    request = GenerationRequest(prompt, new_tokens, beam_width=beams, len_penalty=1.0, end_id=-1)
    started = time.perf_counter()
    result = generate(model, [request])  # type: ignore[arg-type]
    elapsed = time.perf_counter() - started
    return len(result.generated[0][0]) / elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--prompt-tokens", type=int, default=16)
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated names of: " + ", ".join(MODELS))
    args = parser.parse_args()
    print(f"{'model':<22} {'params':>8} {'load s':>7} {'greedy tok/s':>13} {'beam4 tok/s':>12}  runs (greedy | beam)")
    for name in args.models.split(","):
        hf_model = MODELS[name]()
        params = sum(t.size for t in hf_model.tensors.values())
        with tempfile.TemporaryDirectory(prefix="tritonft-bench-ref-") as tmp:
            hf = hf_model.save(Path(tmp) / "hf")
            del hf_model
            if tritonft(["convert", "--input", str(hf), "--output", str(Path(tmp) / "ft"), "--tp", "1"]) != 0:
                raise SystemExit(f"conversion of {name} failed")
            started = time.perf_counter()
            model = build_model(load_checkpoint(Path(tmp) / "ft" / "1-gpu"))
            load = time.perf_counter() - started
        rng = np.random.default_rng(0)
        prompt = [int(t) for t in rng.integers(2, model.vocab_size - 2, args.prompt_tokens)]
        greedy = [tokens_per_second(model, prompt, args.new_tokens, 1) for _ in range(args.runs)]
        beam = [tokens_per_second(model, prompt, args.new_tokens, 4) for _ in range(args.runs)]
        runs = " ".join(f"{v:.0f}" for v in greedy) + " | " + " ".join(f"{v:.0f}" for v in beam)
        print(
            f"{name:<22} {params / 1e6:>7.1f}M {load:>7.2f} {statistics.median(greedy):>13.1f} "
            f"{statistics.median(beam):>12.1f}  {runs}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
