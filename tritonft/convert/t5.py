"""T5 (and mT5) -> FasterTransformer plan (ft-format.md §2.2).

Tensors knowingly not converted (:func:`ignorable`):

* ``encoder.embed_tokens.weight`` / ``decoder.embed_tokens.weight``: HF ties both to ``shared.weight``; FT uses the
  one ``shared.weight_T.bin`` table for both (the reference converter skips them too).
* ``lm_head.weight`` is *used* when present; when absent (transformers >= 5 omits a tied head) it is synthesised
  from ``shared.weight`` for tied models, and is a missing-tensor error for untied ones.

Files FT never reads but the reference converter writes are written too, for byte parity: ``shared.weight.bin``
(the transposed embedding) and ``lm_head.weight.bin`` (always).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tritonft.convert.plan import Job, Plan, Shape, Split, check_tensors, int_key, job, require_divisible
from tritonft.errors import UserError
from tritonft.spec import Architecture, Family

FT_ACTIVATIONS = ("relu", "gelu", "silu", "gated-gelu", "gated-relu", "gated-silu")
"""``feed_forward_proj`` values FT's T5 accepts; anything else aborts the server at load."""

HF_DEFAULTS: dict[str, Any] = {
    "vocab_size": 32128,
    "d_model": 512,
    "d_kv": 64,
    "d_ff": 2048,
    "num_layers": 6,
    "num_heads": 8,
    "relative_attention_num_buckets": 32,
    "feed_forward_proj": "relu",
    "tie_word_embeddings": True,
    "pad_token_id": 0,
    "eos_token_id": 1,
}
"""``T5Config`` defaults for keys a config.json may omit."""


def setting(config: Mapping[str, Any], key: str) -> Any:
    value = config.get(key)
    return HF_DEFAULTS.get(key) if value is None else value


def is_gated(config: Mapping[str, Any]) -> bool:
    return str(setting(config, "feed_forward_proj")).startswith("gated-")


def scales_decoder_output(config: Mapping[str, Any]) -> bool:
    """Whether HF scales the decoder output by ``d_model**-0.5`` before the LM head (FT: ``tie_word_embeddings``).

    transformers >= 5 writes the meaning into ``scale_decoder_outputs`` (and forces ``tie_word_embeddings`` true);
    older configs carry it as ``tie_word_embeddings`` (ft-format.md §2.4).
    """
    if config.get("scale_decoder_outputs") is not None:
        return bool(config["scale_decoder_outputs"])
    return bool(setting(config, "tie_word_embeddings"))


def architecture(config: Mapping[str, Any], problems: list[str]) -> Architecture:
    num_layers = int_key(config, "num_layers", HF_DEFAULTS["num_layers"], problems)
    return Architecture(
        d_model=int_key(config, "d_model", HF_DEFAULTS["d_model"], problems),
        num_heads=int_key(config, "num_heads", HF_DEFAULTS["num_heads"], problems),
        num_layers=num_layers,
        d_ff=int_key(config, "d_ff", HF_DEFAULTS["d_ff"], problems),
        vocab_size=int_key(config, "vocab_size", HF_DEFAULTS["vocab_size"], problems),
        d_kv=int_key(config, "d_kv", HF_DEFAULTS["d_kv"], problems),
        num_decoder_layers=int_key(config, "num_decoder_layers", num_layers or 1, problems),
        gated_ffn=is_gated(config),
        tied_embeddings=scales_decoder_output(config),
    )


def ignorable(name: str) -> str | None:
    if name in ("encoder.embed_tokens.weight", "decoder.embed_tokens.weight"):
        return "tied copy of shared.weight (FT reads shared.weight_T.bin for both embeddings)"
    return None


def plan(config: Mapping[str, Any], shapes: Mapping[str, Shape], tp: int) -> Plan:
    """All T5 output files for TP size ``tp``; raises :class:`UserError` listing every config/tensor problem."""
    problems: list[str] = []
    arch = architecture(config, problems)
    buckets = int_key(config, "relative_attention_num_buckets", 32, problems)
    activation = str(setting(config, "feed_forward_proj"))
    if activation not in FT_ACTIVATIONS:
        problems.append(
            f"config.json: feed_forward_proj = {activation!r} is not supported by FasterTransformer's T5 "
            f"(supported: {', '.join(FT_ACTIVATIONS)})"
        )
    if not problems:
        require_divisible(problems, "attention heads", arch.num_heads, tp, "num_heads")
        require_divisible(problems, "FFN size", arch.d_ff, tp, "d_ff")
    if problems:
        raise UserError(
            "config.json describes a T5 model FasterTransformer cannot serve at this TP; nothing written", problems
        )

    d, inner, ff, vocab = arch.d_model, arch.inner_size, arch.d_ff, arch.vocab_size
    tied = bool(setting(config, "tie_word_embeddings"))
    head = "lm_head.weight" if "lm_head.weight" in shapes or not tied else "shared.weight"
    jobs: list[Job] = [
        job("shared.weight_T", "shared.weight", (vocab, d)),
        job("shared.weight", "shared.weight", (vocab, d), transpose=True),
        job("lm_head.weight", head, (vocab, d)),
        job("encoder.final_layer_norm.weight", "encoder.final_layer_norm.weight", (d,)),
        job("decoder.final_layer_norm.weight", "decoder.final_layer_norm.weight", (d,)),
    ]

    def cols(name: str, shape: Shape, src: str | tuple[str, ...] | None = None) -> Job:
        return job(name, src or f"{name}", shape, transpose=True, split=Split.COLUMNS, parts=tp)

    def rows(name: str, shape: Shape) -> Job:
        return job(name, name, shape, transpose=True, split=Split.ROWS, parts=tp)

    def ffn(prefix: str) -> list[Job]:
        if arch.gated_ffn:
            first = [
                cols(f"{prefix}.wi.weight", (ff, d), f"{prefix}.wi_0.weight"),
                cols(f"{prefix}.wi2.weight", (ff, d), f"{prefix}.wi_1.weight"),
            ]
        else:
            first = [cols(f"{prefix}.wi.weight", (ff, d))]
        return [*first, rows(f"{prefix}.wo.weight", (d, ff))]

    def relative_bias(stack: str) -> Job:
        return rows(f"{stack}.block.0.layer.0.SelfAttention.relative_attention_bias.weight", (buckets, arch.num_heads))

    for i in range(arch.num_layers):
        p = f"encoder.block.{i}.layer"
        jobs += [job(f"{p}.0.layer_norm.weight", f"{p}.0.layer_norm.weight", (d,))]
        jobs += [cols(f"{p}.0.SelfAttention.{x}.weight", (inner, d)) for x in "qkv"]
        jobs += [rows(f"{p}.0.SelfAttention.o.weight", (d, inner))]
        jobs += [relative_bias("encoder")] if i == 0 else []
        jobs += [job(f"{p}.1.layer_norm.weight", f"{p}.1.layer_norm.weight", (d,)), *ffn(f"{p}.1.DenseReluDense")]
    for i in range(arch.num_decoder_layers):
        p = f"decoder.block.{i}.layer"
        qkv = tuple(f"{p}.0.SelfAttention.{x}.weight" for x in "qkv")
        jobs += [job(f"{p}.0.layer_norm.weight", f"{p}.0.layer_norm.weight", (d,))]
        jobs += [
            cols(f"{p}.0.SelfAttention.qkv.weight", (inner, d), qkv),
            rows(f"{p}.0.SelfAttention.o.weight", (d, inner)),
        ]
        jobs += [relative_bias("decoder")] if i == 0 else []
        jobs += [job(f"{p}.1.layer_norm.weight", f"{p}.1.layer_norm.weight", (d,))]
        jobs += [cols(f"{p}.1.EncDecAttention.{x}.weight", (inner, d)) for x in "qkv"]
        jobs += [rows(f"{p}.1.EncDecAttention.o.weight", (d, inner))]
        jobs += [job(f"{p}.2.layer_norm.weight", f"{p}.2.layer_norm.weight", (d,)), *ffn(f"{p}.2.DenseReluDense")]
    return check_tensors(Plan(Family.T5, tp, tuple(jobs), arch), shapes, ignorable)
