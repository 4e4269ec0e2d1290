"""Small random HF checkpoints and the FT files the spec (ft-format.md §2-§4) says they convert to.

The expected bytes are derived here with plain numpy straight from the spec's tables and flat-index formulas,
independently of ``tritonft.convert`` (nothing from the package is imported).
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

TAGS = {"fp32": "F32", "bf16": "BF16", "fp16": "F16"}


def bf16_round(values: np.ndarray) -> np.ndarray:
    """fp32 values that are exactly representable in bf16 (top 16 bits kept)."""
    bits = values.astype(np.float32).view(np.uint32) & np.uint32(0xFFFF0000)
    return bits.view(np.float32)


def write_safetensors(path: Path, tensors: dict[str, np.ndarray], stored: str) -> None:
    """A safetensors file written by hand from the format description (header length, JSON header, raw data)."""
    header: dict[str, Any] = {}
    blobs: list[bytes] = []
    offset = 0
    for name, original in tensors.items():
        value = np.ascontiguousarray(original, dtype=np.float32)
        if stored == "bf16":
            raw = (value.view(np.uint32) >> 16).astype("<u2").tobytes()
        elif stored == "fp16":
            raw = value.astype("<f2").tobytes()
        else:
            raw = value.astype("<f4").tobytes()
        header[name] = {"dtype": TAGS[stored], "shape": list(value.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


@dataclass
class Model:
    family: str
    config: dict[str, Any]
    tensors: dict[str, np.ndarray]
    """Logical fp32 values of every stored tensor (bf16-exact when stored as bf16)."""
    extra: dict[str, np.ndarray] = field(default_factory=dict)
    """Stored tensors the converter must ignore (buffers, tied duplicates)."""

    def save(self, directory: Path, stored: str = "fp32", shards: int = 1) -> Path:
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "config.json").write_text(json.dumps(self.config, indent=2))
        everything = {**self.tensors, **self.extra}
        if shards == 1:
            write_safetensors(directory / "model.safetensors", everything, stored)
            return directory
        names = list(everything)
        weight_map = {}
        for s in range(shards):
            file = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
            part = names[s::shards]
            write_safetensors(directory / file, {n: everything[n] for n in part}, stored)
            weight_map.update(dict.fromkeys(part, file))
        (directory / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
        return directory


def _rand(rng: np.random.Generator, *shape: int, stored: str) -> np.ndarray:
    values = rng.standard_normal(shape).astype(np.float32)
    return bf16_round(values) if stored == "bf16" else values


def t5_config(
    *,
    d: int,
    dkv: int,
    ff: int,
    heads: int,
    enc_layers: int,
    dec_layers: int,
    vocab: int,
    buckets: int,
    gated: bool,
    tied: bool,
    max_distance: int | None = None,
    decoder_start: int | None = None,
    dropout: float | None = None,
) -> dict[str, Any]:
    """A T5 ``config.json`` of these shapes; the optional keys are written only when given (key order is part of the
    golden checkpoints' bytes)."""
    config: dict[str, Any] = {
        "model_type": "t5",
        "architectures": ["T5ForConditionalGeneration"],
        "d_model": d,
        "d_kv": dkv,
        "d_ff": ff,
        "num_heads": heads,
        "num_layers": enc_layers,
        "num_decoder_layers": dec_layers,
        "vocab_size": vocab,
        "relative_attention_num_buckets": buckets,
    }
    if max_distance is not None:
        config["relative_attention_max_distance"] = max_distance
    config |= {
        "feed_forward_proj": "gated-gelu" if gated else "relu",
        "tie_word_embeddings": tied,
        "pad_token_id": 0,
        "eos_token_id": 1,
    }
    if decoder_start is not None:
        config["decoder_start_token_id"] = decoder_start
    config["layer_norm_epsilon"] = 1e-06
    if dropout is not None:
        config["dropout_rate"] = dropout
    return config


def t5_model(
    stored: str = "fp32", gated: bool = False, tied: bool = True, lm_head: bool = False, seed: int = 0
) -> Model:
    rng = np.random.default_rng(seed)
    d, heads, dkv, ff, vocab, buckets = 64, 4, 16, 96, 120, 8
    enc_layers, dec_layers = 2, 3
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
    )

    def r(*shape: int) -> np.ndarray:
        return _rand(rng, *shape, stored=stored)

    t: dict[str, np.ndarray] = {"shared.weight": r(vocab, d)}
    if lm_head or not tied:
        t["lm_head.weight"] = r(vocab, d)
    t["encoder.final_layer_norm.weight"] = r(d)
    t["decoder.final_layer_norm.weight"] = r(d)
    wi = ["wi_0", "wi_1"] if gated else ["wi"]
    for i in range(enc_layers):
        p = f"encoder.block.{i}.layer"
        t[f"{p}.0.layer_norm.weight"] = r(d)
        for x in "qkv":
            t[f"{p}.0.SelfAttention.{x}.weight"] = r(inner, d)
        t[f"{p}.0.SelfAttention.o.weight"] = r(d, inner)
        if i == 0:
            t[f"{p}.0.SelfAttention.relative_attention_bias.weight"] = r(buckets, heads)
        t[f"{p}.1.layer_norm.weight"] = r(d)
        for w in wi:
            t[f"{p}.1.DenseReluDense.{w}.weight"] = r(ff, d)
        t[f"{p}.1.DenseReluDense.wo.weight"] = r(d, ff)
    for i in range(dec_layers):
        p = f"decoder.block.{i}.layer"
        t[f"{p}.0.layer_norm.weight"] = r(d)
        for x in "qkv":
            t[f"{p}.0.SelfAttention.{x}.weight"] = r(inner, d)
        t[f"{p}.0.SelfAttention.o.weight"] = r(d, inner)
        if i == 0:
            t[f"{p}.0.SelfAttention.relative_attention_bias.weight"] = r(buckets, heads)
        t[f"{p}.1.layer_norm.weight"] = r(d)
        for x in "qkv":
            t[f"{p}.1.EncDecAttention.{x}.weight"] = r(inner, d)
        t[f"{p}.1.EncDecAttention.o.weight"] = r(d, inner)
        t[f"{p}.2.layer_norm.weight"] = r(d)
        for w in wi:
            t[f"{p}.2.DenseReluDense.{w}.weight"] = r(ff, d)
        t[f"{p}.2.DenseReluDense.wo.weight"] = r(d, ff)
    extra = {"encoder.embed_tokens.weight": t["shared.weight"], "decoder.embed_tokens.weight": t["shared.weight"]}
    return Model("t5", config, t, extra)


def gpt2_model(stored: str = "fp32", prefix: str = "transformer.", seed: int = 1, n_inner: int | None = 192) -> Model:
    rng = np.random.default_rng(seed)
    d, heads, layers, vocab, positions = 64, 4, 2, 110, 32
    ff = n_inner or 4 * d
    config = {
        "model_type": "gpt2",
        "n_embd": d,
        "n_head": heads,
        "n_layer": layers,
        "n_inner": n_inner,
        "n_positions": positions,
        "vocab_size": vocab,
        "bos_token_id": 5,
        "eos_token_id": 7,
        "layer_norm_epsilon": 1e-05,
        "activation_function": "gelu_new",
    }

    def r(*shape: int) -> np.ndarray:
        return _rand(rng, *shape, stored=stored)

    t = {f"{prefix}wte.weight": r(vocab, d), f"{prefix}wpe.weight": r(positions, d)}
    t[f"{prefix}ln_f.weight"], t[f"{prefix}ln_f.bias"] = r(d), r(d)
    extra = {}
    for i in range(layers):
        h = f"{prefix}h.{i}"
        t[f"{h}.ln_1.weight"], t[f"{h}.ln_1.bias"] = r(d), r(d)
        t[f"{h}.attn.c_attn.weight"], t[f"{h}.attn.c_attn.bias"] = r(d, 3 * d), r(3 * d)
        t[f"{h}.attn.c_proj.weight"], t[f"{h}.attn.c_proj.bias"] = r(d, d), r(d)
        t[f"{h}.ln_2.weight"], t[f"{h}.ln_2.bias"] = r(d), r(d)
        t[f"{h}.mlp.c_fc.weight"], t[f"{h}.mlp.c_fc.bias"] = r(d, ff), r(ff)
        t[f"{h}.mlp.c_proj.weight"], t[f"{h}.mlp.c_proj.bias"] = r(ff, d), r(d)
        extra[f"{h}.attn.bias"] = np.tril(np.ones((1, 1, positions, positions), dtype=np.float32))
        extra[f"{h}.attn.masked_bias"] = np.array(-1e4, dtype=np.float32)
    return Model("gpt2", config, t, extra)


def gptj_model(stored: str = "fp32", seed: int = 2, rotary_dim: int | None = 8) -> Model:
    rng = np.random.default_rng(seed)
    d, heads, layers, vocab = 64, 4, 2, 130
    ff = 4 * d
    config = {
        "model_type": "gptj",
        "n_embd": d,
        "n_head": heads,
        "n_layer": layers,
        "n_inner": None,
        "n_positions": 64,
        "rotary_dim": rotary_dim,
        "vocab_size": vocab,
        "bos_token_id": 3,
        "eos_token_id": 4,
        "activation_function": "gelu_new",
        "tie_word_embeddings": False,
    }

    def r(*shape: int) -> np.ndarray:
        return _rand(rng, *shape, stored=stored)

    t = {"transformer.wte.weight": r(vocab, d), "lm_head.weight": r(vocab, d), "lm_head.bias": r(vocab)}
    t["transformer.ln_f.weight"], t["transformer.ln_f.bias"] = r(d), r(d)
    for i in range(layers):
        h = f"transformer.h.{i}"
        t[f"{h}.ln_1.weight"], t[f"{h}.ln_1.bias"] = r(d), r(d)
        for x in ("q", "k", "v", "out"):
            t[f"{h}.attn.{x}_proj.weight"] = r(d, d)
        t[f"{h}.mlp.fc_in.weight"], t[f"{h}.mlp.fc_in.bias"] = r(ff, d), r(ff)
        t[f"{h}.mlp.fc_out.weight"], t[f"{h}.mlp.fc_out.bias"] = r(d, ff), r(d)
    return Model("gptj", config, t)


# ------------------------------------------------------------------------------------------ expected FT output


def _cols(m: np.ndarray, n: int) -> list[np.ndarray]:
    """Spec §1.3 'split columns': file r holds M[:, r*C/N:(r+1)*C/N]."""
    c = m.shape[-1] // n
    return [m[..., r * c : (r + 1) * c] for r in range(n)]


def _rows(m: np.ndarray, n: int) -> list[np.ndarray]:
    """Spec §1.3 'split rows': file r holds M[r*R/N:(r+1)*R/N, :]."""
    rows = m.shape[0] // n
    return [m[r * rows : (r + 1) * rows] for r in range(n)]


def _fused_qkv(w: list[np.ndarray], n: int, transposed_source: bool) -> list[np.ndarray]:
    """Spec flat-index formula: element (a, p, c) at (a*3+p)*(I/N)+c equals W_p[r*I/N+c, a] (HF [I,d] sources,
    T5/GPT-J) or c_attn[a, p*d + r*d/N + c] (GPT-2, passed as three [d, d] column blocks)."""
    d = w[0].shape[1] if transposed_source else w[0].shape[0]
    width = (w[0].shape[0] if transposed_source else w[0].shape[1]) // n
    out = []
    a, p, c = np.meshgrid(np.arange(d), np.arange(3), np.arange(width), indexing="ij")
    for r in range(n):
        flat = np.empty(d * 3 * width, dtype=np.float32)
        for part in range(3):
            sel = p == part
            src = w[part][r * width + c[sel], a[sel]] if transposed_source else w[part][a[sel], r * width + c[sel]]
            flat[((a[sel] * 3 + part) * width + c[sel])] = src
        out.append(flat)
    return out


def expected_files(model: Model, tp: int) -> dict[str, np.ndarray]:
    """File name -> fp32 content (any shape; only the C-order element sequence matters)."""
    t, n = model.tensors, tp
    files: dict[str, np.ndarray] = {}

    def split(name: str, parts: list[np.ndarray]) -> None:
        for r, part in enumerate(parts):
            files[f"{name}.{r}.bin"] = part

    if model.family == "t5":
        files["shared.weight_T.bin"] = t["shared.weight"]
        files["shared.weight.bin"] = t["shared.weight"].T
        files["lm_head.weight.bin"] = t.get("lm_head.weight", t["shared.weight"])
        for s in ("encoder", "decoder"):
            files[f"{s}.final_layer_norm.weight.bin"] = t[f"{s}.final_layer_norm.weight"]
        gated = "encoder.block.0.layer.1.DenseReluDense.wi_0.weight" in t
        for name, value in t.items():
            if not name.startswith(("encoder.block", "decoder.block")):
                continue
            base = name.removesuffix(".weight")
            if name.endswith("layer_norm.weight"):
                files[f"{name}.bin"] = value
            elif "relative_attention_bias" in name:
                split(name, _rows(value.T, n))
            elif name.startswith("decoder") and ".0.SelfAttention." in name and base[-1] in "qkv":
                if base.endswith("q"):
                    qkv = [t[f"{base[:-1]}{x}.weight"] for x in "qkv"]
                    for r, flat in enumerate(_fused_qkv(qkv, n, transposed_source=True)):
                        files[f"{base[:-1]}qkv.weight.{r}.bin"] = flat
            elif base.endswith((".o", ".wo")):
                split(name, _rows(value.T, n))
            elif gated and base.endswith(("wi_0", "wi_1")):
                ft_name = base.replace("wi_0", "wi").replace("wi_1", "wi2") + ".weight"
                split(ft_name, _cols(value.T, n))
            else:  # q, k, v (encoder self / decoder cross) and wi
                split(name, _cols(value.T, n))
        return files

    if model.family == "gpt2":
        pre = "transformer." if "transformer.wte.weight" in t else ""
        d = t[f"{pre}wte.weight"].shape[1]
        files["model.wte.bin"] = t[f"{pre}wte.weight"]
        files["model.wpe.bin"] = t[f"{pre}wpe.weight"]
        files["model.final_layernorm.weight.bin"] = t[f"{pre}ln_f.weight"]
        files["model.final_layernorm.bias.bin"] = t[f"{pre}ln_f.bias"]
        for i in range(model.config["n_layer"]):
            h, m = f"{pre}h.{i}", f"model.layers.{i}"
            files[f"{m}.input_layernorm.weight.bin"] = t[f"{h}.ln_1.weight"]
            files[f"{m}.input_layernorm.bias.bin"] = t[f"{h}.ln_1.bias"]
            w = t[f"{h}.attn.c_attn.weight"]
            blocks = [w[:, p * d : (p + 1) * d] for p in range(3)]
            for r, flat in enumerate(_fused_qkv(blocks, n, transposed_source=False)):
                files[f"{m}.attention.query_key_value.weight.{r}.bin"] = flat
            b = t[f"{h}.attn.c_attn.bias"]
            width = d // n
            for r in range(n):  # bias element (p, c) equals c_attn.bias[p*d + r*d/N + c]
                files[f"{m}.attention.query_key_value.bias.{r}.bin"] = np.array(
                    [b[p * d + r * width + c] for p in range(3) for c in range(width)], dtype=np.float32
                )
            split(f"{m}.attention.dense.weight", _rows(t[f"{h}.attn.c_proj.weight"], n))
            files[f"{m}.attention.dense.bias.bin"] = t[f"{h}.attn.c_proj.bias"]
            files[f"{m}.post_attention_layernorm.weight.bin"] = t[f"{h}.ln_2.weight"]
            files[f"{m}.post_attention_layernorm.bias.bin"] = t[f"{h}.ln_2.bias"]
            split(f"{m}.mlp.dense_h_to_4h.weight", _cols(t[f"{h}.mlp.c_fc.weight"], n))
            split(f"{m}.mlp.dense_h_to_4h.bias", _cols(t[f"{h}.mlp.c_fc.bias"], n))
            split(f"{m}.mlp.dense_4h_to_h.weight", _rows(t[f"{h}.mlp.c_proj.weight"], n))
            files[f"{m}.mlp.dense_4h_to_h.bias.bin"] = t[f"{h}.mlp.c_proj.bias"]
        return files

    files["model.wte.bin"] = t["transformer.wte.weight"]
    files["model.lm_head.weight.bin"] = t["lm_head.weight"]
    files["model.lm_head.bias.bin"] = t["lm_head.bias"]
    files["model.final_layernorm.weight.bin"] = t["transformer.ln_f.weight"]
    files["model.final_layernorm.bias.bin"] = t["transformer.ln_f.bias"]
    for i in range(model.config["n_layer"]):
        h, m = f"transformer.h.{i}", f"model.layers.{i}"
        files[f"{m}.input_layernorm.weight.bin"] = t[f"{h}.ln_1.weight"]
        files[f"{m}.input_layernorm.bias.bin"] = t[f"{h}.ln_1.bias"]
        qkv = [t[f"{h}.attn.{x}_proj.weight"] for x in "qkv"]
        for r, flat in enumerate(_fused_qkv(qkv, n, transposed_source=True)):
            files[f"{m}.attention.query_key_value.weight.{r}.bin"] = flat
        split(f"{m}.attention.dense.weight", _rows(t[f"{h}.attn.out_proj.weight"].T, n))
        split(f"{m}.mlp.dense_h_to_4h.weight", _cols(t[f"{h}.mlp.fc_in.weight"].T, n))
        split(f"{m}.mlp.dense_h_to_4h.bias", _cols(t[f"{h}.mlp.fc_in.bias"], n))
        split(f"{m}.mlp.dense_4h_to_h.weight", _rows(t[f"{h}.mlp.fc_out.weight"].T, n))
        files[f"{m}.mlp.dense_4h_to_h.bias.bin"] = t[f"{h}.mlp.fc_out.bias"]
    return files


def file_bytes(value: np.ndarray, dtype: str) -> bytes:
    """Raw C-order little-endian bytes (numpy ``tofile`` semantics) in the output dtype."""
    return np.ascontiguousarray(value).astype("<f4" if dtype == "fp32" else "<f2").tobytes()


def spec_file_count(model: Model, tp: int) -> int:
    """The file-count formulas of ft-format.md §2.2, §3.2, §4.2."""
    c: dict[str, Any] = model.config
    n = tp
    if model.family == "t5":
        g = 1 if c["feed_forward_proj"].startswith("gated") else 0
        return int(5 + c["num_layers"] * (2 + n * (6 + g)) + n + c["num_decoder_layers"] * (3 + n * (8 + g)) + n)
    if model.family == "gpt2":
        return int(4 + c["n_layer"] * (6 + 6 * n))
    return int(5 + c["n_layer"] * (3 + 5 * n))
