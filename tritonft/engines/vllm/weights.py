"""The download Job's check of a vLLM model's weights before its repository is published (headers only, pure).

The tools image that runs the Job has no vLLM (its CPU engine is a 5.9 GB environment of its own, and the GPU engine
needs the GPU), so the Job cannot ask the model for an answer: the integration probe judges the served model's answer
once Triton has loaded it. What the Job can check without an engine, it checks here, on the safetensors headers
(:func:`tritonft.convert.tensors.open_checkpoint`: no tensor data is read):

* every weight file is a whole safetensors file (each tensor's bytes inside the file: a download cut short is named
  before vLLM fails on it at start-up), and a sharded checkpoint's index names exactly the tensors its shards hold;
* the weights are the model the stack was sized with: the token embedding is ``[vocab_size, hidden_size]``, the
  decoder has ``num_layers`` layers, a layer's K projection is ``[num_kv_heads x head_dim, hidden_size]`` (grouped-
  query attention), and the embedding is stored in the ``torch_dtype`` the stack counted the bytes of.

The names are the Llama family's (Llama, Mistral, Qwen2/3, Gemma: ``model.embed_tokens``, ``model.layers.N``,
``self_attn.k_proj``); a check whose tensor a family names otherwise (Phi-3's fused ``qkv_proj``) is not made.
"""

from __future__ import annotations

import re
from pathlib import Path

from tritonft.convert.tensors import open_checkpoint
from tritonft.engines.vllm.rules import Checkpoint
from tritonft.errors import UserError

EMBEDDING = "model.embed_tokens.weight"
K_PROJ = "model.layers.0.self_attn.k_proj.weight"
STORED = {"bfloat16": "BF16", "float16": "F16", "float32": "F32"}
"""``config.json`` ``torch_dtype`` -> the safetensors dtype its weights are stored in."""
_LAYER = re.compile(r"^model\.layers\.(\d+)\.")


def weights_problems(directory: Path, stated: Checkpoint) -> list[str]:
    """Where the weights in ``directory`` are not whole, or not the model ``stated`` describes (empty when they are)."""
    try:
        tensors = open_checkpoint(directory).tensors
    except UserError as exc:
        return [str(exc)]
    problems: list[str] = []
    embedding = tensors.get(EMBEDDING)
    if embedding is None:
        problems.append(f"weights: no {EMBEDDING} (not a Llama-family checkpoint: vLLM would not load it as one)")
    else:
        expected = (stated.vocab_size, stated.hidden_size)
        if embedding.shape != expected:
            problems.append(
                f"weights: {EMBEDDING} is {list(embedding.shape)}, the spec says [vocabSize, dModel] = {list(expected)}"
            )
        stored = STORED.get(stated.torch_dtype)
        if stored is not None and embedding.dtype != stored:
            problems.append(
                f"weights: stored as {embedding.dtype}, the spec says {stated.torch_dtype} ({stored}): the stack "
                "sized the model's bytes with it (vllm.checkpointDtype)"
            )
    layers = {int(m.group(1)) for name in tensors if (m := _LAYER.match(name))}
    if layers != set(range(stated.num_layers)):
        problems.append(
            f"weights: decoder layers {_ranges(layers)}, the spec says {stated.num_layers} (0..{stated.num_layers - 1})"
        )
    k_proj = tensors.get(K_PROJ)
    if k_proj is not None:
        expected = (stated.num_kv_heads * stated.head_dim, stated.hidden_size)
        if k_proj.shape != expected:
            problems.append(
                f"weights: {K_PROJ} is {list(k_proj.shape)}, the spec says [numKvHeads x headDim, dModel] = "
                f"{list(expected)}"
            )
    return problems


def _ranges(layers: set[int]) -> str:
    if not layers:
        return "none"
    ordered = sorted(layers)
    if ordered == list(range(ordered[0], ordered[-1] + 1)):
        return f"{ordered[0]}..{ordered[-1]} ({len(ordered)})"
    return f"{ordered} ({len(ordered)})"
