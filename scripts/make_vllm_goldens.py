"""Write the vLLM engine's goldens: what transformers' greedy ``generate`` answers for the seeded random checkpoints.

Needs torch + transformers, which the project does not depend on; run it in a separate environment (CI does not
run it: it asks the real Triton + the real vLLM engine the same prompts and compares with these files). The
checkpoints are written by the project's own environment first (the same bytes CI rebuilds; their hash is
recorded and checked):

    .venv/bin/python -m tests.tritonft.engines.vllm.checkpoints /tmp/vllm-checkpoints
    uv venv -p 3.12 /tmp/vllm-goldens && uv pip install -p /tmp/vllm-goldens/bin/python \\
        torch==2.13.0 transformers==5.19.0 numpy safetensors tokenizers jinja2
    /tmp/vllm-goldens/bin/python scripts/make_vllm_goldens.py /tmp/vllm-checkpoints \\
        [--out tests/tritonft/engines/vllm/golden]

Writes ``<variant>.json`` per checkpoint: for every prompt of ``PROMPTS`` its token ids (the checkpoint's
tokenizer, ``<s>`` prepended) and the ids and text of ``MAX_TOKENS`` greedy new tokens (``do_sample=False``, stopping
at ``</s>`` as the generation config says); for every conversation of ``CHATS`` the text
``apply_chat_template(add_generation_prompt=True)`` renders, its ids and the greedy answer; and the versions.
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

from tests.tritonft.engines.vllm.checkpoints import (
    CHATS,
    GOLDEN_DIR,
    MAX_TOKENS,
    PROMPTS,
    VARIANTS,
    directory_sha256,
)


def greedy(model: Any, tokenizer: Any, ids: list[int]) -> dict[str, Any]:
    with torch.no_grad():
        out = model.generate(
            torch.tensor([ids]),
            attention_mask=torch.ones(1, len(ids), dtype=torch.long),
            max_new_tokens=MAX_TOKENS,
            do_sample=False,
        )
    new = [int(t) for t in out[0, len(ids) :]]
    return {"output_ids": new, "output_text": tokenizer.decode(new, skip_special_tokens=True)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoints", type=Path, help="the directory the checkpoints module wrote")
    parser.add_argument("--out", type=Path, default=GOLDEN_DIR)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    for variant in VARIANTS:
        directory = args.checkpoints / variant.name
        tokenizer = transformers.AutoTokenizer.from_pretrained(directory)
        model = transformers.AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32).eval()
        prompts = []
        for prompt in PROMPTS:
            ids = tokenizer(prompt)["input_ids"]
            prompts.append({"prompt": prompt, "prompt_ids": ids, **greedy(model, tokenizer, ids)})
        chats = []
        for messages in CHATS:
            text = tokenizer.apply_chat_template(list(messages), add_generation_prompt=True, tokenize=False)
            ids = tokenizer(text, add_special_tokens=False)["input_ids"]
            chats.append({"messages": list(messages), "text": text, "prompt_ids": ids, **greedy(model, tokenizer, ids)})
        golden = {
            "variant": variant.name,
            "checkpoint_sha256": directory_sha256(directory),
            "max_tokens": MAX_TOKENS,
            "prompts": prompts,
            "chats": chats,
            "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
        }
        path = args.out / f"{variant.name}.json"
        path.write_text(json.dumps(golden, indent=1, ensure_ascii=False) + "\n")
        print(f"{path}: {[p['output_ids'][:4] for p in prompts]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
