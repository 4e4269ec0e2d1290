"""``tritonft verify OUT/onnx``: an encoder conversion re-checked against its manifest, and (``--generate``) judged
on what ONNX Runtime answers from it, as the probe would judge the served model."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from tests.tritonft.encoder.conftest import MINILM
from tritonft.cli import main
from tritonft.encoder.verify import judge_encoder


def copy_of(converted: Path, tmp_path: Path) -> Path:
    target = tmp_path / "onnx"
    shutil.copytree(converted, target)
    return target


def test_a_fresh_encoder_conversion_matches_its_manifest(
    encoder_converted: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    converted = encoder_converted("bert-mean-normalized")
    assert main(["verify", str(converted)]) == 0
    assert f"ok: {converted}: model.onnx (" in capsys.readouterr().out


def test_the_real_minilm_conversion_answers_the_probes_sentences_in_the_right_order(
    encoder_converted: Callable[..., Path], minilm_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    converted = encoder_converted(MINILM)
    assert main(["verify", str(converted), "--generate", "--tokenizer", str(minilm_dir)]) == 0
    assert "6 embeddings of width 384, similarity order right" in capsys.readouterr().out


def test_a_classifier_conversion_answers_its_own_labels_with_scores_summing_to_one(
    encoder_converted: Callable[..., Path], encoder_checkpoint: Callable[[str], Path]
) -> None:
    judged = judge_encoder(encoder_converted("bert-classifier"), encoder_checkpoint("bert-classifier"))
    assert judged.verdict.ok, judged.verdict.detail
    assert judged.verdict.detail == f"{len(judged.texts)} labels among the model's"
    assert judged.labels is not None and set(judged.labels) <= {"negative", "neutral", "positive"}


def test_a_classifier_is_held_to_the_expected_labels_when_given(
    encoder_converted: Callable[..., Path], encoder_checkpoint: Callable[[str], Path]
) -> None:
    converted, tokenizer = encoder_converted("bert-classifier"), encoder_checkpoint("bert-classifier")
    texts = ["A fine day.", "A bad day."]
    answered = judge_encoder(converted, tokenizer, dict.fromkeys(texts, "negative")).labels
    assert answered is not None and answered != []
    right = judge_encoder(converted, tokenizer, dict(zip(texts, answered, strict=True)))
    assert right.verdict.ok and right.verdict.detail == "2 labels as expected"
    other = "positive" if answered[1] != "positive" else "neutral"
    wrong = judge_encoder(converted, tokenizer, {texts[0]: answered[0], texts[1]: other})
    assert not wrong.verdict.ok
    assert wrong.verdict.detail == f"text 1 labelled {answered[1]!r}, expected {other!r} (1 wrong of 2)"


def test_a_changed_model_file_is_refused_naming_it(
    encoder_converted: Callable[..., Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    converted = copy_of(encoder_converted("bert-mean-normalized"), tmp_path)
    data = bytearray((converted / "model.onnx").read_bytes())
    data[-1] ^= 0xFF
    (converted / "model.onnx").write_bytes(bytes(data))
    assert main(["verify", str(converted)]) == 1
    err = capsys.readouterr().err
    assert "does not match its manifest; re-run `tritonft convert`" in err
    assert "model.onnx: content differs from the manifest (sha256 mismatch)" in err


def test_a_truncated_model_file_is_refused_by_its_size(
    encoder_converted: Callable[..., Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    converted = copy_of(encoder_converted("bert-mean-normalized"), tmp_path)
    (converted / "model.onnx").write_bytes((converted / "model.onnx").read_bytes()[:1000])
    assert main(["verify", str(converted)]) == 1
    assert "model.onnx: 1000 bytes, manifest says" in capsys.readouterr().err


def test_a_stray_file_beside_the_model_is_refused(
    encoder_converted: Callable[..., Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    converted = copy_of(encoder_converted("bert-mean-normalized"), tmp_path)
    (converted / "model.onnx.bak").write_bytes(b"old")
    assert main(["verify", str(converted)]) == 1
    assert "model.onnx.bak: not written by `tritonft convert` (remove it)" in capsys.readouterr().err


def test_a_model_whose_value_projections_are_transposed_fails_the_judgement(
    minilm_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The value projections are square (384 x 384): transposed, every shape still fits and the model loads and
    # answers unit vectors of the right width; only what it answers gives it away.
    broken = tmp_path / "broken"
    shutil.copytree(minilm_dir, broken)
    tensors = load_file(str(broken / "model.safetensors"))
    for name in [n for n in tensors if n.endswith(".attention.self.value.weight")]:
        tensors[name] = np.ascontiguousarray(tensors[name].T)
    save_file(tensors, str(broken / "model.safetensors"))
    assert main(["convert", "--input", str(broken), "--output", str(tmp_path / "out")]) == 0
    capsys.readouterr()
    converted = tmp_path / "out" / "onnx"
    assert main(["verify", str(converted)]) == 0  # the files are what the conversion wrote ...
    assert main(["verify", str(converted), "--generate", "--tokenizer", str(broken)]) == 1  # ... but not a model
    err = capsys.readouterr().err
    assert "does not answer like a working encoder" in err
    assert "similarity order wrong: 'A man is eating pasta.'" in err


def test_a_missing_tokenizer_is_refused_with_the_flag_that_fixes_it(
    encoder_converted: Callable[..., Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    converted = encoder_converted("bert-mean-normalized")
    assert main(["verify", str(converted), "--generate", "--tokenizer", str(tmp_path)]) == 1
    assert f"{tmp_path / 'tokenizer.json'} is missing: pass --tokenizer" in capsys.readouterr().err


def test_expected_tokens_are_refused_for_an_encoder(
    encoder_converted: Callable[..., Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    converted = encoder_converted("bert-mean-normalized")
    assert main(["verify", str(converted), "--expected-tokens", str(tmp_path / "cases.json")]) == 1
    assert "--expected-tokens is for FasterTransformer conversions" in capsys.readouterr().err
