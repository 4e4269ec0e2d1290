"""The conversion Job's script and its reference Job's, run for real with a stand-in ``tritonft`` on PATH, on one
store directory (as both Jobs mount the one model store)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from components.common.layout import model_paths
from components.models.conversion_spec import COMPLETE_MARKER, CONVERT_SCRIPT, REFERENCE_SCRIPT, script_env
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
  repo) mkdir -p "$out/gpt-j-6b" && echo cfg > "$out/gpt-j-6b/config.pbtxt"
    # The other Job renaming its copy into place while this one renders (RACE names it).
    if [ -n "${RACE:-}" ]; then mkdir -p "$RACE/gpt-j-6b" && echo other > "$RACE/gpt-j-6b/config.pbtxt" \
      && touch "$RACE/.tritonft-complete" "$RACE/judge-reference.json"; fi ;;
  reference) echo '{"format": 1}' > "$out.partial" && mv "$out.partial" "$out" ;;
esac
"""


def _run(
    tmp_path: Path,
    fail_at: str = "",
    verify: bool = False,
    *,
    script: str = CONVERT_SCRIPT,
    referenced: bool = True,
    timeout: float = 60,
    race: bool = False,
) -> subprocess.CompletedProcess[str]:
    """Run ``script``; the conversion's, by default after its reference Job's script has run (``referenced``)."""
    if script == CONVERT_SCRIPT and referenced:
        done = _run(tmp_path, script=REFERENCE_SCRIPT)
        assert done.returncode == 0, done.stderr
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "tritonft"
    fake.write_text(FAKE_TRITONFT)
    fake.chmod(0o755)
    paths = model_paths(GPTJ_6B, CONVERTER)
    env = {
        e["name"]: e["value"]
        for e in script_env(
            GPTJ_6B,
            paths,
            verify_generation=verify,
            bleu_threshold=12.5,
            reference_job="ref-job",
            conversion_job="conv-job",
        )
    }
    root = tmp_path / "store"
    env |= {
        "CHECKPOINT_DIR": str(root) + paths.checkpoint_dir,
        "REPOSITORY_DIR": str(root) + paths.repository_dir,
        "JUDGE_REFERENCE": str(root) + paths.judge_reference,
        "SCRATCH": str(tmp_path / "scratch"),
        "HOSTNAME": "pod-1",
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "CALLS": str(tmp_path / "calls"),
        "FAIL_AT": fail_at,
        **({"RACE": str(root) + paths.repository_dir} if race else {}),
    }
    return subprocess.run(
        ["/bin/sh", "-c", script],
        check=False,
        env=env,
        cwd=tmp_path,  # anything written to a relative path lands in the test's own directory
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _calls(tmp_path: Path) -> list[str]:
    path = tmp_path / "calls"
    return path.read_text().splitlines() if path.exists() else []


def _store(tmp_path: Path) -> tuple[Path, Path]:
    paths = model_paths(GPTJ_6B, CONVERTER)
    root = tmp_path / "store"
    return Path(str(root) + paths.checkpoint_dir), Path(str(root) + paths.repository_dir)


def _reference(tmp_path: Path) -> Path:
    return Path(str(tmp_path / "store") + model_paths(GPTJ_6B, CONVERTER).judge_reference)


def test_a_fresh_run_downloads_converts_renders_and_publishes_both_directories(tmp_path):
    proc = _run(tmp_path)
    assert proc.returncode == 0, proc.stderr
    ckpt, repo = _store(tmp_path)
    calls = _calls(tmp_path)
    assert [c.split()[0] for c in calls] == ["download", "reference", "download", "convert", "repo"]
    assert f"--tp {GPTJ_6B.tensor_parallel} --dtype fp16" in calls[3]
    assert (ckpt / "4-gpu" / "config.ini").exists() and (ckpt / COMPLETE_MARKER).exists()
    assert (ckpt / "tokenizer" / "spiece.model").read_text() == "sp\n", "tokenizer files outlive the scratch"
    repo_call = calls[4]
    assert f"--tokenizer {ckpt}/tokenizer" in repo_call
    assert f"--model-root {repo} --checkpoint-path {ckpt}/4-gpu" in repo_call
    assert f"--judge-reference {_reference(tmp_path)}" in repo_call
    assert (repo / REFERENCE_FILE).read_text() == _reference(tmp_path).read_text(), "a copy beside the repository"
    assert (repo / "gpt-j-6b" / "config.pbtxt").exists() and (repo / COMPLETE_MARKER).exists()
    assert not list(ckpt.parent.glob("*.partial-*")) and not list(repo.parent.glob("*.partial-*"))


def test_a_rerun_after_completion_does_nothing(tmp_path):
    assert _run(tmp_path).returncode == 0
    (tmp_path / "calls").unlink()
    proc = _run(tmp_path, referenced=False)
    again = _run(tmp_path, script=REFERENCE_SCRIPT)
    assert proc.returncode == 0 and again.returncode == 0
    assert _calls(tmp_path) == []
    assert "nothing to do" in proc.stdout and "nothing to do" in again.stdout


def test_a_complete_checkpoint_is_not_downloaded_again(tmp_path):
    assert _run(tmp_path).returncode == 0
    _, repo = _store(tmp_path)
    (repo / COMPLETE_MARKER).unlink()
    (tmp_path / "calls").unlink()
    assert _run(tmp_path, referenced=False).returncode == 0
    assert [c.split()[0] for c in _calls(tmp_path)] == ["repo"]


def test_the_generation_check_runs_on_the_unpublished_conversion_before_the_repository(tmp_path):
    proc = _run(tmp_path, verify=True)
    assert proc.returncode == 0, proc.stderr
    calls = _calls(tmp_path)
    assert [c.split()[0] for c in calls] == ["download", "reference", "download", "convert", "verify", "repo"]
    ckpt, _ = _store(tmp_path)
    partial = f"{ckpt}.partial-pod-1"
    assert calls[4] == f"verify {partial}/4-gpu --generate --tokenizer {partial}/tokenizer --bleu-threshold 12.5"


def test_without_the_generation_check_verify_is_not_run(tmp_path):
    assert _run(tmp_path, verify=False).returncode == 0
    assert "verify" not in [c.split()[0] for c in _calls(tmp_path)]


def test_the_reference_job_computes_the_judges_reference_from_its_own_download(tmp_path):
    proc = _run(tmp_path, script=REFERENCE_SCRIPT)
    assert proc.returncode == 0, proc.stderr
    scratch = tmp_path / "scratch"
    assert _calls(tmp_path) == [
        f"download --repo {GPTJ_6B.hf_repo} --revision {GPTJ_6B.revision} --dest {scratch}/hf",
        f"reference --input {scratch}/hf --spec /spec/spec.json --out {_reference(tmp_path)} "
        f"--work {scratch}/reference",
    ]
    assert _reference(tmp_path).exists()
    assert not (scratch / "hf").exists(), "the download is dropped once the reference is written"
    ckpt, repo = _store(tmp_path)
    assert not ckpt.exists() and not repo.exists(), "the reference Job writes nothing of the conversion's"


def test_a_conversion_done_before_the_reference_leaves_the_repository_to_the_reference_job(tmp_path):
    proc = _run(tmp_path, referenced=False)
    assert proc.returncode == 0, proc.stderr
    ckpt, repo = _store(tmp_path)
    assert (ckpt / COMPLETE_MARKER).exists(), "the conversion does not wait for the reference"
    assert not repo.exists(), "no repository without the judge's reference"
    assert "Job ref-job renders" in proc.stdout

    proc = _run(tmp_path, script=REFERENCE_SCRIPT)

    assert proc.returncode == 0, proc.stderr
    calls = _calls(tmp_path)
    assert [c.split()[0] for c in calls] == ["download", "convert", "download", "reference", "repo"]
    assert f"--judge-reference {_reference(tmp_path)}" in calls[4]
    assert f"--model-root {repo} --checkpoint-path {ckpt}/4-gpu" in calls[4]
    assert (repo / REFERENCE_FILE).read_text() == _reference(tmp_path).read_text()
    assert (repo / COMPLETE_MARKER).exists() and (repo / "gpt-j-6b" / "config.pbtxt").exists()
    assert not list(repo.parent.glob("*.partial-*"))


def test_a_reference_done_before_the_conversion_leaves_the_repository_to_the_conversion_job(tmp_path):
    proc = _run(tmp_path, script=REFERENCE_SCRIPT)
    assert "Job conv-job renders" in proc.stdout
    assert not _store(tmp_path)[1].exists()
    assert _run(tmp_path, referenced=False).returncode == 0
    assert (_store(tmp_path)[1] / REFERENCE_FILE).exists()


def test_the_job_that_finds_the_repository_published_meanwhile_keeps_that_copy(tmp_path):
    assert _run(tmp_path, referenced=False).returncode == 0  # the checkpoint; the reference is not there yet

    proc = _run(tmp_path, script=REFERENCE_SCRIPT, race=True)

    assert proc.returncode == 0, proc.stderr
    _, repo = _store(tmp_path)
    assert "published by the other Job meanwhile" in proc.stdout
    assert (repo / "gpt-j-6b" / "config.pbtxt").read_text() == "other\n", "the copy in place is kept, not replaced"
    assert not (repo / f"{repo.name}.partial-pod-1").exists(), "nothing renamed into it"
    assert not list(repo.parent.glob("*.partial-*"))


def test_a_repository_rendered_before_references_is_rendered_again_with_one(tmp_path):
    assert _run(tmp_path).returncode == 0
    ckpt, repo = _store(tmp_path)
    (repo / REFERENCE_FILE).unlink()
    weights = (ckpt / "4-gpu" / "config.ini").stat().st_mtime_ns
    (tmp_path / "calls").unlink()

    proc = _run(tmp_path, referenced=False)

    assert proc.returncode == 0, proc.stderr
    assert [c.split()[0] for c in _calls(tmp_path)] == ["repo"]
    assert (ckpt / "4-gpu" / "config.ini").stat().st_mtime_ns == weights, "the published weights are untouched"
    assert (repo / REFERENCE_FILE).exists()


@pytest.mark.parametrize("step", ["download", "reference"])
def test_a_failing_reference_step_fails_its_job_and_leaves_no_reference(tmp_path, step):
    proc = _run(tmp_path, fail_at=step, script=REFERENCE_SCRIPT)
    assert proc.returncode != 0
    assert not _reference(tmp_path).exists()


@pytest.mark.parametrize("step", ["download", "convert", "verify", "repo"])
def test_a_failing_step_fails_the_job_and_publishes_nothing_half_written(tmp_path, step):
    proc = _run(tmp_path, fail_at=step, verify=True)
    assert proc.returncode != 0
    ckpt, repo = _store(tmp_path)
    assert not repo.exists()
    if step != "repo":
        assert not ckpt.exists()
    else:
        assert (ckpt / COMPLETE_MARKER).exists()
