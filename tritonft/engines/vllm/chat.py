"""A model's own chat template, rendered as Hugging Face transformers' ``apply_chat_template`` renders it (pure).

The template is ``tokenizer_config.json``'s ``chat_template`` (a string, or a list of named templates of which
``default`` is used); it is rendered in jinja2's immutable sandbox with transformers' settings (``trim_blocks``,
``lstrip_blocks``, the ``loopcontrols`` extension, a ``tojson`` filter, ``raise_exception`` and ``strftime_now``
globals) and the tokenizer's special tokens as variables (``bos_token``, ``eos_token``, ...). Messages keep their
OpenAI shape (``content`` as a string or as content parts), as transformers passes them.

What the Triton vLLM backend receives is text it tokenizes *with* special tokens, so a template that writes the
BOS token itself would get a second one: :func:`prompt_for_engine` drops a leading ``bos_token`` when the tokenizer
prepends it anyway (as transformers' own token ids of the rendered chat show: one BOS).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

SPECIAL_TOKENS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")


class ChatTemplateError(ValueError):
    """The template is missing or raised (its own words in the message)."""


def _token(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping) and isinstance(value.get("content"), str):
        return str(value["content"])  # AddedToken serialised as {"content": ...}
    return None


def template_of(tokenizer_config: Mapping[str, Any]) -> str:
    template = tokenizer_config.get("chat_template")
    if isinstance(template, list):
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, Mapping)}
        template = named.get("default")
    if not isinstance(template, str) or not template:
        raise ChatTemplateError(
            "tokenizer_config.json has no chat_template: the model has no chat format; use /v1/completions"
        )
    return template


def render(
    tokenizer_config: Mapping[str, Any], messages: Sequence[Mapping[str, Any]], *, add_generation_prompt: bool = True
) -> str:
    """The conversation as the model's template writes it (``apply_chat_template(..., tokenize=False)``)."""
    from jinja2 import TemplateError
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise TemplateError(message)

    def tojson(value: Any, ensure_ascii: bool = False, indent: int | None = None, **_: Any) -> str:
        return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)  # as transformers defines it: local time
    tokens = {name: _token(tokenizer_config.get(name)) for name in SPECIAL_TOKENS}
    try:
        compiled = env.from_string(template_of(tokenizer_config))
        return compiled.render(
            messages=[dict(m) for m in messages], add_generation_prompt=add_generation_prompt, **tokens
        )
    except TemplateError as exc:
        raise ChatTemplateError(f"the model's chat template refused the messages: {exc}") from exc


def prompt_for_engine(tokenizer_config: Mapping[str, Any], rendered: str, *, tokenizer_adds_bos: bool) -> str:
    """``rendered`` without its leading BOS text when the engine's tokenizer prepends BOS itself."""
    bos = _token(tokenizer_config.get("bos_token"))
    if tokenizer_adds_bos and bos and rendered.startswith(bos):
        return rendered[len(bos) :]
    return rendered
