"""``config.ini`` for FasterTransformer (ft-format.md §1.4, §2.3, §3.3, §4.3): pure builders + one renderer.

Format = Python ``configparser`` output (``[section]``, ``key = value``, keys lower-case, a blank line after every
section). FT's INI parser reads 200-byte chunks, concatenates repeated keys and calls ``exit(-1)`` on a missing
or unparsable required integer, so the renderer guarantees: every line < 200 bytes (over-long optional keys
carried over from config.json, e.g. T5's ``task_specific_params``, are dropped and reported), unique keys, and
no ``None`` for any integer FT requires. Where the reference converters write fragile values this writes what
FT needs:

* T5 ``tie_word_embeddings`` = whether HF scales the decoder output (``scale_decoder_outputs`` in transformers 5,
  ``tie_word_embeddings`` before), so untied models (t5-v1.1, flan-t5, mT5) are not scaled by FT;
* T5 ``decoder_start_token_id`` falls back to ``pad_token_id`` (as HF does) instead of ``None``;
* GPT-2/GPT-J ``inter_size`` from ``n_inner`` when set; GPT-2 ``layernorm_eps`` from ``layer_norm_epsilon`` and
  ``activation_type`` from ``activation_function``; GPT-J ``rotary_embedding`` falls back to the head size.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tritonft.convert import gpt2, gptj, t5
from tritonft.spec import Architecture, Family, WeightDType

MAX_LINE_BYTES = 199
"""FT's ``INI_MAX_LINE`` is 200 including the newline."""

Sections = dict[str, dict[str, str]]


def ini_value(value: Any) -> str:
    """``str()`` of the value, as the reference converters write it (``True``, ``None``, ``1e-06``, lists)."""
    return str(value)


def render(sections: Sections) -> str:
    """The file text. Raises ``ValueError`` on a line FT would mis-read (builders never produce one)."""
    out: list[str] = []
    for name, items in sections.items():
        out.append(f"[{name}]")
        for key, value in items.items():
            line = f"{key} = {value}"
            if len(line.encode()) > MAX_LINE_BYTES or "\n" in line or key != key.lower():
                raise ValueError(f"config.ini line for {name}.{key} would be mis-read by FasterTransformer: {line!r}")
            out.append(line)
        out.append("")
    return "\n".join(out) + "\n"


def _first_int(value: Any, fallback: int) -> int:
    if isinstance(value, list) and value:
        value = value[0]
    return value if isinstance(value, int) and not isinstance(value, bool) else fallback


def _carry_over(config: Mapping[str, Any], dropped: list[str]) -> dict[str, str]:
    """config.json keys as the reference writes them (``to_dict()``), minus lines FT would split."""
    items: dict[str, str] = {}
    for key, value in config.items():
        text = ini_value(value)
        if len(f"{key.lower()} = {text}".encode()) > MAX_LINE_BYTES or "\n" in text:
            dropped.append(key)
            continue
        items[key.lower()] = text
    return items


def t5_sections(
    config: Mapping[str, Any], arch: Architecture, dtype: WeightDType, name: str, dropped: list[str]
) -> Sections:
    """``[encoder]``, ``[decoder]``, ``[structure]``; ``dropped`` receives config.json keys too long for FT."""
    buckets = config.get("relative_attention_num_buckets") or 32
    pad = _first_int(config.get("pad_token_id"), 0)
    start = _first_int(config.get("decoder_start_token_id"), pad)
    common = {
        "vocab_size": arch.vocab_size,
        "d_model": arch.d_model,
        "d_kv": arch.head_size,
        "d_ff": arch.d_ff,
        "num_heads": arch.num_heads,
        "feed_forward_proj": t5.setting(config, "feed_forward_proj"),
        "pad_token_id": pad,
        "eos_token_id": _first_int(config.get("eos_token_id"), 1),
        "decoder_start_token_id": start,
        "tie_word_embeddings": arch.tied_embeddings,
        "_name_or_path": name,
    }
    base = _carry_over(config, dropped)
    sections: Sections = {}
    for section, is_decoder, layers in (
        ("encoder", False, arch.num_layers),
        ("decoder", True, arch.num_decoder_layers),
    ):
        items = dict(base)
        use_cache = bool(config.get("use_cache", True)) if is_decoder else False
        overrides = {**common, "num_layers": layers, "is_decoder": is_decoder, "use_cache": use_cache}
        items.update({k: ini_value(v) for k, v in overrides.items()})
        items["weight_data_type"] = str(dtype)
        items.pop("relative_attention_num_buckets", None)
        items["relative_attention_num_buckets_or_max_pos_seq_len"] = ini_value(buckets)
        sections[section] = items
    sections["structure"] = {
        "t5_with_bias": "false",
        "use_gated_activation": "1" if arch.gated_ffn else "false",
        "position_embedding_type": "relative",
    }
    return sections


def gpt2_sections(config: Mapping[str, Any], arch: Architecture, dtype: WeightDType, name: str, tp: int) -> Sections:
    eos = _first_int(config.get("eos_token_id"), 50256)
    return {
        "gpt": {
            "model_name": name or "gpt",
            "head_num": str(arch.num_heads),
            "size_per_head": str(arch.head_size),
            "inter_size": str(arch.d_ff),
            "max_pos_seq_len": str(arch.max_positions),
            "num_layer": str(arch.num_layers),
            "vocab_size": str(arch.vocab_size),
            "start_id": str(_first_int(config.get("bos_token_id"), eos)),
            "end_id": str(eos),
            "weight_data_type": str(dtype),
            "tensor_para_size": str(tp),
            "layernorm_eps": ini_value(float(config.get("layer_norm_epsilon", 1e-5))),
            "activation_type": gpt2.FT_ACTIVATIONS[config.get("activation_function", "gelu_new")],
        }
    }


def gptj_sections(config: Mapping[str, Any], arch: Architecture, dtype: WeightDType) -> Sections:
    """The reference reads config.json without ``from_pretrained``, so its model name is ``_name_or_path`` or gptj."""
    name = str(config.get("_name_or_path") or "gptj")[:120]
    eos = _first_int(config.get("eos_token_id"), 50256)
    return {
        "gptj": {
            "model_name": name,
            "head_num": str(arch.num_heads),
            "size_per_head": str(arch.head_size),
            "inter_size": str(arch.d_ff),
            "num_layer": str(arch.num_layers),
            "rotary_embedding": str(gptj.rotary_dim(config, arch.head_size)),
            "vocab_size": str(arch.vocab_size),
            "start_id": str(_first_int(config.get("bos_token_id"), eos)),
            "end_id": str(eos),
            "weight_data_type": str(dtype),
        }
    }


def config_ini(
    family: Family, config: Mapping[str, Any], arch: Architecture, dtype: WeightDType, *, tp: int, name: str
) -> tuple[str, list[str]]:
    """The ``config.ini`` text and the config.json keys dropped because FT would mis-read their lines.

    ``name`` is the model name FT only logs (T5 ``_name_or_path``, GPT-2 ``model_name``): the reference uses the
    input path as typed. It is truncated to keep the line short.
    """
    name = name[:120]
    dropped: list[str] = []
    if family is Family.T5:
        sections = t5_sections(config, arch, dtype, name, dropped)
    elif family is Family.GPT2:
        sections = gpt2_sections(config, arch, dtype, name, tp)
    else:
        sections = gptj_sections(config, arch, dtype)
    return render(sections), dropped
