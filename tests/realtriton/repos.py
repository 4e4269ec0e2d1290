"""Served repositories for the real-Triton tests: a stack's model specs rendered with a trained tokenizer, the FT
step replaced by the stand-in (``ft_standin``)."""

from __future__ import annotations

from pathlib import Path

from components.settings import load_settings
from tests.realtriton.ft_standin import standin_all
from tritonft.repo.render import write_repository
from tritonft.spec import Family, ModelSpec
from tritonft.synth.stackfile import read_stack

ROOT = Path(__file__).resolve().parents[2]


def stack_specs(stack: str) -> list[ModelSpec]:
    """The model specs of ``stacks/Pulumi.<stack>.yaml``, validated as the program validates them."""
    config = read_stack(ROOT, stack)
    prefix = f"{config.project}:"
    values = {k[len(prefix) :]: v for k, v in config.values.items() if k.startswith(prefix)}
    secrets = {k[len(prefix) :] for k in config.secret_keys if k.startswith(prefix)}
    return list(load_settings(values, project=config.project, stack=stack, secret_keys=secrets).models)


def serve_ready_repository(specs: list[ModelSpec], out: Path, tokenizers: dict[Family, Path]) -> Path:
    """Render every spec into the repository ``out`` (as Triton sees it: ``model_root`` is ``out``) with the
    family's tokenizer, then stand in for each FT step. Returns ``out``."""
    for spec in specs:
        write_repository(spec, out, tokenizer_dir=tokenizers[spec.family], model_root=str(out))
    standin_all(out)
    return out
