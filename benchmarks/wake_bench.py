"""Wake from zero of ``local``'s models end to end through the gateway, on the real ``tritonserver`` 2.51 (CPU):
per run and model, a fresh gateway with the model asleep (no server), the probe as ``pulumi up`` runs it, and a
server started when the gateway's request counter rises (the scaler stood in for:
``tests/system/realtriton/wake.py``). Prints the median over ``--runs`` of the probe's figures
(:mod:`tritonft.probe.wake`) and the stand-in scaler's (request counted -> server READY).

    .venv/bin/python benchmarks/wake_bench.py --runs 5
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.system.realtriton.wake import (  # noqa: E402
    Scaler,
    gateway_flags,
    gateway_serving,
    model_repository,
    probe_wake,
    scaling,
    stand_in_answers,
    woken_specs,
)
from tests.tritonft.encoder.checkpoints import extract_minilm  # noqa: E402
from tests.tritonft.repo.conftest import train_gpt_tokenizer, train_t5_tokenizer  # noqa: E402
from tritonft.cli import main as cli  # noqa: E402
from tritonft.local_triton import prepare_runtime  # noqa: E402
from tritonft.spec import Family  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    runtime = prepare_runtime()
    specs = woken_specs()
    rows: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="tritonft-wake-") as name:
        tmp = Path(name)
        gpt = train_gpt_tokenizer(tmp / "gpt-tok")
        tokenizers = {Family.T5: train_t5_tokenizer(tmp / "t5-tok"), Family.GPT2: gpt, Family.GPTJ: gpt}
        minilm = extract_minilm(tmp / "hf" / "all-MiniLM-L6-v2")
        onnx = tmp / "onnx"
        assert cli(["convert", "--input", str(minilm), "--output", str(onnx), "--dtype", "fp32"]) == 0
        repos = {
            s.name: model_repository(s, tmp / f"repo-{s.name}", tokenizers, lambda *_: onnx / "onnx", lambda _: minilm)
            for s in specs
        }
        for i in range(args.runs):
            for spec in specs:
                out = tmp / f"run-{i}-{spec.name}"
                (out / "specs").mkdir(parents=True)
                scaler = Scaler("", {spec.name: repos[spec.name]}, runtime, out)
                with (
                    pytest.MonkeyPatch.context() as monkeypatch,
                    gateway_serving(gateway_flags(specs, out / "specs"), scaler.ready, monkeypatch) as url,
                ):
                    scaler.gateway_url = url
                    with scaling(scaler):
                        began = time.monotonic()
                        report = probe_wake(spec, url, scaler, stand_in_answers(spec, tokenizers))
                assert report.ok and not scaler.errors, report.failure_message() or scaler.errors
                wake = report.model(spec.name).wake
                started = scaler.wakes[spec.name]
                assert wake is not None and wake.wake_s is not None and wake.asleep_until_s is not None
                figures = {
                    "first request -> wake signal seen (scaler poll)": started.signal_at - began,
                    "wake signal -> server READY (real tritonserver)": started.ready_at - started.signal_at,
                    "first request -> last model_starting answer": wake.asleep_until_s,
                    "the answered request (first inference)": wake.answer_s or 0.0,
                    "WAKE: first request -> first judged answer": wake.wake_s,
                }
                for label, seconds in figures.items():
                    rows.setdefault(f"{spec.name}: {label}", []).append(seconds)
    print(f"runs: {args.runs} per model (seconds; median, min, max)")
    for label, values in rows.items():
        print(f"{label:68s} {statistics.median(values):7.2f}  ({min(values):.2f}, {max(values):.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
