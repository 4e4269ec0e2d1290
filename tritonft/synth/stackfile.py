"""Read ``stacks/Pulumi.<stack>.yaml`` the way the Pulumi CLI hands it to a program.

The CLI's own rules are applied first (:mod:`tritonft.synth.cli_rules`): scalars keep their literal text, objects
and lists become JSON, ``Pulumi.yaml``'s declared defaults fill unset keys, and a missing or mistyped declared key
stops the run with the CLI's message. Keys stay fully qualified (``triton-ft:models``).
``secure:`` values are opaque ciphertext: they are passed through as-is and their keys are marked secret, so no
passphrase is needed and the plaintext never exists here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tritonft.errors import UserError
from tritonft.synth.cli_rules import CliRuleError, CliValue, DuplicateKeysError, merge_project_config, stack_values
from tritonft.synth.go_yaml import DuplicateKey, duplicate_keys


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
    text = (root / "Pulumi.yaml").read_text()
    duplicates = duplicate_keys(yaml.compose(text))
    if duplicates:
        raise UserError(
            f"{root / 'Pulumi.yaml'}: the Pulumi CLI refuses this project file: its YAML reader (Go's yaml.v3) allows "
            "each key once per mapping:",
            [
                f"{d.path}: written again on line {d.line} (first on line {d.first_line}); keep one of them "
                f"(yaml.v3: {d.go_message})"
                for d in duplicates
            ],
        )
    data = yaml.safe_load(text)
    if not isinstance(data, dict) or "name" not in data:
        raise UserError(f"{root / 'Pulumi.yaml'} is not a Pulumi project file (no `name`)")
    return data


def available_stacks(root: Path, project: dict[str, Any]) -> list[str]:
    folder = root / str(project.get("stackConfigDir") or ".")
    return sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in folder.glob("Pulumi.*.yaml"))


ASSUMED_SECRET = "v1:ASSUMED-AT-DEPLOY"
"""The ciphertext an assumed secret is planned with (opaque, as every ``secure:`` value is to synth)."""


def read_stack(root: Path, stack: str, assume_secrets: tuple[str, ...] = ()) -> StackConfig:
    """Load one stack's config file; a missing stack is a UserError naming the ones that exist.

    ``assume_secrets``: stack keys (without the project prefix) planned as set, as secrets, when the file lacks them:
    what CI's ``stack-config.sh`` sets on its copy of the stack file before every preview and ``up`` (``hfToken`` from
    the ``HF_TOKEN`` repository secret). Their values are never read: a placeholder ciphertext."""
    project = read_project(root)
    folder = root / str(project.get("stackConfigDir") or ".")
    path = folder / f"Pulumi.{stack}.yaml"
    if not path.is_file():
        known = ", ".join(available_stacks(root, project)) or "none"
        raise UserError(f"stack {stack!r} has no config file {path}; stacks here: {known}")
    try:
        raw = stack_values(path.read_text())
    except yaml.YAMLError as exc:
        raise UserError(f"{path} is not valid YAML: {exc}") from exc
    except DuplicateKeysError as exc:
        raise UserError(
            f"{path}: the Pulumi CLI refuses this stack file: its YAML reader (Go's yaml.v3) allows each key once "
            "per mapping:",
            [_duplicate_problem(str(project["name"]), d) for d in exc.duplicates],
        ) from None
    except CliRuleError as exc:
        raise UserError(f"{path}: {exc}") from None
    name = str(project["name"])
    for key in assume_secrets:
        if f"{name}:{key}" not in raw and key not in raw:
            raw = {**raw, f"{name}:{key}": CliValue(ASSUMED_SECRET, secure=True)}
    try:
        merged = merge_project_config(project, stack, raw)
    except CliRuleError as exc:
        raise UserError(f"error: validating stack config: {exc} (the Pulumi CLI stops here; {_FIX})") from None
    values = {key: value.text for key, value in merged.items()}
    secrets = {key for key, value in merged.items() if value.secure}
    return StackConfig(str(project["name"]), stack, path, values, frozenset(secrets))


def _duplicate_problem(project: str, duplicate: DuplicateKey) -> str:
    """``models[1].maxOutputLen: written again on line 30 ...``: the path as the settings name it (under
    ``config:``, without the project prefix), where, and yaml.v3's own message."""
    path = duplicate.path.removeprefix("config.").removeprefix(f"{project}:")
    return (
        f"{path}: written again on line {duplicate.line} (first on line {duplicate.first_line}); keep one of them "
        f"(yaml.v3: {duplicate.go_message})"
    )


_FIX = "set the key in the stack file, or see the configuration reference in README.md"
