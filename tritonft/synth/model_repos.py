"""Synth stage: render each model's Triton repository so a reviewer sees the exact ``config.pbtxt`` in a PR.

Written to ``model_repos/<model>/`` of the synth output and checked with the ensemble checker; a repository that
fails the check fails the synth (nothing is written). The models are read from the plan itself: each conversion Job's
spec ConfigMap holds the exact ``ModelSpec`` the Job renders the repository from, so what a reviewer sees is what the
cluster would render (and this runtime stage needs nothing of the infrastructure's settings).
"""

from __future__ import annotations

from pathlib import Path

from tritonft.engines import engine_for
from tritonft.errors import UserError
from tritonft.repo.check import check_repository
from tritonft.spec import SPEC_JSON, ModelSpec
from tritonft.synth.manifests import Manifest
from tritonft.synth.result import SynthResult

MODEL_ROOT = "/models"
"""Where Triton pods mount the model store (``TritonService`` mounts the claim there)."""
CONVERSION_COMPONENT = "conversion"


def planned_models(manifests: list[Manifest]) -> list[ModelSpec]:
    """The ``ModelSpec`` of every model the plan converts, by name: its conversion Job's spec ConfigMap."""
    specs: dict[str, ModelSpec] = {}
    for manifest in manifests:
        labels = manifest.body.get("metadata", {}).get("labels", {})
        data = manifest.body.get("data") or {}
        conversion = manifest.kind == "ConfigMap" and labels.get("app.kubernetes.io/component") == CONVERSION_COMPONENT
        if conversion and SPEC_JSON in data:
            spec = ModelSpec.from_json(data[SPEC_JSON])
            specs[spec.name] = spec
    return [specs[name] for name in sorted(specs)]


def write_model_repositories(result: SynthResult, staging: Path) -> None:
    for spec in planned_models(result.manifests):
        folder = staging / "model_repos" / spec.name
        for relative, content in sorted(engine_for(spec.family).repository_files(spec, model_root=MODEL_ROOT).items()):
            path = folder / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)
            result.extra_files.append(str(path.relative_to(staging)))
        problems = check_repository(folder)
        if problems:
            raise UserError(f"rendered repository of model {spec.name!r} fails the ensemble check:", problems)
