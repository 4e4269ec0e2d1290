"""Read the stack's configuration from the Pulumi runtime (the only place that touches ``pulumi.Config``)."""

from __future__ import annotations

from typing import Any

import pulumi
from pulumi.runtime import config as runtime_config

from components.settings.load import load_settings
from components.settings.model import Settings


def stack_config(project: str) -> tuple[dict[str, Any], set[str]]:
    """Every ``<project>:<key>`` value (as the CLI passes it) and the set of keys that are secrets."""
    merged: dict[str, Any] = {**runtime_config.get_config_env(), **runtime_config.CONFIG.get()}
    prefix = f"{project}:"
    values = {k[len(prefix) :]: v for k, v in merged.items() if k.startswith(prefix)}
    secret_keys = {k for k in values if pulumi.runtime.is_config_secret(prefix + k)}
    secret_keys |= {k[len(prefix) :] for k in runtime_config.get_config_secret_keys_env() if k.startswith(prefix)}
    return values, secret_keys


def settings_from_pulumi() -> Settings:
    """Load and validate this stack's settings; raises ``UserError`` listing every problem."""
    project, stack = pulumi.get_project(), pulumi.get_stack()
    values, secret_keys = stack_config(project)
    return load_settings(
        values, project=project, stack=stack, secret_keys=secret_keys, source=f"stacks/Pulumi.{stack}.yaml"
    )
