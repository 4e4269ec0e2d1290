"""T5, GPT-2 and GPT-J forward passes over a :class:`~tritonft.reference.checkpoint.Checkpoint`, with a KV cache.

Every model answers three calls used by :mod:`.decoding`: :meth:`Model.start` runs the prompt once and returns the
first next-token logits for ``copies`` identical rows (beams); :meth:`Model.step` feeds one token per row and
returns the next logits; :meth:`Model.reorder` permutes the rows' caches (beam search). Shapes follow ft-format.md
§2.2, §3.2, §4.2; the math follows FT (T5: no attention scaling, RMS norms, relative-position buckets with
``max_distance`` 128, decoder output scaled by ``d_model**-0.5`` when ``tie_word_embeddings``; GPT-2: learned
positions, fused QKV; GPT-J: rotary on ``rotary_embedding`` dims, parallel attention + FFN, layer-norm eps 1e-6
hard-coded by FT).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from tritonft.reference import layers
from tritonft.reference.checkpoint import Checkpoint, CheckpointError, Split
from tritonft.spec import Family

Array = np.ndarray[Any, Any]


@dataclass
class Cache:
    """Per-layer keys and values ``[rows, heads, capacity, head_size]`` and how many positions are filled."""

    keys: list[Array]
    values: list[Array]
    length: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def empty(cls, layers_: int, rows: int, heads: int, capacity: int, head_size: int) -> Cache:
        shape = (rows, heads, capacity, head_size)
        return cls(
            [np.zeros(shape, np.float32) for _ in range(layers_)],
            [np.zeros(shape, np.float32) for _ in range(layers_)],
        )

    def store(self, layer: int, k: Array, v: Array) -> tuple[Array, Array]:
        """Write ``k``/``v`` ``[rows, H, t, e]`` at the current length; the filled keys/values up to them."""
        end = self.length + k.shape[2]
        if end > self.keys[layer].shape[2]:
            grow = max(end, 2 * self.keys[layer].shape[2])
            for store in (self.keys, self.values):
                old = store[layer]
                new = np.zeros((*old.shape[:2], grow, old.shape[3]), np.float32)
                new[:, :, : old.shape[2]] = old
                store[layer] = new
        self.keys[layer][:, :, self.length : end] = k
        self.values[layer][:, :, self.length : end] = v
        return self.keys[layer][:, :, :end], self.values[layer][:, :, :end]

    def replicate(self, rows: int) -> None:
        self.keys = [np.repeat(k, rows, axis=0) for k in self.keys]
        self.values = [np.repeat(v, rows, axis=0) for v in self.values]
        self.extra = {name: np.repeat(value, rows, axis=0) for name, value in self.extra.items()}

    def reorder(self, rows: Array) -> None:
        self.keys = [k[rows] for k in self.keys]
        self.values = [v[rows] for v in self.values]
        self.extra = {name: value[rows] for name, value in self.extra.items()}


def _heads(x: Array, heads: int) -> Array:
    """``[n, t, H*e]`` -> ``[n, H, t, e]``."""
    n, t, width = x.shape
    return np.asarray(x.reshape(n, t, heads, width // heads).transpose(0, 2, 1, 3))


def _merge(x: Array) -> Array:
    """``[n, H, t, e]`` -> ``[n, t, H*e]``."""
    n, h, t, e = x.shape
    return np.asarray(x.transpose(0, 2, 1, 3).reshape(n, t, h * e))


class Model(Protocol):
    family: Family
    vocab_size: int
    start_id: int
    end_id: int

    def start(self, prompt: Array, copies: int, capacity: int, start_id: int | None = None) -> tuple[Cache, Array]: ...

    def step(self, cache: Cache, tokens: Array) -> Array: ...


# --------------------------------------------------------------------------------------------------------- T5


@dataclass
class T5Layer:
    norms: list[Array]
    q: Array
    k: Array
    v: Array
    o: Array
    cross: tuple[Array, Array, Array, Array] | None
    wi: Array
    wi2: Array | None
    wo: Array


class T5:
    """FT's T5 (``T5TritonModel``): encoder once per request, then one decoder step per generated token."""

    family = Family.T5

    def __init__(self, ckpt: Checkpoint) -> None:
        enc, dec = "encoder", "decoder"
        self.d = ckpt.integer(enc, "d_model")
        self.heads = ckpt.integer(enc, "num_heads")
        self.head_size = ckpt.integer(enc, "d_kv")
        self.d_ff = ckpt.integer(enc, "d_ff")
        self.vocab_size = ckpt.integer(enc, "vocab_size")
        self.buckets = ckpt.integer(enc, "relative_attention_num_buckets_or_max_pos_seq_len")
        self.start_id = ckpt.integer(dec, "decoder_start_token_id")
        self.end_id = ckpt.integer(dec, "eos_token_id")
        self.scale_output = ckpt.boolean(dec, "tie_word_embeddings", True)
        proj = ckpt.get(enc, "feed_forward_proj")
        gated = proj.startswith("gated-")
        name = proj.removeprefix("gated-")
        if name not in layers.ACTIVATIONS:
            raise CheckpointError(f"{ckpt.directory}/config.ini: feed_forward_proj = {proj!r} is not one FT supports")
        self.activation = layers.ACTIVATIONS[name]
        d, inner, ff = self.d, self.heads * self.head_size, self.d_ff
        self.embedding = ckpt.tensor("shared.weight_T", (self.vocab_size, d))
        head_file = ckpt.directory / "lm_head.weight.bin"
        self.lm_head = ckpt.tensor("lm_head.weight", (self.vocab_size, d)) if head_file.exists() else self.embedding
        self.final_norm = {s: ckpt.tensor(f"{s}.final_layer_norm.weight", (d,)) for s in (enc, dec)}
        self.relative_bias = {
            s: ckpt.tensor(
                f"{s}.block.0.layer.0.SelfAttention.relative_attention_bias.weight",
                (self.heads, self.buckets),
                Split.ROWS,
            )
            for s in (enc, dec)
        }

        def ffn(prefix: str) -> tuple[Array, Array | None, Array]:
            wi = ckpt.tensor(f"{prefix}.wi.weight", (d, ff), Split.COLUMNS)
            wi2 = ckpt.tensor(f"{prefix}.wi2.weight", (d, ff), Split.COLUMNS) if gated else None
            return wi, wi2, ckpt.tensor(f"{prefix}.wo.weight", (ff, d), Split.ROWS)

        self.encoder: list[T5Layer] = []
        for i in range(ckpt.integer(enc, "num_layers")):
            p = f"encoder.block.{i}.layer"
            q, k, v = (ckpt.tensor(f"{p}.0.SelfAttention.{x}.weight", (d, inner), Split.COLUMNS) for x in "qkv")
            o = ckpt.tensor(f"{p}.0.SelfAttention.o.weight", (inner, d), Split.ROWS)
            norms = [ckpt.tensor(f"{p}.{j}.layer_norm.weight", (d,)) for j in (0, 1)]
            self.encoder.append(T5Layer(norms, q, k, v, o, None, *ffn(f"{p}.1.DenseReluDense")))
        self.decoder: list[T5Layer] = []
        for i in range(ckpt.integer(dec, "num_layers")):
            p = f"decoder.block.{i}.layer"
            qkv = ckpt.tensor(f"{p}.0.SelfAttention.qkv.weight", (d, 3, inner), Split.COLUMNS)
            o = ckpt.tensor(f"{p}.0.SelfAttention.o.weight", (inner, d), Split.ROWS)
            cq, ck, cv = (ckpt.tensor(f"{p}.1.EncDecAttention.{x}.weight", (d, inner), Split.COLUMNS) for x in "qkv")
            co = ckpt.tensor(f"{p}.1.EncDecAttention.o.weight", (inner, d), Split.ROWS)
            norms = [ckpt.tensor(f"{p}.{j}.layer_norm.weight", (d,)) for j in (0, 1, 2)]
            layer = T5Layer(norms, qkv[:, 0], qkv[:, 1], qkv[:, 2], o, (cq, ck, cv, co), *ffn(f"{p}.2.DenseReluDense"))
            self.decoder.append(layer)

    def _ffn(self, layer: T5Layer, x: Array) -> Array:
        hidden = self.activation(x @ layer.wi)
        if layer.wi2 is not None:
            hidden = hidden * (x @ layer.wi2)
        return np.asarray(hidden @ layer.wo, np.float32)

    def _position_bias(self, stack: str, queries: Array, keys: Array, bidirectional: bool) -> Array:
        buckets = layers.relative_position_bucket(keys[None, :] - queries[:, None], bidirectional, self.buckets)
        return np.asarray(self.relative_bias[stack][:, buckets], np.float32)  # [H, t, T]

    def encode(self, prompt: Array) -> Array:
        x = self.embedding[prompt][None]  # [1, L, d]
        positions = np.arange(len(prompt))
        bias = self._position_bias("encoder", positions, positions, bidirectional=True)[None]
        for layer in self.encoder:
            n = layers.rms_norm(x, layer.norms[0])
            q, k, v = (_heads(n @ w, self.heads) for w in (layer.q, layer.k, layer.v))
            x = x + _merge(layers.attention(q, k, v, bias)) @ layer.o
            x = x + self._ffn(layer, layers.rms_norm(x, layer.norms[1]))
        return layers.rms_norm(x, self.final_norm["encoder"])

    def start(self, prompt: Array, copies: int, capacity: int, start_id: int | None = None) -> tuple[Cache, Array]:
        """Encode ``prompt`` and run the decoder's first step from ``start_id`` (default: the model's own)."""
        memory = self.encode(np.asarray(prompt, np.int64))
        cache = Cache.empty(len(self.decoder), 1, self.heads, capacity + 1, self.head_size)
        for i, layer in enumerate(self.decoder):
            assert layer.cross is not None
            cache.extra[f"k{i}"] = _heads(memory @ layer.cross[1], self.heads)
            cache.extra[f"v{i}"] = _heads(memory @ layer.cross[2], self.heads)
        logits = self.step(cache, np.array([self.start_id if start_id is None else start_id]))
        cache.replicate(copies)
        return cache, np.repeat(logits, copies, axis=0)

    def step(self, cache: Cache, tokens: Array) -> Array:
        x = self.embedding[np.asarray(tokens, np.int64)][:, None, :]  # [n, 1, d]
        position = cache.length
        bias = self._position_bias("decoder", np.array([position]), np.arange(position + 1), bidirectional=False)[None]
        for i, layer in enumerate(self.decoder):
            assert layer.cross is not None
            n = layers.rms_norm(x, layer.norms[0])
            q, k, v = (_heads(n @ w, self.heads) for w in (layer.q, layer.k, layer.v))
            keys, values = cache.store(i, k, v)
            x = x + _merge(layers.attention(q, keys, values, bias)) @ layer.o
            n = layers.rms_norm(x, layer.norms[1])
            q = _heads(n @ layer.cross[0], self.heads)
            x = x + _merge(layers.attention(q, cache.extra[f"k{i}"], cache.extra[f"v{i}"])) @ layer.cross[3]
            x = x + self._ffn(layer, layers.rms_norm(x, layer.norms[2]))
        cache.length += 1
        out = layers.rms_norm(x[:, -1], self.final_norm["decoder"])
        if self.scale_output:
            out = out * np.float32(self.d**-0.5)
        return np.asarray(out @ self.lm_head.T, np.float32)


# -------------------------------------------------------------------------------------------------------- GPT


@dataclass
class GptLayer:
    ln1: tuple[Array, Array]
    qkv: Array
    """``[d, 3d]``: q, k, v column blocks."""
    qkv_bias: Array
    dense: Array
    dense_bias: Array
    ln2: tuple[Array, Array] | None
    fc_in: Array
    fc_in_bias: Array
    fc_out: Array
    fc_out_bias: Array


class Gpt:
    """FT's GPT (GPT-2: pre-norm, learned positions) and GPT-J (rotary, one norm, parallel attention + FFN)."""

    def __init__(self, ckpt: Checkpoint) -> None:
        self.family = ckpt.family
        s = ckpt.family.ini_section
        heads, head_size = ckpt.integer(s, "head_num"), ckpt.integer(s, "size_per_head")
        self.heads, self.head_size = heads, head_size
        d, ff = heads * head_size, ckpt.integer(s, "inter_size")
        self.d = d
        self.vocab_size = ckpt.integer(s, "vocab_size")
        self.start_id = ckpt.integer(s, "start_id")
        self.end_id = ckpt.integer(s, "end_id")
        gptj = ckpt.family is Family.GPTJ
        if gptj:
            self.eps = 1e-6
            self.rotary_dim = ckpt.integer(s, "rotary_embedding")
            self.activation = layers.gelu_tanh
            self.positions: Array | None = None
        else:
            self.eps = ckpt.number(s, "layernorm_eps", 1e-6)
            self.rotary_dim = 0
            act = ckpt.get(s, "activation_type", "Gelu").lower()
            if act not in layers.ACTIVATIONS:
                raise CheckpointError(f"{ckpt.directory}/config.ini: activation_type = {act!r} is not supported")
            self.activation = layers.ACTIVATIONS[act]
            self.max_positions = ckpt.integer(s, "max_pos_seq_len")
            self.positions = ckpt.tensor("model.wpe", (self.max_positions, d))
        self.wte = ckpt.tensor("model.wte", (self.vocab_size, d))
        head_file = ckpt.directory / "model.lm_head.weight.bin"
        self.lm_head = ckpt.tensor("model.lm_head.weight", (self.vocab_size, d)) if head_file.exists() else self.wte
        self.lm_head_bias = ckpt.tensor("model.lm_head.bias", (self.vocab_size,)) if gptj else None
        self.final_norm = (
            ckpt.tensor("model.final_layernorm.weight", (d,)),
            ckpt.tensor("model.final_layernorm.bias", (d,)),
        )
        self.layers: list[GptLayer] = []
        for i in range(ckpt.integer(s, "num_layer")):
            m = f"model.layers.{i}"

            def t(name: str, shape: tuple[int, ...], split: Split = Split.NONE, m: str = m) -> Array:
                return ckpt.tensor(f"{m}.{name}", shape, split)

            ln1 = (t("input_layernorm.weight", (d,)), t("input_layernorm.bias", (d,)))
            qkv = t("attention.query_key_value.weight", (d, 3, d), Split.COLUMNS).reshape(d, 3 * d)
            if gptj:
                qkv_bias, dense_bias, ln2 = np.zeros(3 * d, np.float32), np.zeros(d, np.float32), None
            else:
                qkv_bias = t("attention.query_key_value.bias", (3, d), Split.COLUMNS).reshape(3 * d)
                dense_bias = t("attention.dense.bias", (d,))
                ln2 = (t("post_attention_layernorm.weight", (d,)), t("post_attention_layernorm.bias", (d,)))
            self.layers.append(
                GptLayer(
                    ln1,
                    qkv,
                    qkv_bias,
                    t("attention.dense.weight", (d, d), Split.ROWS),
                    dense_bias,
                    ln2,
                    t("mlp.dense_h_to_4h.weight", (d, ff), Split.COLUMNS),
                    t("mlp.dense_h_to_4h.bias", (ff,), Split.COLUMNS),
                    t("mlp.dense_4h_to_h.weight", (ff, d), Split.ROWS),
                    t("mlp.dense_4h_to_h.bias", (d,)),
                )
            )

    def _forward(self, cache: Cache, tokens: Array) -> Array:
        """Tokens ``[n, t]`` at positions ``cache.length ..``; the logits after the last one ``[n, V]``."""
        _n, t = tokens.shape
        start = cache.length
        positions = np.arange(start, start + t)
        x = self.wte[tokens]
        if self.positions is not None:
            if start + t > self.max_positions:
                raise ValueError(
                    f"sequence of {start + t} tokens exceeds max_pos_seq_len={self.max_positions} of this GPT-2 model"
                )
            x = x + self.positions[positions][None]
        mask = layers.causal_mask(start, t)[None, None]
        scale = np.float32(1.0 / math.sqrt(self.head_size))
        rotary = layers.rotary_tables(positions, self.rotary_dim) if self.rotary_dim else None
        for i, layer in enumerate(self.layers):
            a = layers.layer_norm(x, *layer.ln1, self.eps)
            qkv = a @ layer.qkv + layer.qkv_bias
            q, k, v = (_heads(qkv[..., j * self.d : (j + 1) * self.d], self.heads) for j in range(3))
            if rotary is not None:
                q, k = layers.apply_rotary(q, *rotary), layers.apply_rotary(k, *rotary)
            keys, values = cache.store(i, k, v)
            attn = _merge(layers.attention(q * scale, keys, values, mask)) @ layer.dense + layer.dense_bias
            if layer.ln2 is None:  # GPT-J: attention and FFN both read the same normed input
                x = x + attn + self._mlp(layer, a)
            else:
                x = x + attn
                x = x + self._mlp(layer, layers.layer_norm(x, *layer.ln2, self.eps))
        cache.length += t
        out = layers.layer_norm(x[:, -1], *self.final_norm, self.eps)
        logits = out @ self.lm_head.T
        if self.lm_head_bias is not None:
            logits = logits + self.lm_head_bias
        return np.asarray(logits, np.float32)

    def _mlp(self, layer: GptLayer, x: Array) -> Array:
        return np.asarray(self.activation(x @ layer.fc_in + layer.fc_in_bias) @ layer.fc_out + layer.fc_out_bias)

    def start(self, prompt: Array, copies: int, capacity: int, start_id: int | None = None) -> tuple[Cache, Array]:
        """Run the prompt (``start_id`` is unused: FT's GPT starts from the prompt itself)."""
        cache = Cache.empty(len(self.layers), 1, self.heads, capacity, self.head_size)
        logits = self._forward(cache, np.asarray(prompt, np.int64)[None])
        cache.replicate(copies)
        return cache, np.repeat(logits, copies, axis=0)

    def step(self, cache: Cache, tokens: Array) -> Array:
        return self._forward(cache, np.asarray(tokens, np.int64)[:, None])


def build_model(ckpt: Checkpoint) -> T5 | Gpt:
    """Load every tensor FT would load for ``ckpt``'s family."""
    return T5(ckpt) if ckpt.family is Family.T5 else Gpt(ckpt)
