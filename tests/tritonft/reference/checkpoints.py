"""Seeded random Hugging Face checkpoints for the reference's golden tests, built with numpy alone.

``scripts/make_reference_goldens.py`` (torch + transformers, not run by CI) loads exactly these files into
``transformers`` and records what it generates; CI rebuilds them from the same seed, checks their sha256 against
the golden file and converts them with ``tritonft convert``. Weights are scaled like a trained model's
(``N(0, 1/fan_in)`` matrices, unit-scale embeddings, norm weights near 1) so activations stay O(1) and the
next-token distributions are peaked enough that fp32 rounding cannot flip a greedy choice. The output projections
of each block get a gain of :data:`OUT_GAIN` so the blocks, not the last token's embedding, dominate the residual
stream (otherwise a random model mostly repeats its last token, which would make a weak golden).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tests.tritonft.convert.models import Model, bf16_round, t5_config
from tritonft.spec import Family


@dataclass(frozen=True)
class Variant:
    """One golden checkpoint: which family builder, its options, and how it is stored."""

    name: str
    family: str
    seed: int
    options: tuple[tuple[str, Any], ...] = ()
    stored: str = "fp32"
    shards: int = 1

    def model(self) -> Model:
        return BUILDERS[self.family](self.seed, self.stored, **dict(self.options))

    def save(self, directory: Path) -> Path:
        return self.model().save(directory, stored=self.stored, shards=self.shards)


OUT_GAIN = 3.0


class Weights:
    def __init__(self, seed: int, stored: str) -> None:
        self.rng = np.random.default_rng(seed)
        self.stored = stored

    def _out(self, values: np.ndarray) -> np.ndarray:
        values = values.astype(np.float32)
        return bf16_round(values) if self.stored == "bf16" else values

    def matrix(self, rows: int, cols: int, fan_in: int, gain: float = 1.0) -> np.ndarray:
        scale = np.float32(gain * fan_in**-0.5)
        return self._out(self.rng.standard_normal((rows, cols)).astype(np.float32) * scale)

    def embedding(self, rows: int, cols: int, scale: float = 1.0) -> np.ndarray:
        return self._out(self.rng.standard_normal((rows, cols)).astype(np.float32) * np.float32(scale))

    def norm(self, size: int) -> np.ndarray:
        return self._out(1.0 + 0.1 * self.rng.standard_normal(size).astype(np.float32))

    def bias(self, size: int) -> np.ndarray:
        return self._out(0.1 * self.rng.standard_normal(size).astype(np.float32))


T5_TEST_DIMS = {"d": 64, "heads": 4, "dkv": 16, "ff": 96, "vocab": 96, "buckets": 8, "layers": 2}
T5_SMALL_DIMS = {"d": 512, "heads": 8, "dkv": 64, "ff": 2048, "vocab": 32128, "buckets": 32, "layers": 6}
"""The goldens' size, and t5-small's shapes (for benchmarks)."""


def t5(seed: int, stored: str, gated: bool = False, tied: bool = True, dims: dict[str, int] | None = None) -> Model:
    w = Weights(seed, stored)
    size = dims or T5_TEST_DIMS
    d, heads, dkv, ff, vocab = size["d"], size["heads"], size["dkv"], size["ff"], size["vocab"]
    buckets, enc_layers, dec_layers = size["buckets"], size["layers"], size["layers"]
    inner = heads * dkv
    config = t5_config(
        d=d,
        dkv=dkv,
        ff=ff,
        heads=heads,
        enc_layers=enc_layers,
        dec_layers=dec_layers,
        vocab=vocab,
        buckets=buckets,
        gated=gated,
        tied=tied,
        max_distance=128,
        decoder_start=0,
        dropout=0.0,
    )
    t: dict[str, np.ndarray] = {"shared.weight": w.embedding(vocab, d)}
    if not tied:
        t["lm_head.weight"] = w.matrix(vocab, d, d)
    t["encoder.final_layer_norm.weight"] = w.norm(d)
    t["decoder.final_layer_norm.weight"] = w.norm(d)
    wi = ["wi_0", "wi_1"] if gated else ["wi"]
    for stack, count in (("encoder", enc_layers), ("decoder", dec_layers)):
        for i in range(count):
            p = f"{stack}.block.{i}.layer"
            t[f"{p}.0.layer_norm.weight"] = w.norm(d)
            for x in "qkv":
                t[f"{p}.0.SelfAttention.{x}.weight"] = w.matrix(inner, d, d)
            t[f"{p}.0.SelfAttention.o.weight"] = w.matrix(d, inner, inner, OUT_GAIN)
            if i == 0:
                t[f"{p}.0.SelfAttention.relative_attention_bias.weight"] = w.embedding(buckets, heads)
            ffn = 1
            if stack == "decoder":
                ffn = 2
                t[f"{p}.1.layer_norm.weight"] = w.norm(d)
                for x in "qkv":
                    t[f"{p}.1.EncDecAttention.{x}.weight"] = w.matrix(inner, d, d)
                t[f"{p}.1.EncDecAttention.o.weight"] = w.matrix(d, inner, inner, OUT_GAIN)
            t[f"{p}.{ffn}.layer_norm.weight"] = w.norm(d)
            for name in wi:
                t[f"{p}.{ffn}.DenseReluDense.{name}.weight"] = w.matrix(ff, d, d)
            t[f"{p}.{ffn}.DenseReluDense.wo.weight"] = w.matrix(d, ff, ff, OUT_GAIN)
    extra = {"encoder.embed_tokens.weight": t["shared.weight"], "decoder.embed_tokens.weight": t["shared.weight"]}
    return Model("t5", config, t, extra)


GPT2_TEST_DIMS = {"d": 64, "heads": 4, "layers": 2, "vocab": 100, "positions": 64}
GPT2_DIMS = {"d": 768, "heads": 12, "layers": 12, "vocab": 50257, "positions": 1024}
"""The goldens' size, and gpt2's (124M) shapes (for benchmarks)."""


def gpt2(seed: int, stored: str, dims: dict[str, int] | None = None) -> Model:
    w = Weights(seed, stored)
    size = dims or GPT2_TEST_DIMS
    d, heads, layers, vocab, positions = size["d"], size["heads"], size["layers"], size["vocab"], size["positions"]
    ff = 4 * d
    config = {
        "model_type": "gpt2",
        "architectures": ["GPT2LMHeadModel"],
        "n_embd": d,
        "n_head": heads,
        "n_layer": layers,
        "n_inner": None,
        "n_positions": positions,
        "vocab_size": vocab,
        "bos_token_id": vocab - 2,
        "eos_token_id": vocab - 1,
        "layer_norm_epsilon": 1e-05,
        "activation_function": "gelu_new",
        "resid_pdrop": 0.0,
        "embd_pdrop": 0.0,
        "attn_pdrop": 0.0,
    }
    t = {"transformer.wte.weight": w.embedding(vocab, d, 0.5), "transformer.wpe.weight": w.embedding(positions, d, 0.5)}
    t["transformer.ln_f.weight"], t["transformer.ln_f.bias"] = w.norm(d), w.bias(d)
    for i in range(layers):
        h = f"transformer.h.{i}"
        t[f"{h}.ln_1.weight"], t[f"{h}.ln_1.bias"] = w.norm(d), w.bias(d)
        t[f"{h}.attn.c_attn.weight"], t[f"{h}.attn.c_attn.bias"] = w.matrix(d, 3 * d, d), w.bias(3 * d)
        t[f"{h}.attn.c_proj.weight"], t[f"{h}.attn.c_proj.bias"] = w.matrix(d, d, d, OUT_GAIN), w.bias(d)
        t[f"{h}.ln_2.weight"], t[f"{h}.ln_2.bias"] = w.norm(d), w.bias(d)
        t[f"{h}.mlp.c_fc.weight"], t[f"{h}.mlp.c_fc.bias"] = w.matrix(d, ff, d), w.bias(ff)
        t[f"{h}.mlp.c_proj.weight"], t[f"{h}.mlp.c_proj.bias"] = w.matrix(ff, d, ff, OUT_GAIN), w.bias(d)
    return Model("gpt2", config, t)


def gptj(seed: int, stored: str) -> Model:
    w = Weights(seed, stored)
    d, heads, layers, vocab, rotary = 64, 4, 2, 100, 8
    ff = 4 * d
    config = {
        "model_type": "gptj",
        "architectures": ["GPTJForCausalLM"],
        "n_embd": d,
        "n_head": heads,
        "n_layer": layers,
        "n_inner": None,
        "n_positions": 128,
        "rotary_dim": rotary,
        "vocab_size": vocab,
        "bos_token_id": 98,
        "eos_token_id": 99,
        # FT's GPT-J hard-codes 1e-6 (ft-format.md §4.2); a checkpoint with HF's default 1e-5 differs in FT too.
        "layer_norm_epsilon": 1e-06,
        "activation_function": "gelu_new",
        "tie_word_embeddings": False,
        "resid_pdrop": 0.0,
        "embd_pdrop": 0.0,
        "attn_pdrop": 0.0,
    }
    t = {
        "transformer.wte.weight": w.embedding(vocab, d),
        "lm_head.weight": w.matrix(vocab, d, d),
        "lm_head.bias": w.bias(vocab),
    }
    t["transformer.ln_f.weight"], t["transformer.ln_f.bias"] = w.norm(d), w.bias(d)
    for i in range(layers):
        h = f"transformer.h.{i}"
        t[f"{h}.ln_1.weight"], t[f"{h}.ln_1.bias"] = w.norm(d), w.bias(d)
        for x in ("q", "k", "v", "out"):
            t[f"{h}.attn.{x}_proj.weight"] = w.matrix(d, d, d)
        t[f"{h}.mlp.fc_in.weight"], t[f"{h}.mlp.fc_in.bias"] = w.matrix(ff, d, d), w.bias(ff)
        t[f"{h}.mlp.fc_out.weight"], t[f"{h}.mlp.fc_out.bias"] = w.matrix(d, ff, ff, OUT_GAIN), w.bias(d)
    return Model("gptj", config, t)


BUILDERS: dict[str, Callable[..., Model]] = {"t5": t5, "gpt2": gpt2, "gptj": gptj}

VARIANTS: tuple[Variant, ...] = (
    Variant("t5", "t5", seed=130),
    Variant("t5-gated", "t5", seed=131, options=(("gated", True),)),
    Variant("t5-untied", "t5", seed=132, options=(("tied", False),)),
    Variant("t5-bf16-sharded", "t5", seed=133, options=(("gated", True),), stored="bf16", shards=3),
    Variant("gpt2", "gpt2", seed=134),
    Variant("gpt2-bf16-sharded", "gpt2", seed=135, stored="bf16", shards=2),
    Variant("gptj", "gptj", seed=136),
)
"""Every golden checkpoint (``tests/tritonft/reference/golden/<name>.json``)."""

PROMPTS: dict[str, tuple[tuple[int, ...], ...]] = {
    "t5": ((13, 57, 22, 8, 91, 1), (40, 3, 77, 1), (5, 6, 7, 8, 9, 10, 11, 12, 64, 2, 1)),
    "gpt2": ((12, 44, 87, 3, 61), (7,), (90, 15, 15, 33, 2, 71, 48, 9)),
    "gptj": ((12, 44, 87, 3, 61), (7,), (90, 15, 15, 33, 2, 71, 48, 9)),
}
"""Fixed prompts (token ids; no tokenizer involved), of different lengths."""

MAX_NEW_TOKENS = 12
BEAM_WIDTH = 3
LENGTH_PENALTY = 1.0


def directory_sha256(directory: Path) -> dict[str, str]:
    """sha256 of every file of a checkpoint directory, by name."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.iterdir()) if p.is_file()}


def word_tokenizer(vocab_size: int, family: Family, directory: Path) -> Path:
    """``tokenizer.json``: a word-level tokenizer whose vocabulary holds the judge's prompts' words (then ``w<i>``),
    the model's special ids left to their roles; an unknown word is ``<unk>``."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    from tritonft.probe.judge_reference import reference_prompts

    words: list[str] = []
    for prompt in reference_prompts(family):
        words += [w for w in re.findall(r"\w+|[^\w\s]", prompt) if w not in words]
    special = {0: "<pad>", 1: "</s>", 2: "<unk>"} if family is Family.T5 else {0: "<unk>"}
    if family is not Family.T5:
        special |= {vocab_size - 2: "<bos>", vocab_size - 1: "<eos>"}
    free = iter(i for i in range(vocab_size) if i not in special)
    vocabulary = {**{name: i for i, name in special.items()}}
    for word, index in zip(words, free, strict=False):
        vocabulary[word] = index
    used = set(vocabulary.values())
    vocabulary |= {f"w{i}": i for i in range(vocab_size) if i not in used}
    tokenizer = Tokenizer(models.WordLevel(vocabulary, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    directory.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(directory / "tokenizer.json"))
    return directory
