"""The judge's margin on the Llama family: the reference's top-1/top-2 gaps over the judge's prompts and chat, how far
weights rounded to fp16 / bf16 move the log-probabilities, and whether the rounded model's greedy answers pass the
rule (with its branches) at the served dtype's tolerance.

For each seeded Llama-family checkpoint of the reference's goldens (``tests/tritonft/reference/llama_checkpoints.py``:
the vLLM tests' tiny Llama and Qwen2 with a chat template, Llama 3.1's rope scaling in bf16 shards, a tied Qwen2),
the script runs the vLLM Job's reference step (``tritonft reference``) for the spec served at bf16 (tolerance 1.5
nats), then, with every weight rounded to fp16 and to bf16 in numpy (what a GPU serving those dtypes holds; its
activations' rounding is not modelled: no GPU ran), follows the same prompts greedily and records:

* the reference's top-1 vs top-2 gap at every step of its greedy paths (min, 5th percentile, median) and how many
  steps are near-ties at the bf16 tolerance;
* the largest change of any log-probability along the reference's paths (teacher forcing on its tokens);
* the rounded model's greedy answers judged by :func:`tritonft.probe.judge_reference.judge_against_reference`: how
  many prompts pass exactly, through a near-tie, through a branch, and how many fail.

    .venv/bin/python benchmarks/judge_llama_margin.py [--variants tiny-llama ...]
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.tritonft.convert.models import bf16_round
from tests.tritonft.reference.llama_checkpoints import REFERENCE_VARIANTS, write
from tritonft.cli import main as tritonft
from tritonft.engines.vllm import local
from tritonft.probe.judge_reference import JudgeReference, ServedAnswer, judge_prompt
from tritonft.reference import layers
from tritonft.reference.judge import follow
from tritonft.reference.llama import Llama, load_llama, prompt_tokenizer, tokenizer_end_ids

ROUNDINGS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "fp16": lambda t: t.astype(np.float16).astype(np.float32),
    "bf16": bf16_round,
}


def rounded(model: Llama, how: str) -> Llama:
    """``model`` with every weight rounded to ``how`` (kept as float32 arrays)."""
    cast = ROUNDINGS[how]
    out = copy.copy(model)
    out.embed = cast(model.embed)
    out.head = out.embed if model.head is model.embed else cast(model.head)
    out.norm = cast(model.norm)
    out.layers = [
        dataclasses.replace(
            layer,
            **{f.name: cast(value) for f in dataclasses.fields(layer) if (value := getattr(layer, f.name)) is not None},
        )
        for layer in model.layers
    ]
    return out


def path_log_probs(model: Llama, ids: list[int], path: list[int]) -> np.ndarray:
    """Log-probabilities ``[len(path), vocab]`` before each token of ``path`` after ``ids`` (one forward)."""
    logits = model.logits([*ids, *path])[len(ids) - 1 : len(ids) - 1 + len(path)]
    return np.stack([layers.log_softmax(row.astype(np.float32)) for row in logits]) if path else np.zeros((0, 1))


def greedy_path(model: Llama, ids: list[int], steps: int, ends: frozenset[int]) -> list[int]:
    cache, logits = model.start(np.asarray(ids), 1, len(ids) + steps)
    out: list[int] = []
    for _ in range(steps):
        token = int(np.argmax(logits[0]))
        if token in ends:
            break
        out.append(token)
        logits = model.step(cache, np.array([token]))
    return out


def measure(name: str, root: Path) -> dict[str, Any]:
    (variant,) = [v for v in REFERENCE_VARIANTS if v.name == name]
    hf = write(variant, root / "hf")
    tiny = local.spec_for(name, hf)
    assert tiny.vllm is not None
    spec = dataclasses.replace(tiny, vllm=dataclasses.replace(tiny.vllm, dtype="bfloat16"))
    (root / "spec.json").write_text(spec.to_json())
    started = time.monotonic()
    code = tritonft(["reference", "--input", str(hf), "--spec", str(root / "spec.json"), "--out", str(root / "r.json")])
    assert code == 0
    seconds = time.monotonic() - started
    reference = JudgeReference.from_json((root / "r.json").read_text())
    model = load_llama(hf)
    tokenizer = prompt_tokenizer(hf, model.config.model_type)
    ends = model.end_ids | tokenizer_end_ids(hf)
    asked = [(p, p.rendered or p.prompt) for p in reference.prompts]
    prompt_ids = [tokenizer.encode(text, add_special_tokens=True) for _, text in asked]
    paths = [greedy_path(model, ids, p.steps, ends) for (p, _), ids in zip(asked, prompt_ids, strict=True)]
    base = [path_log_probs(model, ids, path) for ids, path in zip(prompt_ids, paths, strict=True)]
    gaps = np.array([float(np.diff(np.sort(row)[-2:])[0]) for rows in base for row in rows])
    result: dict[str, Any] = {
        "variant": name,
        "reference_step_s": round(seconds, 1),
        "prompts": len(reference.prompts),
        "chats": len(reference.chats),
        "steps": int(gaps.size),
        "gap_min": round(float(gaps.min()), 4),
        "gap_p5": round(float(np.percentile(gaps, 5)), 4),
        "gap_median": round(float(np.median(gaps)), 3),
        "steps_below_bf16_tolerance": int((gaps < reference.tolerance_nats).sum()),
        "near_ties": sum(len(p.near_ties) for p in reference.prompts),
        "branches": sum(1 for p in reference.prompts for t in p.near_ties if t.branch is not None),
    }
    for how in ROUNDINGS:
        served = rounded(model, how)
        moved = [path_log_probs(served, ids, path) for ids, path in zip(prompt_ids, paths, strict=True)]
        result[f"max_logprob_change_{how}"] = round(
            max(float(np.max(np.abs(a - b))) for a, b in zip(base, moved, strict=True) if a.size), 4
        )
        outcome = {"exact": 0, "near_tie": 0, "branch": 0, "failed": 0}
        for (prompt, _), ids in zip(asked, prompt_ids, strict=True):
            answer = follow(served, tokenizer, "", ids, steps=prompt.steps, tolerance=0, end_ids=ends)
            verdict = judge_prompt(
                prompt,
                ServedAnswer(answer.answer, "stop" if answer.ended else "length", len(ids)),
                reference.template_tokens,
            )
            kind = "failed" if not verdict.ok else "branch" if "branch" in verdict.detail else "near_tie"
            outcome["exact" if verdict.ok and not verdict.through_tie else kind] += 1
        result[f"rule_{how}"] = outcome
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    names = [v.name for v in REFERENCE_VARIANTS]
    parser.add_argument("--variants", nargs="*", default=names, choices=names)
    args = parser.parse_args()
    for name in args.variants:
        with tempfile.TemporaryDirectory(prefix="judge-llama-margin-") as root:
            print(json.dumps(measure(name, Path(root))), flush=True)


if __name__ == "__main__":
    main()
