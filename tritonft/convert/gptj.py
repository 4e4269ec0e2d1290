"""GPT-J -> FasterTransformer plan (ft-format.md §4.2). Names are those of ``GPTJForCausalLM``.

Tensors knowingly not converted (:func:`ignorable`): ``transformer.h.{i}.attn.bias`` and
``transformer.h.{i}.attn.masked_bias``, the causal-mask buffers older checkpoints store (FT builds its own mask).

The reference converter always writes fp32; ``--dtype fp16`` is supported here too (FT converts any file dtype
declared by ``weight_data_type``), but only fp32 output is byte-comparable with the reference.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tritonft.convert.plan import Job, Plan, Shape, Split, check_tensors, int_key, job, require_divisible
from tritonft.errors import UserError
from tritonft.spec import Architecture, Family

FT_ACTIVATIONS = ("gelu_new", "gelu_pytorch_tanh", "gelu_fast")
"""FT's GPT-J hard-codes the tanh-approximated GeLU."""


def architecture(config: Mapping[str, Any], problems: list[str]) -> Architecture:
    d = int_key(config, "n_embd", None, problems)
    inner = config.get("n_inner")
    return Architecture(
        d_model=d,
        num_heads=int_key(config, "n_head", None, problems),
        num_layers=int_key(config, "n_layer", None, problems),
        d_ff=int_key(config, "n_inner", None, problems) if inner is not None else 4 * d,
        vocab_size=int_key(config, "vocab_size", None, problems),
        max_positions=int_key(config, "n_positions", 2048, problems),
        tied_embeddings=False,
    )


def rotary_dim(config: Mapping[str, Any], head_size: int) -> int:
    """``rotary_dim``, or the whole head when it is null (HF's behaviour; the reference would write ``None``)."""
    value = config.get("rotary_dim")
    return head_size if value is None else int(value)


def ignorable(name: str) -> str | None:
    parts = name.split(".")
    if (
        len(parts) == 5
        and parts[:2] == ["transformer", "h"]
        and parts[3] == "attn"
        and parts[4] in ("bias", "masked_bias")
    ):
        return "causal-mask buffer (FT builds its own mask)"
    return None


def plan(config: Mapping[str, Any], shapes: Mapping[str, Shape], tp: int) -> Plan:
    problems: list[str] = []
    arch = architecture(config, problems)
    activation = config.get("activation_function", "gelu_new")
    if activation not in FT_ACTIVATIONS:
        problems.append(
            f"config.json: activation_function = {activation!r} is not supported by FasterTransformer's GPT-J "
            f"(it hard-codes tanh GeLU: {', '.join(FT_ACTIVATIONS)})"
        )
    if not problems:
        if arch.d_model % arch.num_heads:
            problems.append(f"config.json: n_embd={arch.d_model} is not divisible by n_head={arch.num_heads}")
        elif not 0 < rotary_dim(config, arch.head_size) <= arch.head_size:
            problems.append(
                f"config.json: rotary_dim={config.get('rotary_dim')} must be in 1..{arch.head_size} (the head size)"
            )
        require_divisible(problems, "attention heads", arch.num_heads, tp, "n_head")
        require_divisible(problems, "FFN size", arch.d_ff, tp, "n_inner" if config.get("n_inner") else "4*n_embd")
    if problems:
        raise UserError(
            "config.json describes a GPT-J model FasterTransformer cannot serve at this TP; nothing written", problems
        )

    d, ff, vocab = arch.d_model, arch.d_ff, arch.vocab_size
    jobs: list[Job] = [
        job("model.wte", "transformer.wte.weight", (vocab, d)),
        job("model.final_layernorm.weight", "transformer.ln_f.weight", (d,)),
        job("model.final_layernorm.bias", "transformer.ln_f.bias", (d,)),
        job("model.lm_head.weight", "lm_head.weight", (vocab, d)),
        job("model.lm_head.bias", "lm_head.bias", (vocab,)),
    ]
    for i in range(arch.num_layers):
        h, m = f"transformer.h.{i}", f"model.layers.{i}"
        qkv = tuple(f"{h}.attn.{x}_proj.weight" for x in "qkv")
        jobs += [
            job(f"{m}.input_layernorm.weight", f"{h}.ln_1.weight", (d,)),
            job(f"{m}.input_layernorm.bias", f"{h}.ln_1.bias", (d,)),
            job(f"{m}.attention.query_key_value.weight", qkv, (d, d), transpose=True, split=Split.COLUMNS, parts=tp),
            job(
                f"{m}.attention.dense.weight",
                f"{h}.attn.out_proj.weight",
                (d, d),
                transpose=True,
                split=Split.ROWS,
                parts=tp,
            ),
            job(
                f"{m}.mlp.dense_h_to_4h.weight",
                f"{h}.mlp.fc_in.weight",
                (ff, d),
                transpose=True,
                split=Split.COLUMNS,
                parts=tp,
            ),
            job(f"{m}.mlp.dense_h_to_4h.bias", f"{h}.mlp.fc_in.bias", (ff,), split=Split.COLUMNS, parts=tp),
            job(
                f"{m}.mlp.dense_4h_to_h.weight",
                f"{h}.mlp.fc_out.weight",
                (d, ff),
                transpose=True,
                split=Split.ROWS,
                parts=tp,
            ),
            job(f"{m}.mlp.dense_4h_to_h.bias", f"{h}.mlp.fc_out.bias", (d,)),
        ]
    return check_tensors(Plan(Family.GPTJ, tp, tuple(jobs), arch), shapes, ignorable)
