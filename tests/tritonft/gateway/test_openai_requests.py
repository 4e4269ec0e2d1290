"""The requests the conformance test generates from OpenAI's request schemas: every field of every route, every
value a field's schema enumerates, every content-part type, each one a request OpenAI's schema allows."""

from __future__ import annotations

from typing import Any

import pytest

from tests.tritonft.gateway.openai_requests import (
    REQUEST_SCHEMAS,
    Case,
    base_request,
    cases,
    names_the_field,
    refused,
    streamed,
)
from tests.tritonft.gateway.openai_schema import load
from tritonft.gateway.parameters import CHAT, COMPLETIONS, EMBEDDINGS


@pytest.mark.parametrize("route", [COMPLETIONS, CHAT, EMBEDDINGS])
def test_the_base_request_is_one_openais_schema_allows(route: str) -> None:
    assert load().validator(REQUEST_SCHEMAS[route]).is_valid(base_request(route, "m"))


@pytest.mark.parametrize("route", [COMPLETIONS, CHAT, EMBEDDINGS])
def test_every_field_of_the_request_schema_is_varied(route: str) -> None:
    assert {c.field for c in cases(load(), route, "m")} == set(load().properties(REQUEST_SCHEMAS[route]))


def test_every_value_an_enum_field_names_is_sent() -> None:
    sent = {c.value for c in cases(load(), CHAT, "m") if c.field == "service_tier"}
    assert sent == {"auto", "default", "flex", "scale", "priority", "fast", None}


def test_every_role_and_content_part_type_is_sent() -> None:
    messages = [c.value[0] for c in cases(load(), CHAT, "m") if c.field == "messages"]
    parts = {p["type"] for m in messages if isinstance(m.get("content"), list) for p in m["content"]}
    assert {m["role"] for m in messages} == {"developer", "system", "user", "assistant", "tool", "function"}
    assert parts == {"text", "image_url", "input_audio", "file", "refusal"}


def test_token_id_prompts_are_among_the_prompts_sent() -> None:
    prompts = [c.value for c in cases(load(), COMPLETIONS, "m") if c.field == "prompt"]
    assert [1] in prompts and [[1]] in prompts


def case(field: str, value: Any, route: str = CHAT) -> Case:
    return Case(route, field, value, base_request(route, "m") | {field: value})


def test_a_refused_field_at_a_value_that_asks_for_something_must_be_refused() -> None:
    assert refused(case("tool_choice", "auto"))
    assert not refused(case("tool_choice", "none"))  # its neutral value
    assert not refused(case("tool_choice", None))
    assert not refused(case("temperature", 0.5))


def test_a_streamed_variant_asks_for_usage_only_when_told() -> None:
    plain = case("temperature", 0.5)
    assert streamed(plain, False) == Case(CHAT, "temperature", 0.5, plain.body | {"stream": True})
    with_usage = streamed(plain, True)
    assert with_usage is not None and with_usage.body["stream_options"] == {"include_usage": True}
    assert streamed(case("stream", False), True) is None


def test_an_error_names_the_field_when_its_param_is_the_field_or_a_path_into_it() -> None:
    assert names_the_field(case("messages", []), "messages[0].content[1].type")
    assert not names_the_field(case("messages", []), "messages_extra")
    assert not names_the_field(case("n", 2), None)
