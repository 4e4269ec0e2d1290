"""``tritonft repo`` writes a checked repository, and refuses bad input with a clear message."""

from __future__ import annotations

from pathlib import Path

import pytest

from tritonft.cli import main
from tritonft.repo.naming import RepoNames
from tritonft.spec import Family

from .conftest import make_spec, repo_command_inputs, write_checkpoint


def test_repo_command_writes_and_checks_a_repository(
    tmp_path: Path, gpt_tokenizer_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inputs = repo_command_inputs(tmp_path, Family.GPTJ)
    code = main(
        [
            "repo",
            "--spec",
            str(inputs.spec_file),
            "--checkpoint",
            str(inputs.version_dir),
            "--tokenizer",
            str(gpt_tokenizer_dir),
            "--out",
            str(inputs.out),
            "--require-checkpoint",
        ]
    )
    printed = capsys.readouterr().out
    assert code == 0
    assert "repository check: OK" in printed and "tokenizer files: tokenizer.json" in printed
    assert (inputs.out / "gpt-j-6b-preprocessing/1/tokenizer.json").read_bytes() == (
        gpt_tokenizer_dir / "tokenizer.json"
    ).read_bytes()
    assert (inputs.version_dir / "2-gpu/config.ini").is_file()  # weights untouched


def test_checkpoint_for_another_tp_is_refused_and_nothing_written(
    tmp_path: Path, gpt_tokenizer_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = make_spec(Family.GPT2, tensor_parallel=4)
    (tmp_path / "spec.json").write_text(spec.to_json())
    write_checkpoint(tmp_path / "ckpt", make_spec(Family.GPT2, tensor_parallel=2))
    code = main(
        [
            "repo",
            "--spec",
            str(tmp_path / "spec.json"),
            "--checkpoint",
            str(tmp_path / "ckpt"),
            "--tokenizer",
            str(gpt_tokenizer_dir),
            "--out",
            str(tmp_path / "out"),
        ]
    )
    assert code == 1
    assert "holds 2-gpu but the model spec says tensor_parallel=4" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_unreadable_spec_names_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "spec.json").write_text("{not json")
    assert main(["repo", "--spec", str(tmp_path / "spec.json"), "--out", str(tmp_path / "out")]) == 1
    assert f"--spec {tmp_path / 'spec.json'}: model spec is not valid JSON" in capsys.readouterr().err


def test_rerender_keeps_weights_and_replaces_tokenizer_models(tmp_path: Path, gpt_tokenizer_dir: Path) -> None:
    from tritonft.repo import write_repository

    spec = make_spec(Family.GPT2)
    version_dir = tmp_path / RepoNames.of(spec).ft / "1"
    write_checkpoint(version_dir, spec)
    write_repository(spec, tmp_path, version_dir, tokenizer_dir=gpt_tokenizer_dir)
    stale = tmp_path / RepoNames.of(spec).preprocessing / "1" / "stale.txt"
    stale.write_text("left over")
    write_repository(spec, tmp_path, version_dir, tokenizer_dir=gpt_tokenizer_dir)
    assert not stale.exists()
    assert (version_dir / "1-gpu" / "config.ini").is_file()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tritonft-")]


def test_missing_tokenizer_files_are_refused_before_writing(tmp_path: Path) -> None:
    from tritonft.errors import UserError
    from tritonft.repo import write_repository

    with pytest.raises(UserError, match="no tokenizer files in"):
        write_repository(make_spec(Family.T5), tmp_path / "out", tokenizer_dir=tmp_path)
    assert not (tmp_path / "out").exists()
