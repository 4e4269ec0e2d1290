"""A model's own chat template, rendered as Hugging Face transformers' ``apply_chat_template`` renders it (pure, but
the two ``read_`` functions, which read a checkpoint directory).

The template is chosen as transformers chooses it (``tokenization_utils_base.py`` of transformers 5.19:
``from_pretrained`` then ``get_chat_template`` with no name and no tools): the checkpoint's template files
(``chat_template.jinja``, the default, and ``additional_chat_templates/<name>.jinja``, named ones), when there are
any, replace ``tokenizer_config.json``'s ``chat_template`` entirely ("independent chat template file(s) ... take
priority"); else that entry (a string, or a list of ``{name, template}``); of several named templates ``default``
is used, and without one there is no template to use. It is rendered in jinja2's immutable sandbox with
transformers' settings (``trim_blocks``, ``lstrip_blocks``, the ``loopcontrols`` extension, a ``tojson`` filter,
``raise_exception`` and ``strftime_now`` globals) and the tokenizer's special tokens as variables
(``bos_token``, ``eos_token``, ...). Messages keep their OpenAI shape (``content`` as a string or as content parts),
as transformers passes them.

What the Triton vLLM backend receives is text it tokenizes *with* special tokens, so a template that writes the
BOS token itself would get a second one: :func:`prompt_for_engine` drops a leading ``bos_token`` when the tokenizer
prepends it anyway (as transformers' own token ids of the rendered chat show: one BOS).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

TOKENIZER_CONFIG = "tokenizer_config.json"
CHAT_TEMPLATE_FILE = "chat_template.jinja"
"""transformers' ``CHAT_TEMPLATE_FILE``: the default template, as ``save_pretrained`` writes it since 4.50."""
CHAT_TEMPLATE_DIR = "additional_chat_templates"
"""transformers' ``CHAT_TEMPLATE_DIR``: one ``<name>.jinja`` per named template."""
SPECIAL_TOKENS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")


class ChatTemplateError(ValueError):
    """The template is missing or raised (its own words in the message)."""


def _token(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping) and isinstance(value.get("content"), str):
        return str(value["content"])  # AddedToken serialised as {"content": ...}
    return None


def with_template_files(
    tokenizer_config: Mapping[str, Any], default: str | None, named: Mapping[str, str]
) -> dict[str, Any]:
    """``tokenizer_config`` with the ``chat_template`` transformers' ``from_pretrained`` gives the tokenizer when the
    checkpoint has template files: ``default`` (``chat_template.jinja``) alone is the template; with named ones
    (``additional_chat_templates/``) they are a list of ``{name, template}`` (a named ``default`` wins over the
    file, as transformers reads the directory after it); no files: the configuration's own entry, unchanged."""
    templates = ({} if default is None else {"default": default}) | dict(named)
    out = dict(tokenizer_config)
    if set(templates) == {"default"}:
        out["chat_template"] = templates["default"]
    elif templates:
        out["chat_template"] = [{"name": name, "template": text} for name, text in templates.items()]
    return out


def read_template_files(directory: Path) -> tuple[str | None, dict[str, str]]:
    """A checkpoint directory's template files: ``chat_template.jinja`` (None when absent) and the named
    ``additional_chat_templates/<name>.jinja``."""
    default_path = directory / CHAT_TEMPLATE_FILE
    default = default_path.read_text(encoding="utf-8") if default_path.is_file() else None
    folder = directory / CHAT_TEMPLATE_DIR
    named = {p.name.removesuffix(".jinja"): p.read_text(encoding="utf-8") for p in sorted(folder.glob("*.jinja"))}
    return default, named


def read_tokenizer_config(directory: Path) -> dict[str, Any]:
    """A checkpoint directory's ``tokenizer_config.json`` (``{}`` when absent) with its template files folded in
    (:func:`with_template_files`)."""
    path = directory / TOKENIZER_CONFIG
    config = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    if not isinstance(config, dict):
        raise ChatTemplateError(f"{path} is not a JSON object")
    return with_template_files(config, *read_template_files(directory))


def template_of(tokenizer_config: Mapping[str, Any]) -> str:
    """The template ``apply_chat_template`` uses with no name and no tools (``get_chat_template``): the one template,
    or the one named ``default``."""
    template = tokenizer_config.get("chat_template")
    if isinstance(template, list):
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, Mapping)}
        if "default" not in named:
            raise ChatTemplateError(
                f"the model has chat templates named {sorted(str(n) for n in named)} but none named default, which "
                "chat uses (as transformers does); use /v1/completions"
            )
        template = named["default"]
    if not isinstance(template, str) or not template:
        raise ChatTemplateError(
            f"the checkpoint has no chat template ({CHAT_TEMPLATE_FILE}, {CHAT_TEMPLATE_DIR}/ or "
            f"{TOKENIZER_CONFIG}'s chat_template): the model has no chat format; use /v1/completions"
        )
    return template


def render(
    tokenizer_config: Mapping[str, Any],
    messages: Sequence[Mapping[str, Any]],
    *,
    add_generation_prompt: bool = True,
    now: datetime | None = None,
) -> str:
    """The conversation as the model's template writes it (``apply_chat_template(..., tokenize=False)``); a template
    that writes today's date (``strftime_now``) writes ``now``'s (default: this moment, as transformers does)."""
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
    # As transformers defines it: local time, unless a fixed moment is asked for (the judge renders as its reference).
    env.globals["strftime_now"] = (now or datetime.now()).strftime
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


def engine_prompt(
    tokenizer_config: Mapping[str, Any], messages: Sequence[Mapping[str, Any]], *, now: datetime | None = None
) -> str:
    """The text the vLLM engine is sent for ``messages``: the model's template's rendering with the generation
    prompt, without the BOS the tokenizer adds itself (``add_bos_token``, default true). The gateway's chat, the
    judge's chat and the reference's expected rendering all make it here (the last two at one fixed ``now``, so a
    template that writes today's date renders the same text for both)."""
    rendered = render(tokenizer_config, messages, now=now)
    return prompt_for_engine(
        tokenizer_config, rendered, tokenizer_adds_bos=bool(tokenizer_config.get("add_bos_token", True))
    )


def special_token_texts(tokenizer_config: Mapping[str, Any]) -> tuple[str, ...]:
    """The tokenizer configuration's special tokens as text (``bos_token``, ``eos_token``, ...), each once."""
    found = (_token(tokenizer_config.get(name)) for name in SPECIAL_TOKENS)
    return tuple(dict.fromkeys(t for t in found if t))
