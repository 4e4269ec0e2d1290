"""GPT-2 -> FasterTransformer plan (ft-format.md §3.2). GPT-2's ``Conv1D`` weights are already ``[in, out]``.

Tensor names may carry the ``transformer.`` prefix (``GPT2LMHeadModel``) or not (``GPT2Model``).

Tensors knowingly not converted (:func:`ignorable`):

* ``h.{i}.attn.bias`` and ``h.{i}.attn.masked_bias``: the causal-mask buffers older checkpoints store; FT builds
  its own mask.
* ``lm_head.weight`` of a tied model (the default): a copy of ``wte``, which FT reuses as the LM head.

An *untied* GPT-2 (``tie_word_embeddings: false``) additionally gets ``model.lm_head.weight.bin`` (``[V, d]``,
untransposed), which FT's GPT loader reads when present; the reference converter would silently drop it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tritonft.convert.plan import Job, Plan, Shape, Split, check_tensors, int_key, job, require_divisible
from tritonft.errors import UserError
from tritonft.spec import Architecture, Family

FT_ACTIVATIONS = {
    "gelu_new": "Gelu",
    "gelu_pytorch_tanh": "Gelu",
    "gelu_fast": "Gelu",
    "relu": "Relu",
    "silu": "Silu",
    "swish": "Silu",
}
"""HF ``activation_function`` -> FT ``activation_type``. FT's ``Gelu`` is the tanh approximation, so the exact
(erf) ``gelu`` is not the same function and is refused."""


def prefix_of(shapes: Mapping[str, Shape]) -> str:
    return "transformer." if any(name.startswith("transformer.") for name in shapes) else ""


def architecture(config: Mapping[str, Any], problems: list[str]) -> Architecture:
    d = int_key(config, "n_embd", None, problems)
    inner = config.get("n_inner")
    return Architecture(
        d_model=d,
        num_heads=int_key(config, "n_head", None, problems),
        num_layers=int_key(config, "n_layer", None, problems),
        d_ff=int_key(config, "n_inner", None, problems) if inner is not None else 4 * d,
        vocab_size=int_key(config, "vocab_size", None, problems),
        max_positions=int_key(config, "n_positions", None, problems),
        tied_embeddings=bool(config.get("tie_word_embeddings", True)),
    )


def check_features(config: Mapping[str, Any], problems: list[str]) -> None:
    """Refuse GPT-2 variants whose math FT's GPT cannot reproduce."""
    activation = config.get("activation_function", "gelu_new")
    if activation not in FT_ACTIVATIONS:
        problems.append(
            f"config.json: activation_function = {activation!r} is not supported by FasterTransformer's GPT "
            f"(supported: {', '.join(FT_ACTIVATIONS)})"
        )
    if config.get("scale_attn_by_inverse_layer_idx"):
        problems.append("config.json: scale_attn_by_inverse_layer_idx = true cannot be expressed in FasterTransformer")
    if config.get("scale_attn_weights") is False:
        problems.append("config.json: scale_attn_weights = false cannot be expressed in FasterTransformer")


def ignorable(prefix: str, tied: bool) -> Any:
    def reason(name: str) -> str | None:
        core = name.removeprefix(prefix)
        parts = core.split(".")
        if len(parts) == 4 and parts[0] == "h" and parts[2] == "attn" and parts[3] in ("bias", "masked_bias"):
            return "causal-mask buffer (FT builds its own mask)"
        if name == "lm_head.weight" and tied:
            return "tied copy of wte (FT reuses model.wte.bin as the LM head)"
        return None

    return reason


def plan(config: Mapping[str, Any], shapes: Mapping[str, Shape], tp: int) -> Plan:
    problems: list[str] = []
    arch = architecture(config, problems)
    check_features(config, problems)
    if not problems:
        if arch.d_model % arch.num_heads:
            problems.append(f"config.json: n_embd={arch.d_model} is not divisible by n_head={arch.num_heads}")
        require_divisible(problems, "attention heads", arch.num_heads, tp, "n_head")
        require_divisible(problems, "FFN size", arch.d_ff, tp, "n_inner" if config.get("n_inner") else "4*n_embd")
    if problems:
        raise UserError(
            "config.json describes a GPT-2 model FasterTransformer cannot serve at this TP; nothing written", problems
        )

    pre = prefix_of(shapes)
    d, ff = arch.d_model, arch.d_ff
    jobs: list[Job] = [
        job("model.wte", f"{pre}wte.weight", (arch.vocab_size, d)),
        job("model.wpe", f"{pre}wpe.weight", (arch.max_positions, d)),
        job("model.final_layernorm.weight", f"{pre}ln_f.weight", (d,)),
        job("model.final_layernorm.bias", f"{pre}ln_f.bias", (d,)),
    ]
    if not arch.tied_embeddings:
        jobs.append(job("model.lm_head.weight", "lm_head.weight", (arch.vocab_size, d)))
    for i in range(arch.num_layers):
        h, m = f"{pre}h.{i}", f"model.layers.{i}"
        jobs += [
            job(f"{m}.input_layernorm.weight", f"{h}.ln_1.weight", (d,)),
            job(f"{m}.input_layernorm.bias", f"{h}.ln_1.bias", (d,)),
            job(
                f"{m}.attention.query_key_value.weight",
                f"{h}.attn.c_attn.weight",
                (d, 3 * d),
                view=(d, 3, d),
                split=Split.COLUMNS,
                parts=tp,
            ),
            job(
                f"{m}.attention.query_key_value.bias",
                f"{h}.attn.c_attn.bias",
                (3 * d,),
                view=(3, d),
                split=Split.COLUMNS,
                parts=tp,
            ),
            job(f"{m}.attention.dense.weight", f"{h}.attn.c_proj.weight", (d, d), split=Split.ROWS, parts=tp),
            job(f"{m}.attention.dense.bias", f"{h}.attn.c_proj.bias", (d,)),
            job(f"{m}.post_attention_layernorm.weight", f"{h}.ln_2.weight", (d,)),
            job(f"{m}.post_attention_layernorm.bias", f"{h}.ln_2.bias", (d,)),
            job(f"{m}.mlp.dense_h_to_4h.weight", f"{h}.mlp.c_fc.weight", (d, ff), split=Split.COLUMNS, parts=tp),
            job(f"{m}.mlp.dense_h_to_4h.bias", f"{h}.mlp.c_fc.bias", (ff,), split=Split.COLUMNS, parts=tp),
            job(f"{m}.mlp.dense_4h_to_h.weight", f"{h}.mlp.c_proj.weight", (ff, d), split=Split.ROWS, parts=tp),
            job(f"{m}.mlp.dense_4h_to_h.bias", f"{h}.mlp.c_proj.bias", (d,)),
        ]
    return check_tensors(Plan(Family.GPT2, tp, tuple(jobs), arch), shapes, ignorable(pre, arch.tied_embeddings))
