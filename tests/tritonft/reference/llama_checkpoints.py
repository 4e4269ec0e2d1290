"""Seeded random Llama-family checkpoints for the Llama reference's goldens (:mod:`tritonft.reference.llama`).

The vLLM engine's own tiny Llama and Qwen2 (:mod:`tests.tritonft.engines.vllm.checkpoints`, the models the real
vLLM tests serve) plus two variants that exercise what those two do not:

* ``tiny-llama3``: Llama 3.1's ``rope_scaling`` (``rope_type: llama3``, original length 64 so the head's low
  frequencies are scaled), weights stored as **bf16** in **two safetensors shards** with their index (as the Hub
  ships Llama 3.1 8B);
* ``tiny-qwen2-tied``: Qwen2 with ``tie_word_embeddings`` (no ``lm_head.weight``: the embedding is the output head,
  as Qwen2.5's small models ship).

``scripts/make_llama_reference_goldens.py`` (torch + transformers, the vLLM engine's environment) records what
transformers computes for exactly these directories; ``test_llama.py`` rebuilds them from the same seeds, checks their
hash and compares the reference with the files.

``python -m tests.tritonft.reference.llama_checkpoints OUT`` writes every variant under ``OUT/<name>``.
"""

from __future__ import annotations

import json
import struct
import sys
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from tests.tritonft.engines.vllm import checkpoints as vllm_checkpoints
from tests.tritonft.engines.vllm.checkpoints import VARIANTS, Variant, directory_sha256
from tritonft.probe.judge_reference import REFERENCE_STEPS, reference_prompts
from tritonft.spec import Family

GOLDEN_DIR = Path(__file__).parent / "golden" / "llama"
LLAMA3_ROPE: Mapping[str, Any] = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 64,
}
"""Llama 3.1's rope scaling, with an original length of 64 (Llama 3.1's own is 8192) so that the tiny head's
wavelengths fall in all three bands (kept, interpolated, divided by 8)."""
STEPS = REFERENCE_STEPS[Family.LLAMA]
"""Greedy tokens per prompt in the goldens (what the judge's reference of a Llama follows)."""
PROMPTS = reference_prompts(Family.LLAMA)
"""The judge's prompts of a Llama-family model."""


@dataclass(frozen=True)
class ReferenceVariant:
    """One golden checkpoint: the vLLM tests' variant it is built from, and what it adds."""

    name: str
    base: Variant
    seed: int
    rope_scaling: bool = False
    tied: bool = False
    bf16_shards: bool = False


REFERENCE_VARIANTS = (
    ReferenceVariant("tiny-llama", VARIANTS[0], VARIANTS[0].seed),
    ReferenceVariant("tiny-qwen2", VARIANTS[1], VARIANTS[1].seed),
    ReferenceVariant("tiny-llama3", VARIANTS[0], 35, rope_scaling=True, bf16_shards=True),
    ReferenceVariant("tiny-qwen2-tied", VARIANTS[1], 36, tied=True),
)


def bf16(tensor: np.ndarray) -> np.ndarray:
    """``tensor`` rounded to bf16 (nearest, ties to even) as its 16-bit patterns (finite values: no carry out of 32
    bits), a chunk at a time (a large embedding is not copied whole)."""
    flat = np.ascontiguousarray(tensor, np.float32).reshape(-1).view(np.uint32)
    out = np.empty(flat.shape, np.uint16)
    for start in range(0, flat.size, 1 << 22):
        bits = flat[start : start + (1 << 22)]
        out[start : start + bits.size] = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) >> 16
    return out.reshape(tensor.shape)


def write_bf16_safetensors(tensors: Mapping[str, np.ndarray], path: Path) -> None:
    """A safetensors file of bf16 tensors (numpy has no bf16: the header and bytes written by hand)."""
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    blobs = []
    offset = 0
    for name in sorted(tensors):
        data = bf16(tensors[name]).tobytes()
        header[name] = {
            "dtype": "BF16",
            "shape": list(tensors[name].shape),
            "data_offsets": [offset, offset + len(data)],
        }
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def write(variant: ReferenceVariant, directory: Path) -> Path:
    """Write ``variant``'s checkpoint into ``directory`` (created); the same bytes every time."""
    base = replace(variant.base, seed=variant.seed)
    vllm_checkpoints.write(base, directory)
    vocab = vllm_checkpoints.vocab_size(directory)
    config = json.loads((directory / "config.json").read_text())
    tensors = vllm_checkpoints.weights(base, vocab)
    if variant.tied:
        del tensors["lm_head.weight"]
        config["tie_word_embeddings"] = True
    if variant.rope_scaling:
        config["rope_scaling"] = dict(LLAMA3_ROPE)
    if variant.bf16_shards:
        (directory / "model.safetensors").unlink()
        names = sorted(tensors)
        shards = {"model-00001-of-00002.safetensors": names[::2], "model-00002-of-00002.safetensors": names[1::2]}
        for shard, members in shards.items():
            write_bf16_safetensors({n: tensors[n] for n in members}, directory / shard)
        weight_map = {n: shard for shard, members in shards.items() for n in members}
        index = {"metadata": {"total_size": 2 * sum(t.size for t in tensors.values())}, "weight_map": weight_map}
        (directory / "model.safetensors.index.json").write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")
        config["torch_dtype"] = "bfloat16"
    elif variant.tied:
        from safetensors.numpy import save_file

        save_file(tensors, str(directory / "model.safetensors"), metadata={"format": "pt"})
    (directory / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    return directory


def golden(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((GOLDEN_DIR / f"{name}.json").read_text())
    return data


if __name__ == "__main__":
    out = Path(sys.argv[1])
    for v in REFERENCE_VARIANTS:
        print(write(v, out / v.name), directory_sha256(out / v.name))
