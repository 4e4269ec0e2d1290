"""A chat request's ``messages``, held against OpenAI's message schemas (pure): every field of every message role
and every content-part type is either honoured or refused with a 400 naming it (``messages[i].field``,
``messages[i].content[j].type``) and saying why. Two tables (:data:`MESSAGE_FIELDS`, :data:`CONTENT_PARTS`), which
the README's tables must equal (``tests/tritonft/gateway/test_messages.py``, which also checks that every field and
part type of OpenAI's ``ChatCompletionRequestMessage`` has a verdict here).

What the chat template gets (:func:`turns`): each message as ``(role, text)``, ``developer`` read as ``system``
(OpenAI's newer name for it), a content given as text parts joined by line breaks. ``null`` means "not sent" for
every optional field.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tritonft.gateway.errors import ApiError, bad_parameter

SERVED_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}
"""The roles honoured, and the template role each is rendered as."""
ALL_ROLES = ("developer", "system", "user", "assistant", "tool", "function")
"""Every role of OpenAI's ``ChatCompletionRequestMessage``."""


@dataclass(frozen=True)
class MessageField:
    """One field of a chat message as the gateway treats it."""

    name: str
    roles: tuple[str, ...]
    """The roles whose OpenAI schema has the field."""
    supported: bool
    note: str
    """README text: what it does here (supported) or why it is refused."""
    neutral: tuple[Any, ...] = ()
    """Values of a refused field that ask for nothing (accepted, as if not sent)."""


MESSAGE_FIELDS: tuple[MessageField, ...] = (
    MessageField(
        "role",
        ALL_ROLES,
        True,
        "`system`, `developer` (rendered as `system`), `user`, `assistant`; `tool` and `function` messages are "
        "refused: the served models make no tool or function calls, so no result of one belongs in a conversation",
    ),
    MessageField(
        "content",
        ALL_ROLES,
        True,
        "a string, or a list of content parts (below) whose texts are joined by line breaks; an `assistant` "
        "message needs it too (its `null` content goes with tool calls, which are refused)",
    ),
    MessageField(
        "name",
        ("developer", "system", "user", "assistant", "function"),
        False,
        "the chat template has no participant names; leave it out",
    ),
    MessageField(
        "refusal",
        ("assistant",),
        False,
        "the served models never refuse, so no earlier reply of theirs holds a refusal; `null` or leave it out",
    ),
    MessageField("audio", ("assistant",), False, "text only; `null` or leave it out"),
    MessageField("tool_calls", ("assistant",), False, "no tool calls; `[]` or leave it out", ([],)),
    MessageField("function_call", ("assistant",), False, "no function calls; `null` or leave it out"),
    MessageField("tool_call_id", ("tool",), False, "no tool calls (a `tool` message is refused by its role)"),
)
"""The message-field table, in the README's order."""


@dataclass(frozen=True)
class ContentPart:
    """One content-part type (``type``) as the gateway treats it."""

    type: str
    roles: tuple[str, ...]
    """The roles whose OpenAI schema allows the part."""
    supported: bool
    note: str


CONTENT_PARTS: tuple[ContentPart, ...] = (
    ContentPart(
        "text",
        ("developer", "system", "user", "assistant", "tool"),
        True,
        '`{"type": "text", "text": ...}`; its `prompt_cache_breakpoint` is refused (there is no prompt cache)',
    ),
    ContentPart("image_url", ("user",), False, "the served models read text only"),
    ContentPart("input_audio", ("user",), False, "the served models read text only"),
    ContentPart("file", ("user",), False, "the served models read text only"),
    ContentPart(
        "refusal",
        ("assistant",),
        False,
        "the served models never refuse, so no earlier reply of theirs holds a refusal",
    ),
)
"""The content-part table, in the README's order."""

_FIELDS = {f.name: f for f in MESSAGE_FIELDS}
_PARTS = {p.type: p for p in CONTENT_PARTS}


def _content(index: int, role: str, content: Any) -> str:
    """A message's text: its string content, or its text parts joined by line breaks."""
    where = f"messages[{index}].content"
    if isinstance(content, str):
        return content
    if content is None:
        why = " (tool calls are not supported)" if role == "assistant" else ""
        raise bad_parameter(where, f"{where} is required: the message's text{why}")
    if not isinstance(content, list) or not content:
        raise bad_parameter(where, f"{where} must be a string or a non-empty list of text parts")
    texts = []
    for at, part in enumerate(content):
        here = f"{where}[{at}]"
        kind = part.get("type") if isinstance(part, dict) else None
        known = _PARTS.get(kind) if isinstance(kind, str) else None
        if not isinstance(part, dict) or known is None:
            types = ", ".join(p.type for p in CONTENT_PARTS)
            raise bad_parameter(f"{here}.type", f"{here} must be a content part with a type ({types})")
        if not known.supported:
            raise bad_parameter(f"{here}.type", f"{here} is a {kind} part, which is not supported: {known.note}")
        for key, value in part.items():
            if key in ("type", "text") or value is None:
                continue
            reason = "there is no prompt cache" if key == "prompt_cache_breakpoint" else "not a field of a text part"
            raise bad_parameter(f"{here}.{key}", f"{here}.{key} is not supported: {reason}; leave it out")
        text = part.get("text")
        if not isinstance(text, str):
            raise bad_parameter(f"{here}.text", f"{here}.text must be a string")
        texts.append(text)
    return "\n".join(texts)


def _same(value: Any, neutral: Any) -> bool:
    return isinstance(value, bool) == isinstance(neutral, bool) and bool(value == neutral)


def turn(index: int, message: Any) -> tuple[str, str]:
    """``messages[index]`` as ``(template role, text)``; a 400 naming the first field it cannot honour."""
    where = f"messages[{index}]"
    if not isinstance(message, dict):
        raise bad_parameter(where, f"{where} must be an object with a role and a content")
    role = message.get("role")
    if role not in ALL_ROLES:
        raise bad_parameter(f"{where}.role", f"{where}.role must be one of {', '.join(SERVED_ROLES)}")
    if role not in SERVED_ROLES:
        raise bad_parameter(
            f"{where}.role", f"{where} is a {role} message, which is not supported: {_FIELDS['role'].note}"
        )
    for key, value in message.items():
        field = _FIELDS.get(key)
        if field is None or role not in field.roles:
            raise ApiError(
                400,
                f"{where}.{key} is not a field of a {role} message; the README's chat-message table lists them",
                param=f"{where}.{key}",
                code="unknown_parameter",
            )
        if value is None or field.supported or any(_same(value, n) for n in field.neutral):
            continue
        raise bad_parameter(f"{where}.{key}", f"{where}.{key} is not supported: {field.note}")
    return SERVED_ROLES[role], _content(index, role, message.get("content"))


def turns(messages: Any) -> list[tuple[str, str]]:
    """Every message as ``(template role, text)``; a 400 naming what is wrong or refused."""
    if not isinstance(messages, list) or not messages:
        raise bad_parameter("messages", "messages must be a non-empty list of {role, content} objects")
    return [turn(index, message) for index, message in enumerate(messages)]
