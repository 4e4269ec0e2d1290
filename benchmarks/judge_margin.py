"""The judge's margin: how far apart the reference's top-1 and top-2 are over the judge's prompts, and how far a
served precision moves the log-probabilities, on real-model-shaped checkpoints.

For each model (seeded random weights at the golden test sizes and at t5-small and gpt2 (124M) shapes, from
``tests/tritonft/reference/checkpoints.py``, with a word-level tokenizer over the judge's prompts), the script runs
the conversion Job's reference step (``tritonft reference``: fp32 conversion, the judge's prompts followed greedily)
for a spec served at fp16, then follows the same greedy paths with the weights rounded to fp16 and to bf16 (what the
served files hold) and records, at every step, the largest change of any log-probability. Printed per model: the
reference step's time and peak RSS, the steps, the top-1/top-2 gap (min, 5th percentile, median), the steps whose
gap is below the fp16 tolerance (near-ties the served model may flip), and the largest log-probability change from
fp16- and bf16-rounded weights (the part of the served precision's error that weights alone cause).

    .venv/bin/python benchmarks/judge_margin.py [--models ...]
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.tritonft.convert.models import Model, bf16_round
from tests.tritonft.reference import checkpoints
from tests.tritonft.repo.conftest import make_spec
from tritonft.cli import main as tritonft
from tritonft.probe.judge_reference import JudgeReference, tolerance_for
from tritonft.reference import layers
from tritonft.reference.judge import load_original
from tritonft.repo.tokenization import load_tokenizer
from tritonft.spec import Family, WeightDType

MODELS: dict[str, tuple[Family, Callable[[], Model]]] = {
    "t5 (test size)": (Family.T5, lambda: checkpoints.t5(130, "fp32")),
    "gpt2 (test size)": (
        Family.GPT2,
        lambda: checkpoints.gpt2(134, "fp32", dims={**checkpoints.GPT2_TEST_DIMS, "positions": 1024}),
    ),
    "gptj (test size)": (Family.GPTJ, lambda: checkpoints.gptj(136, "fp32")),
    "t5-small shapes": (Family.T5, lambda: checkpoints.t5(1, "fp32", dims=checkpoints.T5_SMALL_DIMS)),
    "gpt2 (124M) shapes": (Family.GPT2, lambda: checkpoints.gpt2(2, "fp32", dims=checkpoints.GPT2_DIMS)),
}


def rounded(model: Model, how: str) -> Model:
    cast: Callable[[np.ndarray], np.ndarray] = (
        (lambda t: t.astype(np.float16).astype(np.float32)) if how == "fp16" else bf16_round
    )
    tensors = {k: cast(v) for k, v in model.tensors.items()}
    extra = {
        k: tensors.get("shared.weight", v) if k.endswith("embed_tokens.weight") else cast(v)
        for k, v in model.extra.items()
    }
    return Model(model.family, model.config, tensors, extra)


def greedy_log_probs(model, prompts: list[list[int]], paths: list[list[int]]) -> list[np.ndarray]:  # type: ignore[no-untyped-def]
    """Log-probabilities at each step of the given greedy paths (teacher forcing on the reference's tokens)."""
    out = []
    for ids, path in zip(prompts, paths, strict=True):
        cache, logits = model.start(np.asarray(ids), 1, len(ids) + len(path) + 1, model.start_id)
        rows = []
        for step, token in enumerate(path):
            rows.append(layers.log_softmax(logits[0].astype(np.float32)))
            if step < len(path) - 1:
                logits = model.step(cache, np.array([token]))
        out.append(np.stack(rows) if rows else np.zeros((0, 1)))
    return out


def measure(label: str, family: Family, build: Callable[[], Model], root: Path) -> None:
    model = build()
    hf = model.save(root / "hf")
    checkpoints.word_tokenizer(int(model.config["vocab_size"]), family, hf)
    spec = make_spec(family, weight_dtype=WeightDType.FP16, max_output_len={Family.T5: 64}.get(family, 32))
    (root / "spec.json").write_text(spec.to_json())
    started = time.monotonic()
    assert (
        tritonft(["reference", "--input", str(hf), "--spec", str(root / "spec.json"), "--out", str(root / "ref.json")])
        == 0
    )
    seconds = time.monotonic() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    reference = JudgeReference.from_json((root / "ref.json").read_text())
    tokenizer = load_tokenizer(hf)
    original = load_original(hf, root)
    prompts, paths = [], []
    for p in reference.prompts:
        ids = tokenizer.encode(p.prompt, add_special_tokens=True)
        if family is Family.T5:
            ids.append(original.end_id)
        prompts.append(ids)
        paths.append(tokenizer.encode(p.answer, add_special_tokens=False)[: p.steps] if p.answer else [])
    base = greedy_log_probs(original, prompts, paths)
    gaps = []
    for rows in base:
        for row in rows:
            top2 = np.sort(row)[-2:]
            gaps.append(float(top2[1] - top2[0]))
    changes = {}
    for how in ("fp16", "bf16"):
        rounded_hf = rounded(model, how).save(root / f"hf-{how}")
        (rounded_hf / "tokenizer.json").write_text((hf / "tokenizer.json").read_text())
        other = greedy_log_probs(load_original(rounded_hf, root), prompts, paths)
        changes[how] = max(float(np.max(np.abs(a - b))) for a, b in zip(base, other, strict=True) if a.size)
    tolerance = tolerance_for("fp16")
    gap = np.array(gaps)
    print(
        json.dumps(
            {
                "model": label,
                "reference_step_s": round(seconds, 1),
                "peak_rss_mib": round(peak),
                "steps": len(gaps),
                "gap_min": round(float(gap.min()), 4),
                "gap_p5": round(float(np.percentile(gap, 5)), 4),
                "gap_median": round(float(np.median(gap)), 3),
                "steps_below_fp16_tolerance": int((gap < tolerance).sum()),
                "max_logprob_change_fp16_weights": round(changes["fp16"], 4),
                "max_logprob_change_bf16_weights": round(changes["bf16"], 4),
            }
        ),
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="*", default=list(MODELS), choices=list(MODELS))
    args = parser.parse_args()
    for label in args.models:
        family, build = MODELS[label]
        with tempfile.TemporaryDirectory(prefix="judge-margin-") as root:
            measure(label, family, build, Path(root))


if __name__ == "__main__":
    main()
