"""A chat request's messages: every field of every OpenAI message role and every content-part type has a verdict
(the README's tables equal the gateway's), text parts are served, anything refused is a 400 naming it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.tritonft.gateway.openai_schema import load
from tritonft.gateway.errors import ApiError
from tritonft.gateway.mapping import chat_prompt
from tritonft.gateway.messages import ALL_ROLES, CONTENT_PARTS, MESSAGE_FIELDS, turns

README = Path(__file__).resolve().parents[3] / "docs" / "use" / "gateway.md"


def readme_rows(header: str) -> list[tuple[str, tuple[str, ...], bool, str]]:
    lines = README.read_text(encoding="utf-8").splitlines()
    start = lines.index(header) + 2
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        name, roles, status, note = (cell.strip() for cell in line.strip("|").split(" | "))
        rows.append((name.strip("`"), tuple(r.strip() for r in roles.split(",")), status == "supported", note))
    return rows


def openai_roles() -> dict[str, dict[str, Any]]:
    """Each role of OpenAI's ``ChatCompletionRequestMessage`` -> its message schema's fields."""
    schemas = load()
    roles = {}
    for name, _ in schemas.branches("ChatCompletionRequestMessage"):
        fields = schemas.properties(name)
        roles[fields["role"]["enum"][0]] = fields
    return roles


def part_types(content: dict[str, Any]) -> set[str]:
    """The content-part ``type``s a message's ``content`` schema allows."""
    schemas = load()
    found = set()

    def walk(node: Any) -> None:
        node = schemas.resolve(node)
        for key in ("oneOf", "anyOf"):
            for branch in node.get(key, []):
                walk(branch)
        if node.get("type") == "array":
            walk(node["items"])
        kind = node.get("properties", {}).get("type", {}).get("enum")
        if node.get("type") == "object" and kind:
            found.add(kind[0])

    walk(content)
    return found


def test_the_readme_message_table_is_the_gateways_table() -> None:
    assert readme_rows("| message field | roles | status | here |") == [
        (f.name, f.roles, f.supported, f.note) for f in MESSAGE_FIELDS
    ]


def test_the_readme_content_part_table_is_the_gateways_table() -> None:
    assert readme_rows("| content part | roles | status | here |") == [
        (p.type, p.roles, p.supported, p.note) for p in CONTENT_PARTS
    ]


def test_the_roles_are_openais_roles() -> None:
    assert set(openai_roles()) == set(ALL_ROLES)


def test_every_field_of_every_openai_message_role_has_a_verdict_and_no_other_does() -> None:
    theirs = {(role, field) for role, fields in openai_roles().items() for field in fields}
    ours = {(role, f.name) for f in MESSAGE_FIELDS for role in f.roles}
    assert ours == theirs


def test_every_content_part_type_openai_allows_a_role_has_a_verdict_and_no_other_does() -> None:
    theirs = {(role, kind) for role, fields in openai_roles().items() for kind in part_types(fields["content"])}
    ours = {(role, p.type) for p in CONTENT_PARTS for role in p.roles}
    assert ours == theirs


def refused(messages: Any) -> ApiError:
    with pytest.raises(ApiError) as caught:
        turns(messages)
    assert caught.value.status == 400
    return caught.value


def test_text_parts_reach_the_template_joined_by_line_breaks() -> None:
    parts = [{"type": "text", "text": "first"}, {"type": "text", "text": "second"}]
    assert chat_prompt([{"role": "user", "content": parts}]) == "User: first\nsecond\nAssistant:"


def test_a_developer_message_is_rendered_as_the_system_turn() -> None:
    assert turns([{"role": "developer", "content": "be brief"}]) == [("system", "be brief")]


def test_optional_fields_sent_as_null_are_not_sent() -> None:
    message: dict[str, Any] = {"role": "assistant", "content": "hi", "name": None, "refusal": None, "audio": None}
    message["tool_calls"] = []
    assert turns([message]) == [("assistant", "hi")]


@pytest.mark.parametrize("kind", [p.type for p in CONTENT_PARTS if not p.supported and "user" in p.roles])
def test_a_non_text_part_is_refused_naming_the_part(kind: str) -> None:
    content = [{"type": "text", "text": "look"}, {"type": kind, kind: {}}]
    error = refused([{"role": "user", "content": content}])
    assert error.param == "messages[0].content[1].type"
    assert kind in error.message and "text only" in error.message


def test_a_refusal_part_of_an_earlier_reply_is_refused_naming_the_part() -> None:
    error = refused([{"role": "assistant", "content": [{"type": "refusal", "refusal": "no"}]}])
    assert error.param == "messages[0].content[0].type"


def test_a_prompt_cache_breakpoint_on_a_text_part_is_refused_naming_it() -> None:
    part = {"type": "text", "text": "x", "prompt_cache_breakpoint": {"type": "ephemeral"}}
    assert refused([{"role": "user", "content": [part]}]).param == "messages[0].content[0].prompt_cache_breakpoint"


@pytest.mark.parametrize("role", [r for r in ALL_ROLES if r in ("tool", "function")])
def test_a_tool_or_function_message_is_refused_by_its_role(role: str) -> None:
    error = refused([{"role": "user", "content": "hi"}, {"role": role, "content": "42", "tool_call_id": "c"}])
    assert error.param == "messages[1].role"
    assert "tool or function calls" in error.message


@pytest.mark.parametrize(
    ("field", "value"),
    [("name", "alice"), ("refusal", "no"), ("audio", {"id": "a"}), ("tool_calls", [{"id": "c"}])],
)
def test_a_refused_field_is_a_400_naming_it_and_why(field: str, value: Any) -> None:
    error = refused([{"role": "assistant", "content": "hi", field: value}])
    assert error.param == f"messages[0].{field}"
    note = next(f.note for f in MESSAGE_FIELDS if f.name == field)
    assert note in error.message


def test_a_field_of_another_role_is_refused_as_unknown() -> None:
    error = refused([{"role": "user", "content": "hi", "tool_call_id": "c"}])
    assert (error.param, error.code) == ("messages[0].tool_call_id", "unknown_parameter")


def test_an_assistant_message_without_content_is_refused_naming_it() -> None:
    error = refused([{"role": "assistant", "content": None}])
    assert error.param == "messages[0].content"
    assert "tool calls are not supported" in error.message


@pytest.mark.parametrize("content", [[], 5, [{"type": "text"}], ["plain"]], ids=["empty", "number", "no-text", "str"])
def test_a_malformed_content_is_a_400_naming_where(content: Any) -> None:
    assert str(refused([{"role": "user", "content": content}]).param).startswith("messages[0].content")
