"""The Triton part of the start-up budget of ``local``'s models on the real ``tritonserver`` (CPU): per run a fresh
server on one repository holding t5-small (FT step stood in for) and the real all-MiniLM-L6-v2 (ONNX Runtime in a
Python-backend model): Triton's own load time per model (from its log), HTTP up, READY and the first answer of
each model, in seconds from spawning the process. Prints the median over ``--runs``.

    .venv/bin/python benchmarks/startup_budget.py --runs 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.system.realtriton.test_startup_budget import first_answers, local_repository  # noqa: E402
from tests.tritonft.encoder.checkpoints import extract_minilm  # noqa: E402
from tests.tritonft.repo.conftest import train_gpt_tokenizer, train_t5_tokenizer  # noqa: E402
from tritonft.cli import main as cli  # noqa: E402
from tritonft.local_triton import prepare_runtime  # noqa: E402
from tritonft.rollout.local_start import LocalStart, measure_start  # noqa: E402
from tritonft.spec import Family  # noqa: E402


def build(tmp: Path) -> Path:
    gpt = train_gpt_tokenizer(tmp / "gpt-tok")
    tokenizers = {Family.T5: train_t5_tokenizer(tmp / "t5-tok"), Family.GPT2: gpt, Family.GPTJ: gpt}
    minilm = extract_minilm(tmp / "hf" / "all-MiniLM-L6-v2")
    onnx = tmp / "onnx"
    assert cli(["convert", "--input", str(minilm), "--output", str(onnx), "--dtype", "fp32"]) == 0
    return local_repository(tmp / "repo", tokenizers, lambda *_: onnx / "onnx", lambda _: minilm)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    runtime = prepare_runtime()
    with tempfile.TemporaryDirectory(prefix="tritonft-startup-") as name:
        tmp = Path(name)
        for d in ("gpt-tok", "t5-tok", "hf", "repo"):
            (tmp / d).mkdir(parents=True, exist_ok=True)
        repo = build(tmp)
        runs: list[LocalStart] = []
        for i in range(args.runs):
            server, start = measure_start(runtime, repo, tmp / f"triton-{i}.log", first_answers)
            server.stop()
            runs.append(start)
    rows: dict[str, list[float]] = {}
    for start in runs:
        for model, seconds in start.load.models.items():
            rows.setdefault(f"load {model}", []).append(seconds)
        rows.setdefault("HTTP up (log)", []).append(start.load.server_up_s or float("nan"))
        rows.setdefault("READY", []).append(start.ready_s)
        rows.setdefault("first answer (both models)", []).append(start.first_answer_s)
    print(f"runs: {len(runs)} (seconds; model loads from Triton's log, the rest from spawning the process)")
    for label, values in sorted(rows.items(), key=lambda kv: statistics.median(kv[1])):
        print(f"{label:40s} median {statistics.median(values):7.2f}  (min {min(values):.2f}, max {max(values):.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
