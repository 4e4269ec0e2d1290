"""Requests generated from OpenAI's request schemas (not written by hand): for each field of a route's request
schema, the values its schema names or bounds (every enum value, each ``oneOf``/``anyOf`` branch, minimum and
maximum, default and example, ``null`` where nullable, an empty and a one-item list, an object with only its
required fields and with each optional one), each sent on a base request that the gateway serves. Only requests
that validate against the route's request schema are kept: each is a request OpenAI's own document allows.

:func:`verdict` says what the gateway must answer each one, from its parameter table
(:mod:`tritonft.gateway.parameters`): a refused field at a value that asks for something is a 400 naming it; any
other request is served (200) or refused with a 400/404 naming the field it varies, and never a 5xx.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from tests.tritonft.gateway.openai_schema import Schemas
from tritonft.gateway.parameters import CHAT, COMPLETIONS, EMBEDDINGS, PARAMETERS

REQUEST_SCHEMAS = {
    COMPLETIONS: "CreateCompletionRequest",
    CHAT: "CreateChatCompletionRequest",
    EMBEDDINGS: "CreateEmbeddingRequest",
}
RESPONSE_SCHEMAS = {
    COMPLETIONS: "CreateCompletionResponse",
    CHAT: "CreateChatCompletionResponse",
    EMBEDDINGS: "CreateEmbeddingResponse",
}
CHUNK_SCHEMAS = {COMPLETIONS: "CreateCompletionResponse", CHAT: "CreateChatCompletionStreamResponse"}
"""The completions route streams ``CreateCompletionResponse`` objects (OpenAI's document has no chunk schema of
its own for it)."""
MAX_SAMPLES = 48
"""Most values generated per field (enough for every enum and branch of the fields here)."""
MAX_DEPTH = 6
"""Lists and objects nested deeper than this are not generated; below :data:`VARIED_DEPTH` each of an object's
fields is varied (the fields of a request's own objects, e.g. a message, through all their values; deeper ones
through their first), deeper an object has its required fields only (at their first value)."""
VARIED_DEPTH = 4


def base_request(route: str, model: str) -> dict[str, Any]:
    """The smallest request of ``route`` the gateway serves: a short prompt, a few tokens."""
    if route == COMPLETIONS:
        return {"model": model, "prompt": "hello world", "max_tokens": 4}
    if route == CHAT:
        return {"model": model, "messages": [{"role": "user", "content": "hello world"}], "max_tokens": 4}
    return {"model": model, "input": "hello world"}


def _unique(values: list[Any]) -> list[Any]:
    seen: set[str] = set()
    out = []
    for value in values:
        key = json.dumps(value, sort_keys=True)
        if key not in seen:
            seen.add(key)
            out.append(value)
    return out


def _number(node: dict[str, Any], integer: bool) -> list[Any]:
    low, high = node.get("minimum"), node.get("maximum")
    values = [low, high, node.get("default"), node.get("example"), 1]
    if low is not None and high is not None and not integer:
        values.append((low + high) / 2)
    kept = [
        v
        for v in values
        if isinstance(v, int | float)
        and not isinstance(v, bool)
        and (low is None or v >= low)
        and (high is None or v <= high)
    ]
    return [int(v) for v in kept] if integer else kept


def samples(schemas: Schemas, node: Any, depth: int = 0) -> list[Any]:
    """Values ``node`` names or bounds (at most :data:`MAX_SAMPLES`); ``depth`` is how many lists and objects
    hold it."""
    node = schemas.resolve(node)
    if not isinstance(node, dict) or depth > MAX_DEPTH:
        return []
    out: list[Any] = []
    if "const" in node:
        out.append(node["const"])
    elif "enum" in node:
        out.extend(node["enum"])
    for key in ("oneOf", "anyOf"):
        for branch in node.get(key, []):
            out.extend(samples(schemas, branch, depth))
    kind = node.get("type")
    if "enum" not in node and "const" not in node:
        if kind == "null":
            out.append(None)
        elif kind == "boolean":
            out += [True, False]
        elif kind in ("integer", "number"):
            out += _number(node, kind == "integer")
        elif kind == "string":
            out.append(_string(node))
        elif kind == "array":
            out += _arrays(schemas, node, depth)
        elif kind == "object" or "properties" in node or "allOf" in node:
            out += _objects(schemas, node, depth)
    return _unique(out)[:MAX_SAMPLES]


def _string(node: dict[str, Any]) -> str:
    if node.get("format") == "uri":
        return "https://example.com/picture.png"
    for key in ("default", "example"):
        if isinstance(node.get(key), str) and node[key]:
            return str(node[key])
    return "hello"


def _arrays(schemas: Schemas, node: dict[str, Any], depth: int) -> list[Any]:
    """An empty list (when allowed), and a list of each sample of its items (as many as ``minItems`` asks)."""
    low = max(int(node.get("minItems", 0)), 0)
    out: list[Any] = [[]] if low == 0 else []
    for item in samples(schemas, node.get("items", {}), depth + 1):
        out.append([item] * max(low, 1))
    return out


def _objects(schemas: Schemas, node: dict[str, Any], depth: int) -> list[Any]:
    properties: dict[str, Any] = {}
    required: set[str] = set()
    for part in [*node.get("allOf", []), node]:
        resolved = schemas.resolve(part)
        properties.update(resolved.get("properties", {}))
        required |= set(resolved.get("required", []))
    if not properties:
        extra = node.get("additionalProperties")
        first = samples(schemas, extra, depth + 1)[:1] if isinstance(extra, dict) else []
        return [{}] + [{"key": value} for value in first]
    values = {name: samples(schemas, properties[name], depth + 1) for name in properties}
    if any(not values[name] for name in required):
        return []
    base = {name: values[name][0] for name in sorted(required)}
    out = [base]
    if depth < VARIED_DEPTH:
        for name in sorted(required):
            out += [base | {name: value} for value in values[name][1:]]
        for name in sorted(set(properties) - required):  # a message's own fields: every value
            out += [base | {name: value} for value in values[name][: None if depth <= 1 else 1]]
    return out


@dataclass(frozen=True)
class Case:
    """One generated request: the route, the field it varies and the value, and the whole body."""

    route: str
    field: str
    value: Any
    body: dict[str, Any]

    @property
    def streamed(self) -> bool:
        return self.body.get("stream") is True


def cases(schemas: Schemas, route: str, model: str) -> Iterator[Case]:
    """For each field of the route's request schema and each of its :func:`samples`, the base request with that
    field set to it; only those that validate against the request schema."""
    name = REQUEST_SCHEMAS[route]
    validator = schemas.validator(name)
    for field_name, node in sorted(schemas.properties(name).items()):
        for value in samples(schemas, node):
            body = base_request(route, model) | {field_name: value}
            if validator.is_valid(body):
                yield Case(route, field_name, value, body)


def streamed(case: Case, include_usage: bool) -> Case | None:
    """``case`` sent with ``stream: true`` (and ``stream_options.include_usage``); None for a case that varies the
    streaming fields themselves (it is sent as it is)."""
    if case.field in ("stream", "stream_options") or case.route == EMBEDDINGS:
        return None
    extra: dict[str, Any] = {"stream": True}
    if include_usage:
        extra["stream_options"] = {"include_usage": True}
    return Case(case.route, case.field, case.value, case.body | extra)


_TABLE = {(route, p.name): p for p in PARAMETERS for route in p.routes}


def refused(case: Case) -> bool:
    """The case sends a field the table refuses, at a value that asks for something (not null, not neutral)."""
    parameter = _TABLE.get((case.route, case.field))
    if parameter is None or parameter.supported or case.value is None:
        return False
    return not any(isinstance(case.value, bool) == isinstance(n, bool) and case.value == n for n in parameter.neutral)


def names_the_field(case: Case, param: Any) -> bool:
    """An error's ``param`` names the field ``case`` varies (``messages`` names ``messages[0].content`` too); a
    streamed case may be refused for the stream (``n`` > 1 cannot be streamed names ``n``, the field)."""
    if not isinstance(param, str):
        return False
    if param == case.field or param.startswith((f"{case.field}[", f"{case.field}.")):
        return True
    return case.streamed and param in ("stream", "stream_options")
