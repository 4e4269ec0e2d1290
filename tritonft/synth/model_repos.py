"""Synth stage: render each model's Triton repository so a reviewer sees the exact ``config.pbtxt`` in a PR.

Written to ``model_repos/<model>/`` of the synth output and checked with the ensemble checker; a repository that
fails the check fails the synth (nothing is written).
"""

from __future__ import annotations

from pathlib import Path

from components.settings import load_settings
from tritonft.engines import engine_for
from tritonft.errors import UserError
from tritonft.repo.check import check_repository
from tritonft.synth.run import SynthResult

MODEL_ROOT = "/models"
"""Where Triton pods mount the model store (``TritonService`` mounts the claim there)."""


def write_model_repositories(result: SynthResult, staging: Path) -> None:
    stack = result.stack
    prefix = f"{stack.project}:"
    values = {k[len(prefix) :]: v for k, v in stack.values.items() if k.startswith(prefix)}
    secret_keys = {k[len(prefix) :] for k in stack.secret_keys if k.startswith(prefix)}
    settings = load_settings(values, project=stack.project, stack=stack.stack, secret_keys=secret_keys)
    for spec in settings.models:
        folder = staging / "model_repos" / spec.name
        for relative, content in sorted(engine_for(spec.family).repository_files(spec, model_root=MODEL_ROOT).items()):
            path = folder / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)
            result.extra_files.append(str(path.relative_to(staging)))
        problems = check_repository(folder)
        if problems:
            raise UserError(f"rendered repository of model {spec.name!r} fails the ensemble check:", problems)
