"""The conversion Job's script, run for real with a stand-in ``tritonft`` on PATH."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from components.common.layout import model_paths
from components.models.conversion_spec import COMPLETE_MARKER, CONVERT_SCRIPT, script_env
from tests.components.fixtures import CONVERTER, GPTJ_6B
from tritonft.probe.judge_reference import REFERENCE_FILE

FAKE_TRITONFT = """#!/bin/sh
echo "$*" >> "$CALLS"
if [ "$1" = "$FAIL_AT" ]; then echo "boom" >&2; exit 3; fi
command=$1; shift
# Flags by name, not position: a moved flag must not make the stand-in write somewhere else.
while [ $# -gt 1 ]; do
  case "$1" in --dest) dest=$2 ;; --output) output=$2 ;; --tp) tp=$2 ;; --out) out=$2 ;; esac
  shift
done
case "$command" in
  download) mkdir -p "$dest" && echo weights > "$dest/model.safetensors" && echo sp > "$dest/spiece.model" ;;
  convert) mkdir -p "$output/$tp-gpu" && echo ft > "$output/$tp-gpu/config.ini" ;;
  repo) mkdir -p "$out/gpt-j-6b" && echo cfg > "$out/gpt-j-6b/config.pbtxt" ;;
  reference) echo '{"format": 1}' > "$out" ;;
esac
"""


def _run(tmp_path: Path, fail_at: str = "", verify: bool = False) -> subprocess.CompletedProcess[str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "tritonft"
    fake.write_text(FAKE_TRITONFT)
    fake.chmod(0o755)
    paths = model_paths(GPTJ_6B, CONVERTER)
    env = {e["name"]: e["value"] for e in script_env(GPTJ_6B, paths, verify_generation=verify, bleu_threshold=12.5)}
    root = tmp_path / "store"
    env |= {
        "CHECKPOINT_DIR": str(root) + paths.checkpoint_dir,
        "REPOSITORY_DIR": str(root) + paths.repository_dir,
        "SCRATCH": str(tmp_path / "scratch"),
        "HOSTNAME": "pod-1",
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "CALLS": str(tmp_path / "calls"),
        "FAIL_AT": fail_at,
    }
    return subprocess.run(
        ["/bin/sh", "-c", CONVERT_SCRIPT],
        check=False,
        env=env,
        cwd=tmp_path,  # anything written to a relative path lands in the test's own directory
        capture_output=True,
        text=True,
        timeout=60,
    )


def _calls(tmp_path: Path) -> list[str]:
    path = tmp_path / "calls"
    return path.read_text().splitlines() if path.exists() else []


def _store(tmp_path: Path) -> tuple[Path, Path]:
    paths = model_paths(GPTJ_6B, CONVERTER)
    root = tmp_path / "store"
    return Path(str(root) + paths.checkpoint_dir), Path(str(root) + paths.repository_dir)


def test_a_fresh_run_downloads_converts_renders_and_publishes_both_directories(tmp_path):
    proc = _run(tmp_path)
    assert proc.returncode == 0, proc.stderr
    ckpt, repo = _store(tmp_path)
    assert [c.split()[0] for c in _calls(tmp_path)] == ["download", "convert", "reference", "repo"]
    assert f"--tp {GPTJ_6B.tensor_parallel} --dtype fp16" in _calls(tmp_path)[1]
    assert (ckpt / "4-gpu" / "config.ini").exists() and (ckpt / COMPLETE_MARKER).exists()
    assert (ckpt / "tokenizer" / "spiece.model").read_text() == "sp\n", "tokenizer files outlive the scratch"
    repo_call = _calls(tmp_path)[3]
    assert f"--tokenizer {ckpt}/tokenizer" in repo_call
    assert f"--model-root {repo} --checkpoint-path {ckpt}/4-gpu" in repo_call
    assert f"--judge-reference {ckpt}/{REFERENCE_FILE}" in repo_call
    assert (repo / REFERENCE_FILE).read_text() == (ckpt / REFERENCE_FILE).read_text(), "a copy beside the repository"
    assert (repo / "gpt-j-6b" / "config.pbtxt").exists() and (repo / COMPLETE_MARKER).exists()
    assert not list(ckpt.parent.glob("*.partial-*")) and not list(repo.parent.glob("*.partial-*"))


def test_a_rerun_after_completion_does_nothing(tmp_path):
    assert _run(tmp_path).returncode == 0
    (tmp_path / "calls").unlink()
    proc = _run(tmp_path)
    assert proc.returncode == 0
    assert _calls(tmp_path) == []
    assert "nothing to do" in proc.stdout


def test_a_complete_checkpoint_is_not_downloaded_again(tmp_path):
    assert _run(tmp_path).returncode == 0
    _, repo = _store(tmp_path)
    (repo / COMPLETE_MARKER).unlink()
    (tmp_path / "calls").unlink()
    assert _run(tmp_path).returncode == 0
    assert [c.split()[0] for c in _calls(tmp_path)] == ["repo"]


def test_the_generation_check_runs_on_the_unpublished_conversion_before_the_repository(tmp_path):
    proc = _run(tmp_path, verify=True)
    assert proc.returncode == 0, proc.stderr
    calls = _calls(tmp_path)
    assert [c.split()[0] for c in calls] == ["download", "convert", "verify", "reference", "repo"]
    ckpt, _ = _store(tmp_path)
    partial = f"{ckpt}.partial-pod-1"
    assert calls[2] == f"verify {partial}/4-gpu --generate --tokenizer {partial}/tokenizer --bleu-threshold 12.5"


def test_without_the_generation_check_verify_is_not_run(tmp_path):
    assert _run(tmp_path, verify=False).returncode == 0
    assert "verify" not in [c.split()[0] for c in _calls(tmp_path)]


def test_the_judges_reference_is_computed_from_the_download_and_published_with_the_checkpoint(tmp_path):
    assert _run(tmp_path).returncode == 0
    ckpt, _ = _store(tmp_path)
    call = _calls(tmp_path)[2]
    scratch = tmp_path / "scratch"
    partial = f"{ckpt}.partial-pod-1"
    assert call == (
        f"reference --input {scratch}/hf --spec /spec/spec.json --out {partial}/{REFERENCE_FILE} "
        f"--work {scratch}/reference"
    )
    assert (ckpt / REFERENCE_FILE).exists()


def test_a_store_written_before_references_gets_one_without_converting_again(tmp_path):
    assert _run(tmp_path).returncode == 0
    ckpt, repo = _store(tmp_path)
    (ckpt / REFERENCE_FILE).unlink()
    (repo / REFERENCE_FILE).unlink()
    weights = (ckpt / "4-gpu" / "config.ini").stat().st_mtime_ns
    (tmp_path / "calls").unlink()

    proc = _run(tmp_path)

    assert proc.returncode == 0, proc.stderr
    assert [c.split()[0] for c in _calls(tmp_path)] == ["download", "reference", "repo"]
    assert f"--out {ckpt}/{REFERENCE_FILE}" in _calls(tmp_path)[1]
    assert (ckpt / "4-gpu" / "config.ini").stat().st_mtime_ns == weights, "the published weights are untouched"
    assert (repo / REFERENCE_FILE).exists()


@pytest.mark.parametrize("step", ["download", "convert", "verify", "reference", "repo"])
def test_a_failing_step_fails_the_job_and_publishes_nothing_half_written(tmp_path, step):
    proc = _run(tmp_path, fail_at=step, verify=True)
    assert proc.returncode != 0
    ckpt, repo = _store(tmp_path)
    assert not repo.exists()
    if step != "repo":
        assert not ckpt.exists()
    else:
        assert (ckpt / COMPLETE_MARKER).exists()
