"""Write the golden token ids the reference must reproduce: Hugging Face ``transformers`` itself generating.

Needs torch + transformers, which the project does not depend on; run it in a separate environment (CI does not
run it, it only checks its output):

    uv venv -p 3.11 /tmp/golden-venv && uv pip install -p /tmp/golden-venv/bin/python torch transformers numpy
    /tmp/golden-venv/bin/python scripts/make_reference_goldens.py [--out tests/tritonft/reference/golden]

For every checkpoint of ``tests.tritonft.reference.checkpoints.VARIANTS`` (seeded numpy weights, the same files CI
rebuilds) it saves the checkpoint, loads it with ``from_pretrained`` in fp32, checks every stored tensor arrived
unchanged, and runs greedy and beam-search ``generate`` on the family's fixed prompts, one prompt at a time.
The JSON records the generated ids (the prompt / decoder start token removed, cut after the first end id), the
beam scores, the top-1/top-2 logit margin of every greedy step, and the sha256 of every checkpoint file.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch
import transformers

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.tritonft.reference.checkpoints import (
    BEAM_WIDTH,
    LENGTH_PENALTY,
    MAX_NEW_TOKENS,
    PROMPTS,
    VARIANTS,
    Variant,
    directory_sha256,
)

CLASSES = {
    "t5": transformers.T5ForConditionalGeneration,
    "gpt2": transformers.GPT2LMHeadModel,
    "gptj": transformers.GPTJForCausalLM,
}


def cut(tokens: list[int], eos: int) -> list[int]:
    return tokens[: tokens.index(eos) + 1] if eos in tokens else tokens


def check_loaded(model: Any, variant: Variant) -> None:
    """Every stored tensor is in the model unchanged (no silent re-initialisation or unwanted tying)."""
    state = model.state_dict()
    for name, value in variant.model().tensors.items():
        got = state[name].detach().float().numpy()
        if not np.array_equal(got, value):
            raise SystemExit(f"{variant.name}: {name} differs after from_pretrained")


def generate_cases(
    model: Any, prompt: tuple[int, ...], eos: int, encoder_decoder: bool, margins: list[float]
) -> list[dict[str, Any]]:
    """A greedy and a beam-search case for ``prompt`` with end id ``eos``; appends the greedy margins."""
    ids = torch.tensor([prompt])
    common: dict[str, Any] = {
        "attention_mask": torch.ones_like(ids),
        "max_new_tokens": MAX_NEW_TOKENS,
        "do_sample": False,
        "pad_token_id": 0 if encoder_decoder else eos,
        "eos_token_id": eos,
    }
    skip = 1 if encoder_decoder else len(prompt)
    with torch.no_grad():
        greedy = model.generate(ids, num_beams=1, output_scores=True, return_dict_in_generate=True, **common)
        steps = [torch.topk(scores[0], 2).values for scores in greedy.scores]
        step_margins = [round(float(top2[0] - top2[1]), 6) for top2 in steps]
        margins += step_margins
        tokens = cut(greedy.sequences[0, skip:].tolist(), eos)
        beam = model.generate(
            ids,
            num_beams=BEAM_WIDTH,
            num_return_sequences=BEAM_WIDTH,
            length_penalty=LENGTH_PENALTY,
            early_stopping=False,
            output_scores=True,
            return_dict_in_generate=True,
            **common,
        )
    base = {"prompt": list(prompt), "end_id": eos}
    return [
        {**base, "mode": "greedy", "outputs": [tokens], "margins": step_margins},
        {
            **base,
            "mode": "beam",
            "beam_width": BEAM_WIDTH,
            "len_penalty": LENGTH_PENALTY,
            "outputs": [cut(row[skip:].tolist(), eos) for row in beam.sequences],
            "scores": [float(s) for s in beam.sequences_scores],
        },
    ]


def run(variant: Variant, directory: Path) -> dict[str, Any]:
    model = CLASSES[variant.family].from_pretrained(directory, dtype=torch.float32).eval()
    check_loaded(model, variant)
    eos = int(model.config.eos_token_id)
    encoder_decoder = variant.family == "t5"
    cases = []
    margins: list[float] = []
    for prompt in PROMPTS[variant.family]:
        greedy_case = generate_cases(model, prompt, eos, encoder_decoder, margins)
        cases += greedy_case
        # The same prompt with an end id the model does generate (its third greedy token), so that finishing a
        # sequence early, in greedy and beam search, is part of the golden truth too.
        cases += generate_cases(model, prompt, greedy_case[0]["outputs"][0][2], encoder_decoder, [])
    return {
        "name": variant.name,
        "family": variant.family,
        "seed": variant.seed,
        "stored": variant.stored,
        "shards": variant.shards,
        "max_new_tokens": MAX_NEW_TOKENS,
        "end_id": eos,
        "sha256": directory_sha256(directory),
        "min_greedy_logit_margin": min(margins),
        "generated_by": {"transformers": transformers.__version__, "torch": torch.__version__},
        "cases": cases,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).resolve().parents[1] / "tests/tritonft/reference/golden"
    )
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    for variant in VARIANTS:
        with tempfile.TemporaryDirectory() as tmp:
            directory = variant.save(Path(tmp) / variant.name)
            golden = run(variant, directory)
        path = args.out / f"{variant.name}.json"
        path.write_text(json.dumps(golden, indent=1) + "\n")
        print(f"{path}: {len(golden['cases'])} cases, min greedy margin {golden['min_greedy_logit_margin']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
