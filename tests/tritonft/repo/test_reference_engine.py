"""``tritonft repo --engine reference``: the same repository, with the model step run by tritonft.reference."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from google.protobuf import text_format  # type: ignore[import-untyped]  # no types-protobuf in the lock
from tritonclient.grpc import model_config_pb2 as mc

from tritonft.cli import main
from tritonft.repo.check import check_repository
from tritonft.repo.engine import (
    ENGINE_PARAMETER,
    REFERENCE_PACKAGE_FILES,
    Engine,
    is_reference,
    use_reference_engine,
)
from tritonft.repo.naming import RepoNames
from tritonft.repo.render import render_repository_files, write_repository
from tritonft.spec import Family

from .conftest import make_spec, repo_command_inputs


def parse(content: bytes) -> mc.ModelConfig:
    return text_format.Parse(content.decode(), mc.ModelConfig())


def test_the_model_step_keeps_the_ft_config_except_its_backend_and_engine_mark(family: Family) -> None:
    spec = make_spec(family, tensor_parallel=2, decoupled=family is Family.GPT2)
    ft_name = RepoNames.of(spec).ft
    ft = parse(render_repository_files(spec)[f"{ft_name}/config.pbtxt"])
    reference = parse(render_repository_files(spec, engine=Engine.REFERENCE)[f"{ft_name}/config.pbtxt"])

    assert (ft.backend, reference.backend) == ("fastertransformer", "python")
    assert reference.parameters[ENGINE_PARAMETER].string_value == "reference"
    assert is_reference(reference) and not is_reference(ft)
    reference.backend = ft.backend
    del reference.parameters[ENGINE_PARAMETER]
    assert reference == ft


def test_every_other_model_is_the_one_the_ft_engine_renders(family: Family) -> None:
    spec = make_spec(family)
    ft_files = render_repository_files(spec)
    reference_files = render_repository_files(spec, engine=Engine.REFERENCE)
    ft_name = RepoNames.of(spec).ft

    assert {k: v for k, v in reference_files.items() if not k.startswith(f"{ft_name}/")} == {
        k: v for k, v in ft_files.items() if not k.startswith(f"{ft_name}/")
    }


def test_the_model_step_ships_its_model_py_and_the_numpy_only_package_it_imports() -> None:
    spec = make_spec(Family.T5)
    files = render_repository_files(spec, engine=Engine.REFERENCE)
    version = f"{RepoNames.of(spec).ft}/1"

    assert b"class TritonPythonModel" in files[f"{version}/model.py"]
    shipped = sorted(k.removeprefix(f"{version}/tritonft/") for k in files if k.startswith(f"{version}/tritonft/"))
    assert shipped == sorted(REFERENCE_PACKAGE_FILES)


def test_the_shipped_package_imports_on_its_own_with_numpy_alone(tmp_path: Path) -> None:
    spec = make_spec(Family.GPTJ)
    version = tmp_path / RepoNames.of(spec).ft / "1"
    for relative, content in render_repository_files(spec, engine=Engine.REFERENCE).items():
        if relative.startswith(f"{RepoNames.of(spec).ft}/1/tritonft/"):
            (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / relative).write_bytes(content)
    script = (
        "import sys; sys.path.insert(0, sys.argv[1]);"
        "import tritonft.reference.serving, tritonft.reference;"
        "roots = {'tritonft', 'tokenizers', 'google', 'pulumi'};"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in roots);"
        "files = {m: sys.modules[m].__file__ for m in loaded if m.startswith('tritonft')};"
        "outside = [m for m, f in files.items() if not f.startswith(sys.argv[1])];"
        "print(loaded, outside)"
    )
    argv = [sys.executable, "-I", "-c", script, str(version)]
    done = subprocess.run(argv, capture_output=True, text=True, check=True)

    loaded, outside = done.stdout.rsplit("] [", 1)
    assert outside.strip() == "]", "every tritonft module comes from the model's own directory"
    assert "'tritonft.reference.serving'" in loaded and "tokenizers" not in loaded and "google" not in loaded


def test_the_repo_command_renders_the_reference_engine_and_the_check_accepts_it(
    tmp_path: Path, gpt_tokenizer_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inputs = repo_command_inputs(tmp_path, Family.GPT2)
    spec, out, version_dir = inputs.spec, inputs.out, inputs.version_dir
    args = ["repo", "--spec", str(inputs.spec_file), "--checkpoint", str(version_dir)]

    code = main([*args, "--tokenizer", str(gpt_tokenizer_dir), "--out", str(out), "--engine", "reference"])

    printed = capsys.readouterr().out
    assert code == 0, printed
    assert f"model step: tritonft's CPU reference of FasterTransformer (Python backend) in {spec.name}-ft" in printed
    assert "repository check: OK" in printed
    assert (version_dir / "model.py").is_file() and (version_dir / "2-gpu" / "config.ini").is_file()
    assert check_repository(out, require_checkpoint=True) == []


def test_a_written_ft_repository_can_be_switched_to_the_reference_engine_in_place(
    tmp_path: Path, t5_tokenizer_dir: Path
) -> None:
    spec = make_spec(Family.T5)
    ft_repo, switched_repo = tmp_path / "ft", tmp_path / "switched"
    write_repository(spec, ft_repo, tokenizer_dir=t5_tokenizer_dir)
    write_repository(spec, switched_repo, tokenizer_dir=t5_tokenizer_dir, engine=Engine.REFERENCE)
    copy = tmp_path / "copy"
    shutil.copytree(ft_repo, copy)

    assert use_reference_engine(copy) == [RepoNames.of(spec).ft]

    def body(path: Path) -> mc.ModelConfig:
        return parse(path.read_bytes())

    ft_config = f"{RepoNames.of(spec).ft}/config.pbtxt"
    assert body(copy / ft_config) == body(switched_repo / ft_config)
    files = sorted(p.relative_to(copy) for p in copy.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(switched_repo) for p in switched_repo.rglob("*") if p.is_file())
    assert use_reference_engine(copy) == [], "a second switch finds no FT model left"
