"""Seeded random Llama-architecture checkpoints for the vLLM engine's tests and goldens.

Each is a complete Hugging Face directory — ``config.json``, ``generation_config.json``, ``model.safetensors``
(numpy, no torch), ``tokenizer.json`` (a byte-level BPE trained here on :data:`CORPUS`, ``<s>`` prepended) and
``tokenizer_config.json`` with a chat template — small enough for vLLM's CPU engine (head size 32: CPU attention
needs at least 32) and with grouped-query attention (4 query heads share 2 KV heads) and rotary positions.

``scripts/make_vllm_goldens.py`` (torch + transformers, run in a separate environment) records what transformers'
greedy ``generate`` answers for exactly these directories; the tests rebuild them from the same seeds, check their
sha256 against the golden file, and ask the real Triton + the real vLLM engine the same prompts.

``python -m tests.tritonft.engines.vllm.checkpoints OUT`` writes every variant under ``OUT/<name>``.
"""

from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

GOLDEN_DIR = Path(__file__).parent / "golden"

CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "Hello world, hello triton, hello vllm!",
    "Once upon a time there was a little lamb whose fleece was white as snow.",
    "Serving large language models on Kubernetes with Triton Inference Server.",
    "user: what is the capital of France? assistant: Paris is the capital of France.",
    "Numbers 0 1 2 3 4 5 6 7 8 9 and punctuation , . ; : ! ? ( ) [ ] { }",
] * 20

BOS, EOS = "<s>", "</s>"
SPECIAL = (BOS, EOS, "<unk>")
"""Ids 0, 1, 2."""

CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{% if message['content'] is string %}{% set text = message['content'] %}"
    "{% else %}{% set text = message['content'] | selectattr('type', 'equalto', 'text') | map(attribute='text') "
    "| join('') %}{% endif %}"
    "{{ message['role'] }}: {{ text }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)
"""A plain chat template (content as a string or as OpenAI content parts); ``<s>`` once, at the start."""

PROMPTS = (
    "The quick brown fox",
    "Hello world, hello",
    "Serving large language models on",
)
"""The prompts the goldens answer greedily."""

CHATS: tuple[tuple[dict[str, Any], ...], ...] = (
    ({"role": "user", "content": "what is the capital of France?"},),
    (
        {"role": "system", "content": "You answer briefly."},
        {"role": "user", "content": [{"type": "text", "text": "Hello "}, {"type": "text", "text": "triton"}]},
    ),
)
"""The conversations the goldens answer greedily after ``apply_chat_template(add_generation_prompt=True)``."""

CHAT_COUNT = len(CHATS)

MAX_TOKENS = 16


@dataclass(frozen=True)
class Variant:
    """One random checkpoint: its Hugging Face architecture and sizes."""

    name: str
    architectures: str
    model_type: str
    seed: int
    hidden: int = 128
    layers: int = 2
    heads: int = 4
    kv_heads: int = 2
    intermediate: int = 256
    max_positions: int = 512
    rope_theta: float = 10000.0
    qkv_bias: bool = False

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


VARIANTS = (
    Variant("tiny-llama", "LlamaForCausalLM", "llama", seed=33),
    Variant("tiny-qwen2", "Qwen2ForCausalLM", "qwen2", seed=34, qkv_bias=True, rope_theta=1000000.0),
)


def train_tokenizer(directory: Path) -> None:
    """``tokenizer.json``: byte-level BPE, 512 tokens, ``<s>`` prepended to every sequence."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.BPE(unk_token=None))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=512, special_tokens=list(SPECIAL), initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tokenizer.train_from_iterator(CORPUS, trainer=trainer)
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A $B", special_tokens=[(BOS, 0)]
    )
    tokenizer.save(str(directory / "tokenizer.json"))


def vocab_size(directory: Path) -> int:
    return len(json.loads((directory / "tokenizer.json").read_text())["model"]["vocab"])


def weights(variant: Variant, vocab: int) -> dict[str, np.ndarray]:
    """Every tensor, fp32, seeded: layers at std 0.08, the output head at 0.3 (greedy choices well separated)."""
    rng = np.random.default_rng(variant.seed)
    h, d, i = variant.hidden, variant.head_dim, variant.intermediate

    def normal(shape: tuple[int, ...], std: float) -> np.ndarray:
        return (rng.standard_normal(shape) * std).astype(np.float32)

    def norm() -> np.ndarray:
        return (1.0 + rng.standard_normal(h) * 0.1).astype(np.float32)

    tensors: dict[str, np.ndarray] = {"model.embed_tokens.weight": normal((vocab, h), 1.0)}
    for layer in range(variant.layers):
        p = f"model.layers.{layer}."
        tensors[p + "input_layernorm.weight"] = norm()
        tensors[p + "self_attn.q_proj.weight"] = normal((variant.heads * d, h), 0.08)
        tensors[p + "self_attn.k_proj.weight"] = normal((variant.kv_heads * d, h), 0.08)
        tensors[p + "self_attn.v_proj.weight"] = normal((variant.kv_heads * d, h), 0.08)
        if variant.qkv_bias:
            tensors[p + "self_attn.q_proj.bias"] = normal((variant.heads * d,), 0.05)
            tensors[p + "self_attn.k_proj.bias"] = normal((variant.kv_heads * d,), 0.05)
            tensors[p + "self_attn.v_proj.bias"] = normal((variant.kv_heads * d,), 0.05)
        tensors[p + "self_attn.o_proj.weight"] = normal((h, variant.heads * d), 0.08)
        tensors[p + "post_attention_layernorm.weight"] = norm()
        tensors[p + "mlp.gate_proj.weight"] = normal((i, h), 0.08)
        tensors[p + "mlp.up_proj.weight"] = normal((i, h), 0.08)
        tensors[p + "mlp.down_proj.weight"] = normal((h, i), 0.08)
    tensors["model.norm.weight"] = norm()
    tensors["lm_head.weight"] = normal((vocab, h), 0.3)
    return tensors


def config(variant: Variant, vocab: int) -> dict[str, Any]:
    return {
        "architectures": [variant.architectures],
        "model_type": variant.model_type,
        "hidden_size": variant.hidden,
        "intermediate_size": variant.intermediate,
        "num_hidden_layers": variant.layers,
        "num_attention_heads": variant.heads,
        "num_key_value_heads": variant.kv_heads,
        "head_dim": variant.head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": variant.max_positions,
        "rms_norm_eps": 1e-5,
        "rope_theta": variant.rope_theta,
        "tie_word_embeddings": False,
        "vocab_size": vocab,
        "bos_token_id": 0,
        "eos_token_id": 1,
        "torch_dtype": "float32",
        **({"attention_bias": False} if variant.model_type == "llama" else {}),
        **({"use_sliding_window": False, "sliding_window": None} if variant.model_type == "qwen2" else {}),
    }


def write(variant: Variant, directory: Path) -> Path:
    """Write ``variant``'s checkpoint into ``directory`` (created); the same bytes every time."""
    from safetensors.numpy import save_file

    directory.mkdir(parents=True, exist_ok=True)
    train_tokenizer(directory)
    vocab = vocab_size(directory)
    save_file(weights(variant, vocab), str(directory / "model.safetensors"), metadata={"format": "pt"})
    (directory / "config.json").write_text(json.dumps(config(variant, vocab), indent=2, sort_keys=True) + "\n")
    (directory / "generation_config.json").write_text(
        json.dumps({"bos_token_id": 0, "eos_token_id": 1}, indent=2, sort_keys=True) + "\n"
    )
    tokenizer_config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": BOS,
        "eos_token": EOS,
        "unk_token": "<unk>",
        "model_max_length": variant.max_positions,
        "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
    }
    (directory / "tokenizer_config.json").write_text(json.dumps(tokenizer_config, indent=2, sort_keys=True) + "\n")
    return directory


def directory_sha256(directory: Path) -> str:
    """One hash over every file's name and bytes (what the goldens were made from)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in directory.iterdir() if p.is_file()):
        digest.update(path.name.encode() + b"\x00" + hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def variant(name: str) -> Variant:
    return next(v for v in VARIANTS if v.name == name)


def golden(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((GOLDEN_DIR / f"{name}.json").read_text())
    return data


if __name__ == "__main__":
    out = Path(sys.argv[1])
    for v in VARIANTS:
        print(write(v, out / v.name), directory_sha256(out / v.name))
