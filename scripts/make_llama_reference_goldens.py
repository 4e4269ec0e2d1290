"""Write the Llama reference's goldens: what transformers computes for the seeded Llama-family checkpoints.

Needs torch + transformers, which the project's environment does not have; the vLLM engine's environment does
(``scripts/setup/vllm.sh`` builds it; ``python -m tritonft.vllm_env path`` prints where). CI does not run this: it
compares :mod:`tritonft.reference.llama` with the files it wrote (``tests/tritonft/reference/test_llama.py``). The
checkpoints are written by the project's own environment first (the same bytes CI rebuilds; their hash is recorded
and checked):

    .venv/bin/python -m tests.tritonft.reference.llama_checkpoints /tmp/llama-checkpoints
    "$(.venv/bin/python -m tritonft.vllm_env path)/bin/python" scripts/make_llama_reference_goldens.py \\
        /tmp/llama-checkpoints [--out tests/tritonft/reference/golden/llama]

Writes ``<variant>.json`` per checkpoint: for every judged prompt, its token ids (the checkpoint's tokenizer, as
vLLM tokenizes a prompt), the ids of ``STEPS`` greedy new tokens (``generate``, ``do_sample=False``, stopping where
the generation config says), and, teacher-forced over the prompt and those tokens, the logits at the prompt's last
position (the whole row) and the 8 largest logits with their ids at every later position; and the versions.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import torch
import transformers

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.tritonft.engines.vllm.checkpoints import directory_sha256
from tests.tritonft.reference.llama_checkpoints import GOLDEN_DIR, PROMPTS, REFERENCE_VARIANTS, STEPS

TOP = 8


def case(model: Any, tokenizer: Any, prompt: str) -> dict[str, Any]:
    ids = tokenizer(prompt)["input_ids"]
    with torch.no_grad():
        out = model.generate(
            torch.tensor([ids]),
            attention_mask=torch.ones(1, len(ids), dtype=torch.long),
            max_new_tokens=STEPS,
            do_sample=False,
        )
        new = [int(t) for t in out[0, len(ids) :]]
        logits = model(torch.tensor([ids + new])).logits[0].float()
    follow = logits[len(ids) - 1 :]
    values, indices = torch.topk(follow, TOP, dim=-1)
    return {
        "prompt": prompt,
        "prompt_ids": [int(i) for i in ids],
        "output_ids": new,
        "last_prompt_logits": [float(x) for x in follow[0]],
        "top_ids": [[int(i) for i in row] for row in indices],
        "top_logits": [[float(x) for x in row] for row in values],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoints", type=Path, help="the directory the checkpoints module wrote")
    parser.add_argument("--out", type=Path, default=GOLDEN_DIR)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    for variant in REFERENCE_VARIANTS:
        directory = args.checkpoints / variant.name
        tokenizer = transformers.AutoTokenizer.from_pretrained(directory)
        model = transformers.AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32).eval()
        golden = {
            "variant": variant.name,
            "checkpoint_sha256": directory_sha256(directory),
            "steps": STEPS,
            "rope": {k: v for k, v in (model.config.rope_parameters or {}).items()},
            "cases": [case(model, tokenizer, prompt) for prompt in PROMPTS],
            "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
        }
        path = args.out / f"{variant.name}.json"
        path.write_text(json.dumps(golden, indent=1, sort_keys=True) + "\n")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
