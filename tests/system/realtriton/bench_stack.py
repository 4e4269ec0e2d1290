"""What ``tritonft bench`` is measured on against the real servers (its system tests and
``benchmarks/standard_bench.py``): one FasterTransformer-path generator run by the reference engine, the real
all-MiniLM-L6-v2 encoder, and the gateway in front of both.

The generator is the golden GPT-2 checkpoint (``tests/tritonft/reference``), converted at TP 2 and rendered with
``tritonft repo --engine reference`` in streaming (decoupled) mode, so a chat stream sends a chunk per generated
token. Its tokenizer is the golden word tokenizer (id ``i`` is the word ``w<i>``) except that an unknown word is
``w0`` instead of an error: the chat template's words ("user:", "assistant:") reach the model as ``w0``.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from tests.system.realtriton.golden import golden_spec, render_reference
from tritonft.spec import ModelSpec

GENERATOR = "ref-gpt2"
"""The reference-engine GPT-2 (streaming) as served."""
EMBEDDER = "minilm"
"""all-MiniLM-L6-v2 as served."""
PROMPT_WORDS = 6
"""Words per prompt: the golden spec's max_input_len is 16, and the chat template adds four."""


def write_tolerant_word_tokenizer(vocab_size: int, directory: Path) -> Path:
    """``tokenizer.json``: words ``w0 .. w<vocab-1>``, an unknown word read as ``w0``."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    tokenizer = Tokenizer(models.WordLevel({f"w{i}": i for i in range(vocab_size)}, unk_token="w0"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    directory.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(directory / "tokenizer.json"))
    return directory


def generator_spec() -> ModelSpec:
    return replace(golden_spec("gpt2"), name=GENERATOR, decoupled=True)


def render_generator(converted_dir: Path, out: Path, scratch: Path) -> ModelSpec:
    """The reference-engine GPT-2 of ``converted_dir`` (its ``2-gpu`` directory) rendered into ``out``."""
    return render_reference(generator_spec(), converted_dir, out, scratch, write_tolerant_word_tokenizer)


def write_prompts(path: Path, count: int = 8) -> Path:
    """AIPerf's ``single_turn`` prompts: ``count`` lines of :data:`PROMPT_WORDS` in-vocabulary words."""
    lines = [
        json.dumps({"text": " ".join(f"w{(i * 7 + j) % 90 + 5}" for j in range(PROMPT_WORDS))}) for i in range(count)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path
