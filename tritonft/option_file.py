"""Files named on the command line (``--spec``, ``--expected-answers``, ...), read with one kind of error.

Every failure is a ``UserError`` that starts with the option and the path, then says what is wrong with the file:
unreadable (with the system's reason), not JSON (with the parser's position), or not a valid model spec.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from tritonft.errors import UserError

if TYPE_CHECKING:
    from tritonft.spec import ModelSpec

T = TypeVar("T")


def read_text(option: str, path: Path) -> str:
    """The UTF-8 text of ``path``; ``UserError`` when it cannot be read."""
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"{option} {path}: cannot read it ({exc.strerror})") from exc
    except UnicodeDecodeError as exc:
        raise UserError(f"{option} {path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc


def read_json(option: str, path: Path) -> Any:
    """The parsed JSON of ``path``; ``UserError`` when it cannot be read or is not JSON."""
    return _parsed(option, path, json.loads, "not JSON: ")


def read_spec(option: str, path: Path) -> ModelSpec:
    """The ``ModelSpec`` in ``path``; ``UserError`` naming what is wrong with it."""
    from tritonft.spec import ModelSpec

    return _parsed(option, path, ModelSpec.from_json, "")


def _parsed(option: str, path: Path, parse: Callable[[str], T], problem: str) -> T:
    text = read_text(option, path)
    try:
        return parse(text)
    except ValueError as exc:
        raise UserError(f"{option} {path}: {problem}{exc}") from exc
