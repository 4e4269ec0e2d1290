"""Served repositories for the real-Triton tests: a stack's model specs rendered with a trained tokenizer, the FT
step replaced by the stand-in (``ft_standin``)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from components.settings import load_settings
from tests.tritonft.repo.conftest import make_spec
from tritonft.cli import main as tritonft_main
from tritonft.repo.render import write_repository
from tritonft.spec import Family, ModelSpec
from tritonft.standin import standin_all
from tritonft.synth.stackfile import read_stack

ROOT = Path(__file__).resolve().parents[3]


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


def _matrix() -> tuple[ModelSpec, ...]:
    specs = [
        make_spec(family, name=f"{family.value}-tp{tp}", tensor_parallel=tp, max_input_len=64, max_output_len=32)
        for family in (Family.T5, Family.GPT2, Family.GPTJ)
        for tp in (1, 2)
    ]
    specs.append(replace(specs[2], name="gpt2-stream", decoupled=True))
    return tuple(specs)


MATRIX = _matrix()
"""What the matrix repository serves: every family at TP 1 and 2 and a streaming (decoupled) GPT-2."""
PROBE_MODEL = "gpt2-tp1"
"""The model of the probe server (``probe_triton``): its stand-in answers the prompt's tokens reversed."""


def matrix_spec(name: str) -> ModelSpec:
    return next(spec for spec in MATRIX if spec.name == name)


def render_with_cli(spec: ModelSpec, out: Path, tokenizer_dir: Path, scratch: Path, *extra: str) -> None:
    """``tritonft repo --spec ... --tokenizer ... --out OUT --model-root OUT [EXTRA...]`` (the command the Job
    runs)."""
    spec_path = scratch / f"{spec.name}.json"
    spec_path.write_text(spec.to_json())
    args = ["repo", "--spec", str(spec_path), "--tokenizer", str(tokenizer_dir), "--out", str(out), *extra]
    code = tritonft_main([*args, "--model-root", str(out)])
    if code != 0:
        raise RuntimeError(f"tritonft {' '.join(args)} exited with {code}")
