"""Every OpenAI request parameter is supported or refused with a 400 naming it, as the README's table says, and the
table has a verdict for every field of OpenAI's published request schemas."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.tritonft.gateway.openai_schema import load
from tritonft.gateway.errors import ApiError
from tritonft.gateway.parameters import ALL, CHAT, COMPLETIONS, EMBEDDINGS, PARAMETERS, checked_body

README = Path(__file__).resolve().parents[3] / "docs" / "use" / "gateway.md"


def readme_table() -> list[tuple[str, tuple[str, ...], bool, str]]:
    """The rows of the README's parameter table: (name, routes, supported, note)."""
    lines = README.read_text(encoding="utf-8").splitlines()
    start = lines.index("| parameter | routes | status | here |") + 2
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        name, routes, status, note = (cell.strip() for cell in line.strip("|").split(" | "))
        rows.append((name.strip("`"), tuple(r.strip() for r in routes.split(",")), status == "supported", note))
    return rows


def test_the_readme_table_is_the_gateways_table() -> None:
    assert readme_table() == [(p.name, p.routes, p.supported, p.note) for p in PARAMETERS]


REQUEST_SCHEMAS = {
    COMPLETIONS: "CreateCompletionRequest",
    CHAT: "CreateChatCompletionRequest",
    EMBEDDINGS: "CreateEmbeddingRequest",
}


EXTENSIONS: dict[str, set[str]] = {COMPLETIONS: set(), CHAT: set(), EMBEDDINGS: set()}
"""Rows that are not fields of OpenAI's schema: the gateway's own extensions (none yet; e.g. an engine's sampling
parameter would be one), listed here so that a misspelt row cannot pass for one."""


@pytest.mark.parametrize("route", ALL)
def test_every_field_of_openais_request_schema_has_a_verdict(route: str) -> None:
    fields = set(load().properties(REQUEST_SCHEMAS[route]))
    assert fields - {p.name for p in PARAMETERS if route in p.routes} == set()


@pytest.mark.parametrize("route", ALL)
def test_every_row_is_a_field_of_openais_request_schema_or_a_listed_extension(route: str) -> None:
    fields = set(load().properties(REQUEST_SCHEMAS[route]))
    assert {p.name for p in PARAMETERS if route in p.routes} - fields == EXTENSIONS[route]


def test_every_refused_parameter_says_why() -> None:
    assert all(len(p.note) > 20 for p in PARAMETERS if not p.supported)


def test_every_parameter_appears_once_per_route() -> None:
    for route in ALL:
        names = [p.name for p in PARAMETERS if route in p.routes]
        assert len(names) == len(set(names)), route


def test_a_supported_parameter_passes() -> None:
    assert checked_body({"model": "m", "prompt": "hi", "echo": True}, COMPLETIONS) == {
        "model": "m",
        "prompt": "hi",
        "echo": True,
    }


def test_null_is_the_same_as_not_sent() -> None:
    assert checked_body({"model": "m", "suffix": None, "presence_penalty": None}, COMPLETIONS) == {"model": "m"}


@pytest.mark.parametrize(
    ("name", "value", "route"),
    [
        ("frequency_penalty", 0, COMPLETIONS),
        ("presence_penalty", 0.0, CHAT),
        ("logit_bias", {}, CHAT),
        ("tool_choice", "none", CHAT),
        ("parallel_tool_calls", True, CHAT),
        ("response_format", {"type": "text"}, CHAT),
    ],
)
def test_a_refused_parameter_at_its_off_value_is_accepted(name: str, value: Any, route: str) -> None:
    assert checked_body({name: value}, route) == {name: value}


def test_a_refused_parameter_at_another_value_is_a_400_naming_it_and_why() -> None:
    with pytest.raises(ApiError) as caught:
        checked_body({"frequency_penalty": 0.5}, COMPLETIONS)
    assert (caught.value.status, caught.value.param) == (400, "frequency_penalty")
    assert "repetition penalty" in caught.value.message


def test_false_is_not_the_off_value_zero() -> None:
    with pytest.raises(ApiError) as caught:
        checked_body({"presence_penalty": False}, COMPLETIONS)
    assert caught.value.param == "presence_penalty"


def test_an_unknown_parameter_is_a_400_naming_it() -> None:
    with pytest.raises(ApiError) as caught:
        checked_body({"top_k": 4}, COMPLETIONS)
    assert (caught.value.status, caught.value.param, caught.value.code) == (400, "top_k", "unknown_parameter")


def test_an_identifier_for_the_callers_records_must_be_a_string() -> None:
    assert checked_body({"user": "u-1", "safety_identifier": "s"}, CHAT) == {"user": "u-1", "safety_identifier": "s"}
    with pytest.raises(ApiError) as caught:
        checked_body({"user": 7}, EMBEDDINGS)
    assert (caught.value.status, caught.value.param) == (400, "user")


def test_a_chat_parameter_sent_to_embeddings_is_named_as_one_of_the_chat_route() -> None:
    with pytest.raises(ApiError, match="it is one of /v1/chat/completions") as caught:
        checked_body({"input": "x", "messages": []}, EMBEDDINGS)
    assert (caught.value.param, caught.value.code) == ("messages", "unknown_parameter")


def test_a_parameter_of_the_other_route_is_named_as_such() -> None:
    with pytest.raises(ApiError, match="it is one of /v1/chat/completions") as caught:
        checked_body({"messages": []}, COMPLETIONS)
    assert caught.value.param == "messages"
