"""A stack file read as the Pulumi CLI reads it: with Go's ``gopkg.in/yaml.v3``, not with PyYAML's YAML 1.1.

The two disagree on files a user can write, and ``tritonft synth`` must not accept what ``pulumi up`` refuses nor read
a value otherwise than the program will get it. The differences reproduced here, from yaml.v3's sources (v3 branch of
``go-yaml/yaml``):

* **A key written twice** in one mapping is an error: ``decode.go:767-777`` (``d.uniqueKeys``, on by default,
  ``decode.go:344``) appends ``line N: mapping key "k" already defined at line M`` for every repeat, and the decode
  fails with all of them. PyYAML silently keeps the last value.
* **Plain scalars resolve by YAML 1.2's core schema** (``resolve.go:47-61`` and ``resolve.go:170-260``): only
  ``true``/``True``/``TRUE`` and ``false``/``False``/``FALSE`` are booleans (YAML 1.1's ``yes``/``no``/``on``/
  ``off`` stay strings when decoded into an untyped value: ``decode.go:683-693`` converts them only into a Go
  ``bool``); numbers are what Go's ``strconv.ParseInt(s, 0, 64)`` / ``ParseUint`` accept after removing ``_``
  (``0x1F``, ``0o17``, ``0b101``, ``017``) or match ``yamlStyleFloat`` (``resolve.go:124``: ``1e3`` is a float,
  PyYAML reads it as a string); ``1:20`` is a string (PyYAML: sexagesimal 80). Date-like scalars are kept as their
  text here (yaml.v3 makes a time of them; no configuration key takes one, and PyYAML's ``date`` would not even
  serialise to the JSON the program receives).

Only values inside objects and lists are affected: a top-level scalar reaches the program as its literal text either
way (``tritonft.synth.cli_rules.stack_values``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import yaml

_PLAIN = "tag:tritonft.dev,2026:plain"
_NULLS = frozenset({"", "~", "null", "Null", "NULL"})
_BOOLS = {"true": True, "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False}
_SPECIAL_FLOATS = {
    **dict.fromkeys((".nan", ".NaN", ".NAN"), float("nan")),
    **dict.fromkeys((".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"), float("inf")),
    **dict.fromkeys(("-.inf", "-.Inf", "-.INF"), float("-inf")),
}
_YAML_STYLE_FLOAT = re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$")
_GO_INT = re.compile(r"^[-+]?(0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+|0[0-7]*|[1-9][0-9]*)$")
_INT64 = (-(2**63), 2**64 - 1)  # ParseInt, then ParseUint


def go_resolve(text: str) -> Any:
    """The value yaml.v3 gives a plain (unquoted, untagged) scalar decoded into an untyped Go value."""
    if text in _NULLS:
        return None
    if text in _BOOLS:
        return _BOOLS[text]
    if text in _SPECIAL_FLOATS:
        return _SPECIAL_FLOATS[text]
    if not text or text[0] not in "0123456789+-.":
        return text
    plain = text.replace("_", "")
    if _GO_INT.match(plain):
        sign, digits = (-1, plain[1:]) if plain[0] == "-" else (1, plain.lstrip("+"))
        base = 8 if len(digits) > 1 and digits[0] == "0" and digits[1] in "01234567" else 0
        value = sign * int(digits, base)
        if _INT64[0] <= value <= _INT64[1]:
            return value
    if _YAML_STYLE_FLOAT.match(plain):
        return float(plain)
    return text


class GoYamlLoader(yaml.SafeLoader):
    """PyYAML's safe loader with yaml.v3's resolution of plain scalars (:func:`go_resolve`)."""


GoYamlLoader.yaml_implicit_resolvers = {}
GoYamlLoader.add_implicit_resolver("tag:yaml.org,2002:merge", re.compile(r"^<<$"), ["<"])
GoYamlLoader.add_implicit_resolver(_PLAIN, re.compile(r"^$"), [""])
GoYamlLoader.add_implicit_resolver(_PLAIN, re.compile(r".*", re.DOTALL), None)


def _construct_plain(loader: GoYamlLoader, node: yaml.Node) -> Any:
    assert isinstance(node, yaml.ScalarNode)
    return go_resolve(str(loader.construct_scalar(node)))


GoYamlLoader.add_constructor(_PLAIN, _construct_plain)


def load(text: str) -> Any:
    """The document as yaml.v3 decodes it into untyped values (call :func:`duplicate_keys` first)."""
    return yaml.load(text, Loader=GoYamlLoader)  # a SafeLoader subclass: no arbitrary objects


@dataclass(frozen=True)
class DuplicateKey:
    """A key written again in one mapping: where (``path`` of the mapping's key, as written) and on which lines."""

    path: str
    key: str
    line: int
    first_line: int

    @property
    def go_message(self) -> str:
        """yaml.v3's own words (``decode.go:776``)."""
        return f"line {self.line}: mapping key {json.dumps(self.key)} already defined at line {self.first_line}"


def duplicate_keys(root: yaml.Node | None) -> list[DuplicateKey]:
    """Every repeated key of every mapping under ``root`` (a composed document), in document order."""
    return sorted(_duplicates(root, ""), key=lambda d: d.line) if root is not None else []


def _duplicates(node: yaml.Node, path: str) -> Iterator[DuplicateKey]:
    if isinstance(node, yaml.MappingNode):
        seen: dict[tuple[type, str], int] = {}
        for key_node, value_node in node.value:
            key = str(key_node.value) if isinstance(key_node, yaml.ScalarNode) else ""
            ident = (type(key_node), key)
            line = key_node.start_mark.line + 1
            if isinstance(key_node, yaml.ScalarNode) and ident in seen:
                yield DuplicateKey(f"{path}.{key}" if path else key, key, line, seen[ident])
            seen.setdefault(ident, line)
            yield from _duplicates(value_node, f"{path}.{key}" if path else key)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            yield from _duplicates(item, f"{path}[{index}]")
