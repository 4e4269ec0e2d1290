"""A CPU forward of the Llama family's decoder (numpy float32, with a KV cache), read from the Hugging Face files.

vLLM serves a ``family: llama`` model from its Hugging Face files as downloaded, so the judge's reference of such a
model reads exactly those files (``config.json`` + ``*.safetensors``), with no conversion. The architectures are the
ones the catalog serves and transformers' ``LlamaForCausalLM`` / ``Qwen2ForCausalLM`` compute:

* RMSNorm before attention and MLP (``rms_norm_eps``), a final RMSNorm, an untied or tied (``tie_word_embeddings``)
  output head;
* grouped-query attention (``num_key_value_heads`` KV heads, each shared by ``num_attention_heads / kv`` query heads,
  ``head_dim``), scaled by ``head_dim ** -0.5``, causal; Qwen2's q/k/v biases (and Llama's ``attention_bias``);
* rotary positions on the two halves of each head (``rope_theta``; ``rope_scaling`` ``linear`` or ``llama3``, as
  Llama 3.1/3.2 ship);
* SwiGLU MLP ``down(silu(gate(x)) * up(x))`` (``mlp_bias`` when set).

Every weight is held at fp32 (bf16/fp16 files widened exactly), read with the converters' safetensors reader
(:func:`tritonft.convert.tensors.open_checkpoint`: headers checked, shards through their index). Proven equal to
transformers on seeded checkpoints by golden files (``scripts/make_llama_reference_goldens.py``,
``tests/tritonft/reference/test_llama.py``). It is a checking tool: one row, greedy steps, no batching.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tritonft.convert.tensors import cast, open_checkpoint
from tritonft.errors import UserError
from tritonft.reference import layers
from tritonft.reference.models import Cache, _heads, _merge
from tritonft.repo.tokenization import HuggingFaceTokenizer
from tritonft.spec import Family, WeightDType

Array = np.ndarray[Any, Any]

MODEL_TYPES = ("llama", "qwen2")
"""``config.json`` ``model_type`` values this forward computes (Llama 2/3.x, Qwen2/2.5)."""


@dataclass(frozen=True)
class LlamaConfig:
    """The hyper-parameters of ``config.json`` the forward uses."""

    model_type: str
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    eps: float
    rope_theta: float
    rope_scaling: dict[str, Any] | None
    tied: bool
    eos_ids: tuple[int, ...]

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any], generation: Mapping[str, Any] | None = None) -> LlamaConfig:
        """``config.json`` (and ``generation_config.json``, whose end ids vLLM stops at, as transformers does)."""
        model_type = str(raw.get("model_type", ""))
        if model_type not in MODEL_TYPES:
            raise UserError(f"config.json model_type {model_type!r}: the reference computes {', '.join(MODEL_TYPES)}")
        if raw.get("hidden_act", "silu") != "silu":
            raise UserError(f"config.json hidden_act {raw.get('hidden_act')!r}: the reference computes silu")
        heads = int(raw["num_attention_heads"])
        hidden = int(raw["hidden_size"])
        # transformers 5 writes the rope settings as rope_parameters (theta inside); 4.x as rope_theta + rope_scaling.
        rope = dict(raw.get("rope_parameters") or raw.get("rope_scaling") or {})
        theta = float(rope.pop("rope_theta", raw.get("rope_theta", 10000.0)))
        kind = rope.get("rope_type", rope.get("type", "default"))
        eos: list[int] = []
        for source in (generation or {}, raw):
            value = source.get("eos_token_id")
            ids = value if isinstance(value, list) else [value] if value is not None else []
            eos += [int(i) for i in ids if int(i) not in eos]
            if eos:
                break
        return cls(
            model_type=model_type,
            hidden=hidden,
            layers=int(raw["num_hidden_layers"]),
            heads=heads,
            kv_heads=int(raw.get("num_key_value_heads") or heads),
            head_dim=int(raw.get("head_dim") or hidden // heads),
            intermediate=int(raw["intermediate_size"]),
            vocab=int(raw["vocab_size"]),
            eps=float(raw.get("rms_norm_eps", 1e-6)),
            rope_theta=theta,
            rope_scaling=rope if kind != "default" else None,
            tied=bool(raw.get("tie_word_embeddings", False)),
            eos_ids=tuple(eos),
        )


@dataclass
class LlamaLayer:
    input_norm: Array
    q: Array
    k: Array
    v: Array
    q_bias: Array | None
    k_bias: Array | None
    v_bias: Array | None
    o: Array
    o_bias: Array | None
    post_norm: Array
    gate: Array
    up: Array
    down: Array
    gate_bias: Array | None
    up_bias: Array | None
    down_bias: Array | None


def _linear(x: Array, weight: Array, bias: Array | None) -> Array:
    """``x @ weight.T (+ bias)``: ``weight`` as transformers stores it, ``[out, in]``."""
    y = x @ weight.T
    return np.asarray(y if bias is None else y + bias, np.float32)


class Llama:
    """The decoder over a checkpoint's tensors (transformers' names), answering :mod:`tritonft.reference.judge`'s
    calls: :meth:`start` runs the prompt, :meth:`step` one token; both return the next-token logits ``[1, vocab]``."""

    family = Family.LLAMA

    def __init__(self, config: LlamaConfig, tensors: Mapping[str, Array]) -> None:
        self.config = config
        c = config
        if c.heads % c.kv_heads:
            raise UserError(f"config.json: {c.heads} attention heads are not a multiple of {c.kv_heads} KV heads")
        missing: list[str] = []

        def get(name: str, shape: tuple[int, ...], optional: bool = False) -> Array | None:
            tensor = tensors.get(name)
            if tensor is None:
                if not optional:
                    missing.append(name)
                return None
            if tuple(tensor.shape) != shape:
                raise UserError(f"tensor {name} has shape {tuple(tensor.shape)}, config.json makes it {shape}")
            return tensor

        def need(name: str, shape: tuple[int, ...]) -> Array:
            found = get(name, shape)
            return found if found is not None else np.zeros(shape, np.float32)

        q_width, kv_width = c.heads * c.head_dim, c.kv_heads * c.head_dim
        self.embed = need("model.embed_tokens.weight", (c.vocab, c.hidden))
        self.layers: list[LlamaLayer] = []
        for i in range(c.layers):
            p = f"model.layers.{i}."
            self.layers.append(
                LlamaLayer(
                    input_norm=need(p + "input_layernorm.weight", (c.hidden,)),
                    q=need(p + "self_attn.q_proj.weight", (q_width, c.hidden)),
                    k=need(p + "self_attn.k_proj.weight", (kv_width, c.hidden)),
                    v=need(p + "self_attn.v_proj.weight", (kv_width, c.hidden)),
                    q_bias=get(p + "self_attn.q_proj.bias", (q_width,), True),
                    k_bias=get(p + "self_attn.k_proj.bias", (kv_width,), True),
                    v_bias=get(p + "self_attn.v_proj.bias", (kv_width,), True),
                    o=need(p + "self_attn.o_proj.weight", (c.hidden, q_width)),
                    o_bias=get(p + "self_attn.o_proj.bias", (c.hidden,), True),
                    post_norm=need(p + "post_attention_layernorm.weight", (c.hidden,)),
                    gate=need(p + "mlp.gate_proj.weight", (c.intermediate, c.hidden)),
                    up=need(p + "mlp.up_proj.weight", (c.intermediate, c.hidden)),
                    down=need(p + "mlp.down_proj.weight", (c.hidden, c.intermediate)),
                    gate_bias=get(p + "mlp.gate_proj.bias", (c.intermediate,), True),
                    up_bias=get(p + "mlp.up_proj.bias", (c.intermediate,), True),
                    down_bias=get(p + "mlp.down_proj.bias", (c.hidden,), True),
                )
            )
        self.norm = need("model.norm.weight", (c.hidden,))
        head = get("lm_head.weight", (c.vocab, c.hidden), optional=c.tied)
        self.head = head if head is not None else self.embed
        if missing:
            shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
            raise UserError(f"the checkpoint lacks {len(missing)} tensor(s) of a {c.model_type} model: {shown}")
        self.inv_freq = layers.rope_inv_freq(c.head_dim, c.rope_theta, c.rope_scaling)
        self.vocab_size = c.vocab
        self.end_ids = frozenset(c.eos_ids)

    def _attention(self, layer: LlamaLayer, cache: Cache, index: int, x: Array, positions: Array) -> Array:
        c = self.config
        q = _heads(_linear(x, layer.q, layer.q_bias), c.heads)
        k = _heads(_linear(x, layer.k, layer.k_bias), c.kv_heads)
        v = _heads(_linear(x, layer.v, layer.v_bias), c.kv_heads)
        sin, cos = layers.rotary_half_tables(positions, self.inv_freq)
        q = layers.apply_rotary_half(q, sin, cos)
        k = layers.apply_rotary_half(k, sin, cos)
        keys, values = cache.store(index, k, v)
        group = c.heads // c.kv_heads
        keys = np.repeat(keys, group, axis=1)
        values = np.repeat(values, group, axis=1)
        mask = layers.causal_mask(int(positions[0]), len(positions))
        scaled = q * np.float32(c.head_dim**-0.5)
        return _linear(_merge(layers.attention(scaled, keys, values, mask)), layer.o, layer.o_bias)

    def _hidden(self, cache: Cache, tokens: Array) -> Array:
        """The final-normed hidden states ``[t, hidden]`` of ``tokens`` (``[t]``), after appending them to
        ``cache``."""
        c = self.config
        positions = np.arange(cache.length, cache.length + len(tokens))
        h = self.embed[np.asarray(tokens, np.int64)][None, :, :]
        for index, layer in enumerate(self.layers):
            attended = self._attention(layer, cache, index, layers.rms_norm(h, layer.input_norm, c.eps), positions)
            h = np.asarray(h + attended, np.float32)
            x = layers.rms_norm(h, layer.post_norm, c.eps)
            gated = layers.silu(_linear(x, layer.gate, layer.gate_bias)) * _linear(x, layer.up, layer.up_bias)
            h = np.asarray(h + _linear(gated, layer.down, layer.down_bias), np.float32)
        cache.length += len(tokens)
        return layers.rms_norm(h[0], self.norm, c.eps)

    def _forward(self, cache: Cache, tokens: Array) -> Array:
        """Logits ``[1, vocab]`` of the last of ``tokens``, after appending them to ``cache``."""
        return np.asarray(self._hidden(cache, tokens)[-1:] @ self.head.T, np.float32)

    def start(self, prompt: Array, copies: int, capacity: int, start_id: int | None = None) -> tuple[Cache, Array]:
        """The prompt ``[t]`` (its ids as the tokenizer gives them, BOS included) run once: the cache and the
        next-token logits ``[1, vocab]``. ``copies`` must be 1; ``start_id`` is unused (a decoder-only model)."""
        del start_id
        if copies != 1:
            raise ValueError("the Llama reference runs one row")
        c = self.config
        cache = Cache.empty(c.layers, 1, c.kv_heads, capacity, c.head_dim)
        return cache, self._forward(cache, np.asarray(prompt).reshape(-1))

    def step(self, cache: Cache, tokens: Array) -> Array:
        """One more token (``[1]``): the next-token logits ``[1, vocab]``."""
        return self._forward(cache, np.asarray(tokens).reshape(-1))

    def logits(self, ids: list[int]) -> Array:
        """The next-token logits at every position of ``ids`` (``[t, vocab]``): one forward, no cache kept."""
        c = self.config
        cache = Cache.empty(c.layers, 1, c.kv_heads, len(ids), c.head_dim)
        return np.asarray(self._hidden(cache, np.asarray(ids)) @ self.head.T, np.float32)


QWEN2_SPLIT = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
"""The split pattern of transformers' ``Qwen2Tokenizer`` (``models/qwen2/tokenization_qwen2.py``), the one Qwen2.5's
own ``tokenizer.json`` carries."""


def prompt_tokenizer(directory: Path, model_type: str) -> HuggingFaceTokenizer:
    """The checkpoint's ``tokenizer.json`` as vLLM's tokenizer (transformers' ``AutoTokenizer``) applies it to a
    prompt. transformers 5 builds a ``qwen2`` model's tokenizer as its ``Qwen2Tokenizer`` (NFC, Qwen2's split pattern,
    byte-level) whatever the file's pre-tokenizer says: the same here (a no-op on Qwen2.5's own files, which say
    exactly that). Other model types keep the file's pipeline."""
    from tokenizers import Regex, Tokenizer, normalizers, pre_tokenizers

    path = directory / "tokenizer.json"
    if not path.is_file():
        raise UserError(f"{directory}: no tokenizer.json (the Llama family's tokenizer file)")
    tokenizer = Tokenizer.from_file(str(path))
    if model_type == "qwen2":
        tokenizer.normalizer = normalizers.NFC()
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            ]
        )
    return HuggingFaceTokenizer(tokenizer)


def tokenizer_end_ids(directory: Path) -> frozenset[int]:
    """The id of the tokenizer's own eos (``tokenizer_config.json``'s ``eos_token`` in ``tokenizer.json``): vLLM
    stops at it besides the generation config's end ids (its ``eos_token_id`` is the tokenizer's). Empty when the
    files name none."""
    from tokenizers import Tokenizer

    from tritonft.engines.vllm.chat import read_tokenizer_config, special_token_texts

    path = directory / "tokenizer.json"
    if not path.is_file():
        return frozenset()
    config = read_tokenizer_config(directory)
    eos = config.get("eos_token")
    texts = special_token_texts({"eos_token": eos}) if eos is not None else ()
    tokenizer = Tokenizer.from_file(str(path))
    return frozenset(i for i in (tokenizer.token_to_id(t) for t in texts) if i is not None)


def template_special_tokens(directory: Path) -> tuple[str, ...]:
    """The special added tokens of ``tokenizer.json`` as text (a chat template writes some of them: ``<|eot_id|>``,
    ``<|im_start|>``, ...)."""
    path = directory / "tokenizer.json"
    if not path.is_file():
        return ()
    added = json.loads(path.read_text(encoding="utf-8")).get("added_tokens") or []
    return tuple(str(t["content"]) for t in added if t.get("special") and t.get("content"))


def load_llama(directory: Path) -> Llama:
    """The Llama-family model of the Hugging Face checkpoint in ``directory`` (``config.json``,
    ``generation_config.json`` when present, the safetensors weights), every weight at fp32."""
    try:
        config_raw = json.loads((directory / "config.json").read_text())
    except (OSError, ValueError) as exc:
        raise UserError(f"{directory}/config.json: {exc}") from exc
    generation_file = directory / "generation_config.json"
    generation = json.loads(generation_file.read_text()) if generation_file.is_file() else None
    config = LlamaConfig.from_dict(config_raw, generation)
    weights = open_checkpoint(directory)  # the converters' reader: headers validated, shards through their index
    tensors: dict[str, Array] = {}
    for name, info in weights.tensors.items():
        if name.startswith(("model.", "lm_head.")):
            tensors[name] = widened(weights.read(name), info.dtype)
    return Llama(config, tensors)


def widened(stored: Array, dtype: str) -> Array:
    """A stored tensor as a float32 array of its own, in one allocation (the file's mapping is dropped with the
    stored view): bf16 widened exactly in place of its 32-bit copy, fp16 by numpy, fp32 copied."""
    if dtype != "BF16":
        return np.array(cast(stored, dtype, WeightDType.FP32), np.float32)
    bits = np.empty(stored.shape, np.uint32)
    bits[...] = stored
    bits <<= np.uint32(16)
    return bits.view(np.float32)
