"""A stack's validated settings read straight from its stack file (no Pulumi engine): for ``tritonft preflight``
and the control-plane tests, which need the same settings the program would see."""

from __future__ import annotations

from pathlib import Path

from components.settings.load import load_settings
from components.settings.model import Settings
from tritonft.synth.stackfile import read_stack


def settings_from_stack_file(project_dir: Path, stack: str, assume_secrets: tuple[str, ...] = ()) -> Settings:
    """Read ``stacks/Pulumi.<stack>.yaml`` as the CLI would and validate it; raises ``UserError`` on problems.
    ``assume_secrets``: secrets CI sets before each deploy, taken as set (``tritonft.synth.stackfile.read_stack``)."""
    config = read_stack(project_dir, stack, assume_secrets)
    prefix = f"{config.project}:"
    values = {k[len(prefix) :]: v for k, v in config.values.items() if k.startswith(prefix)}
    secrets = {k[len(prefix) :] for k in config.secret_keys if k.startswith(prefix)}
    return load_settings(values, project=config.project, stack=stack, secret_keys=secrets, source=str(config.path))
