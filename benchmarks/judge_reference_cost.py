"""The judge's reference step (``tritonft reference``, the reference Job's work) at the catalog models' widths.

The catalog's generators (t5-3b, gpt-j-6b) cannot be downloaded here (11 and 24 GB) nor held (gpt-j-6b at fp32 is
24 GB; this machine has 23). Their reference step is derived from a measurement of the same step on seeded
checkpoints with **their matrix shapes and vocabularies** and fewer layers: a GPT-2 at GPT-J-6B's width (d 4096,
FFN 16384, vocabulary 50400: every matrix of a GPT-J block has a GPT-2 block's shape) and a T5 at t5-3b's (d 1024,
32 heads x 128, FFN 16384, vocabulary 32128). Each run prints, as JSON: the greedy steps taken, the parameters, the
load (fp32 conversion into scratch + reading it back) and reference seconds, the effective FLOP/s of the greedy steps
(2 FLOPs per parameter per step) per wall second and per CPU second (what a core the step had to itself would
do: on a loaded machine the wall figure is the share of a core it got) and the peak RSS per fp32 weight byte.

    .venv/bin/python benchmarks/judge_reference_cost.py [--models gptj-width t5-3b-width] [--layers N]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from tests.tritonft.convert.models import Model
from tests.tritonft.reference import checkpoints
from tests.tritonft.repo.conftest import make_spec
from tritonft.probe.judge_reference import JudgeReference
from tritonft.spec import Family, WeightDType


def gptj_width(layers: int) -> Model:
    dims = {"d": 4096, "heads": 16, "layers": layers, "vocab": 50400, "positions": 2048}
    return checkpoints.gpt2(7, "fp32", dims=dims)


def t5_3b_width(layers: int) -> Model:
    dims = {"d": 1024, "heads": 32, "dkv": 128, "ff": 16384, "vocab": 32128, "buckets": 32, "layers": layers}
    return checkpoints.t5(7, "fp32", dims=dims)


MODELS: dict[str, tuple[Family, Callable[[int], Model]]] = {
    "gptj-width": (Family.GPT2, gptj_width),
    "t5-3b-width": (Family.T5, t5_3b_width),
}


def measure(label: str, layers: int, root: Path) -> dict[str, object]:
    family, build = MODELS[label]
    model = build(layers)
    hf = model.save(root / "hf")
    del model
    parameters = sum(int(p.stat().st_size) for p in hf.glob("*.safetensors")) // 4
    checkpoints.word_tokenizer(int(json.loads((hf / "config.json").read_text())["vocab_size"]), family, hf)
    spec = make_spec(family, weight_dtype=WeightDType.FP16, max_output_len={Family.T5: 64}.get(family, 32))
    (root / "spec.json").write_text(spec.to_json())
    command = [sys.executable, "-m", "tritonft.cli", "reference", "--input", str(hf), "--spec", str(root / "spec.json")]
    command += ["--out", str(root / "ref.json"), "--work", str(root / "work")]
    started = time.monotonic()
    # Its own process; the peak it prints is its image's (VmHWM), not this script's checkpoint building.
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    wall = time.monotonic() - started
    printed = done.stdout
    timing = re.search(r"load ([\d.]+) s, reference ([\d.]+) s \(([\d.]+) CPU-s\), peak RSS (\d+) MiB", printed)
    assert timing, printed
    load_s, reference_s, cpu_s, peak_mib = float(timing[1]), float(timing[2]), float(timing[3]), int(timing[4])
    steps = sum(p.steps for p in JudgeReference.from_json((root / "ref.json").read_text()).prompts)
    return {
        "model": label,
        "layers": layers,
        "parameters": parameters,
        "steps": steps,
        "load_s": load_s,
        "reference_s": reference_s,
        "wall_s": round(wall, 1),
        "reference_cpu_s": cpu_s,
        "gflops": round(steps * 2 * parameters / reference_s / 1e9, 2),
        "gflops_per_cpu_second": round(steps * 2 * parameters / cpu_s / 1e9, 2),
        "load_mb_per_s": round(parameters * 4 / load_s / 1e6, 1),
        "peak_rss_mib": peak_mib,
        "peak_rss_per_fp32_byte": round(peak_mib * 2**20 / (parameters * 4), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="*", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--layers", type=int, default=1)
    args = parser.parse_args()
    for label in args.models:
        with tempfile.TemporaryDirectory(prefix="judge-cost-") as root:
            print(json.dumps(measure(label, args.layers, Path(root))), flush=True)


if __name__ == "__main__":
    main()
