"""OpenAI's published API schemas (``openai/openai-openapi``'s ``openapi.json``, the parts the gateway serves), read
from ``../shared/reference/openai/schemas.json`` beside the repository (never committed into it), as JSON Schema
validators.

OpenAI's document is OpenAPI 3.1 but still says ``nullable: true`` in places: read here as "or null". The one other
reading of OpenAI's own API rather than its document is :func:`Schemas.chunk_validator`'s (``finish_reason: null`` in
a completion stream chunk) and :func:`Schemas.validator`'s ``base64`` (an embedding as the base64 string
``encoding_format: base64`` asks for), each named where it is used.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator  # type: ignore[import-untyped]  # kubernetes-validate's; no stubs in the lock

ROOT = Path(__file__).resolve().parents[3]
RELATIVE = Path("shared/reference/openai/schemas.json")
"""Where the schemas are, relative to the parent of the repository's root (``../shared/...``)."""


def main_checkout(root: Path) -> Path | None:
    """A git worktree's main checkout (its ``.git`` is a file naming ``<main>/.git/worktrees/<name>``), else None."""
    marker = root / ".git"
    if not marker.is_file():
        return None
    gitdir = Path(marker.read_text(encoding="utf-8").removeprefix("gitdir:").strip())
    return gitdir.parents[2] if gitdir.parent.name == "worktrees" else None


def schemas_path(root: Path = ROOT) -> Path:
    """``../shared/reference/openai/schemas.json`` beside ``root`` (for a git worktree: beside its main checkout);
    :class:`FileNotFoundError` naming the places looked at and what to put there."""
    main = main_checkout(root)
    candidates = [root.parent / RELATIVE] + ([main.parent / RELATIVE] if main is not None else [])
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(
        f"OpenAI's API schemas are not at {' nor '.join(str(c) for c in candidates)}: put the shared reference "
        "folder beside the clone (../shared/reference/openai/schemas.json, OpenAI's openapi.json components), as CI "
        "and every development machine have it"
    )


def _or_null(node: Any) -> Any:
    """``node`` with every OpenAPI 3.0 ``nullable: true`` turned into JSON Schema's "or null"."""
    if isinstance(node, list):
        return [_or_null(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _or_null(value) for key, value in node.items() if key != "nullable"}
    if node.get("nullable") is True:
        return {"anyOf": [out, {"type": "null"}]}
    return out


@dataclass(frozen=True)
class Schemas:
    """OpenAI's ``components.schemas``, nullable read as "or null"."""

    document: dict[str, Any]

    @property
    def schemas(self) -> dict[str, Any]:
        return dict(self.document["components"]["schemas"])

    def resolve(self, node: Any) -> Any:
        """``node``, or what its ``$ref`` points to."""
        while isinstance(node, dict) and "$ref" in node:
            node = self.schemas[node["$ref"].rsplit("/", 1)[-1]]
        return node

    def properties(self, name: str) -> dict[str, Any]:
        """The top-level fields of schema ``name`` (``allOf`` parts merged, later ones last), each field's schema."""

        def merged(node: Any) -> dict[str, Any]:
            node = self.resolve(node)
            out: dict[str, Any] = {}
            for part in node.get("allOf", []):
                out.update(merged(part))
            out.update(node.get("properties", {}))
            return out

        return merged(self.schemas[name])

    def required(self, name: str) -> set[str]:
        def needed(node: Any) -> set[str]:
            node = self.resolve(node)
            return set(node.get("required", [])).union(*(needed(p) for p in node.get("allOf", [])))

        return needed(self.schemas[name])

    def branches(self, name: str) -> Iterator[tuple[str, Any]]:
        """The ``oneOf``/``anyOf`` alternatives of schema ``name`` as (schema name or "", schema)."""
        node = self.schemas[name]
        for branch in node.get("oneOf", node.get("anyOf", [])):
            yield (branch["$ref"].rsplit("/", 1)[-1] if "$ref" in branch else ""), self.resolve(branch)

    def validator(self, name: str, *, base64: bool = False) -> Draft202012Validator:
        """A validator of schema ``name``. ``base64``: an ``Embedding.embedding`` may be a string, what OpenAI's own
        API answers ``encoding_format: base64`` with (its document types the field as an array of numbers only)."""
        document = copy.deepcopy(self.document)
        if base64:
            embedding = document["components"]["schemas"]["Embedding"]["properties"]["embedding"]
            document["components"]["schemas"]["Embedding"]["properties"]["embedding"] = {
                "anyOf": [embedding, {"type": "string", "contentEncoding": "base64"}]
            }
        return Draft202012Validator({**document, "$ref": f"#/components/schemas/{name}"})

    def chunk_validator(self, name: str) -> Draft202012Validator:
        """A validator of a stream chunk of schema ``name``: ``finish_reason`` may also be ``null``, what OpenAI's own
        API sends in every chunk but a choice's last (``CreateCompletionResponse``, the completions route's chunk
        schema, types it as a string only; ``CreateChatCompletionStreamResponse`` already allows it)."""
        document = copy.deepcopy(self.document)
        choice = document["components"]["schemas"][name]["properties"]["choices"]["items"]
        finish = choice["properties"]["finish_reason"]
        choice["properties"]["finish_reason"] = {"anyOf": [finish, {"type": "null"}]}
        return Draft202012Validator({**document, "$ref": f"#/components/schemas/{name}"})


@cache
def load(path: Path | None = None) -> Schemas:
    """The schemas at ``path`` (default :func:`schemas_path`), ``nullable`` read as "or null"."""
    raw = json.loads((path or schemas_path()).read_text(encoding="utf-8"))
    return Schemas(_or_null(raw))


def violations(validator: Draft202012Validator, body: Any) -> list[str]:
    """Every way ``body`` breaks ``validator``'s schema, as ``path: message`` lines (empty: it conforms)."""
    return [
        f"{'/'.join(str(p) for p in error.absolute_path) or '(body)'}: {error.message}"
        for error in sorted(validator.iter_errors(body), key=lambda e: list(map(str, e.absolute_path)))
    ]
