"""Read ``stacks/Pulumi.<stack>.yaml`` the way the Pulumi CLI hands it to a program.

Every value becomes a string (objects and lists as JSON), keys stay fully qualified (``triton-ft:models``).
``secure:`` values are opaque ciphertext: they are passed through as-is and their keys are marked secret, so no
passphrase is needed and the plaintext never exists here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tritonft.errors import UserError


@dataclass(frozen=True)
class StackConfig:
    """One stack file's configuration, as the engine would receive it."""

    project: str
    stack: str
    path: Path
    values: dict[str, str]
    secret_keys: frozenset[str]


def find_project_root(start: Path) -> Path:
    """The nearest directory at or above ``start`` holding ``Pulumi.yaml``."""
    for folder in (start, *start.parents):
        if (folder / "Pulumi.yaml").is_file():
            return folder
    raise UserError(f"no Pulumi.yaml found in {start} or above; run from the project or pass --project-dir")


def read_project(root: Path) -> dict[str, Any]:
    data = yaml.safe_load((root / "Pulumi.yaml").read_text())
    if not isinstance(data, dict) or "name" not in data:
        raise UserError(f"{root / 'Pulumi.yaml'} is not a Pulumi project file (no `name`)")
    return data


def available_stacks(root: Path, project: dict[str, Any]) -> list[str]:
    folder = root / str(project.get("stackConfigDir") or ".")
    return sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in folder.glob("Pulumi.*.yaml"))


def read_stack(root: Path, stack: str) -> StackConfig:
    """Load one stack's config file; a missing stack is a UserError naming the ones that exist."""
    project = read_project(root)
    folder = root / str(project.get("stackConfigDir") or ".")
    path = folder / f"Pulumi.{stack}.yaml"
    if not path.is_file():
        known = ", ".join(available_stacks(root, project)) or "none"
        raise UserError(f"stack {stack!r} has no config file {path}; stacks here: {known}")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise UserError(f"{path} is not valid YAML: {exc}") from exc
    config = data.get("config") or {}
    if not isinstance(config, dict):
        raise UserError(f"{path}: `config` must be a mapping of keys to values")
    values: dict[str, str] = {}
    secrets: set[str] = set()
    name = str(project["name"])
    for key, value in config.items():
        full = key if ":" in key else f"{name}:{key}"
        if isinstance(value, dict) and set(value) == {"secure"}:
            values[full] = str(value["secure"])
            secrets.add(full)
        else:
            values[full] = as_cli_string(value)
    return StackConfig(name, stack, path, values, frozenset(secrets))


def as_cli_string(value: Any) -> str:
    """A YAML value as the CLI passes it to the program: strings verbatim, everything else as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value)
