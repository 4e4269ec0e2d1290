"""``tritonft verify --generate`` catches conversions that are byte-consistent but wrong.

A converter bug that transposes a square tensor or swaps two TP shards writes files of exactly the right sizes
(FT's loader would serve them without a word) and records their hashes in the manifest, so the manifest check
passes; only generating from the files shows the damage.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from tests.tritonft.convert.models import t5_model
from tests.tritonft.reference.conftest import GOLDEN, golden
from tests.tritonft.repo.conftest import train_t5_tokenizer


def rewrite(directory: Path, name: str, data: bytes) -> None:
    """Replace one file and record it in the manifest, as a buggy converter would."""
    (directory / name).write_bytes(data)
    manifest_path = directory / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["files"][name]["sha256"] = hashlib.sha256(data).hexdigest()
    manifest_path.write_text(json.dumps(manifest))


def copy_of(converted: Any, tmp_path: Path, name: str, tp: int) -> Path:
    target = tmp_path / f"{tp}-gpu"
    shutil.copytree(converted(name, tp), target)
    return target


def test_a_correct_conversion_reproduces_its_expected_tokens(cli, converted):
    code, out, err = cli("verify", converted("t5", 2), "--expected-tokens", GOLDEN / "t5.json")
    assert code == 0, err
    cases = len(golden("t5")["cases"])
    assert f"all {cases} cases of {GOLDEN / 't5.json'} reproduced token for token" in out


def test_a_transposed_tensor_passes_the_manifest_check_but_fails_generation(cli, converted, tmp_path):
    directory = copy_of(converted, tmp_path, "t5", 1)
    name = "encoder.block.0.layer.0.SelfAttention.q.weight.0.bin"
    square = np.fromfile(directory / name, dtype="<f4").reshape(64, 64)
    rewrite(directory, name, np.ascontiguousarray(square.T).tobytes())

    assert cli("verify", directory)[0] == 0
    code, _, err = cli("verify", directory, "--expected-tokens", GOLDEN / "t5.json")
    assert code == 1
    assert f"{directory} does not generate the tokens of" in err
    assert "greedy on prompt [13, 57, 22, 8, 91, 1]" in err or "cases differ" in err
    assert "expected token" in err
    assert "Traceback" not in err


def test_swapped_tp_shards_pass_the_manifest_check_but_fail_generation(cli, converted, tmp_path):
    directory = copy_of(converted, tmp_path, "gpt2", 2)
    base = "model.layers.0.mlp.dense_h_to_4h.weight"
    first, second = (directory / f"{base}.0.bin").read_bytes(), (directory / f"{base}.1.bin").read_bytes()
    rewrite(directory, f"{base}.0.bin", second)
    rewrite(directory, f"{base}.1.bin", first)

    assert cli("verify", directory)[0] == 0
    code, _, err = cli("verify", directory, "--expected-tokens", GOLDEN / "gpt2.json")
    assert code == 1
    assert "cases differ): the conversion is wrong" in err
    assert "expected token" in err


def test_a_missing_weight_file_is_named_instead_of_served_as_random_values(cli, converted, tmp_path):
    directory = copy_of(converted, tmp_path, "gptj", 1)
    (directory / "model.layers.1.mlp.dense_4h_to_h.bias.bin").unlink()
    code, _, err = cli("verify", directory, "--generate")
    assert code == 1
    assert "model.layers.1.mlp.dense_4h_to_h.bias.bin" in err


def test_a_random_t5_fails_the_probes_bleu_judgement_with_its_score(cli, tmp_path):
    hf = t5_model().save(tmp_path / "hf")
    assert cli("convert", "--input", hf, "--output", tmp_path / "out", "--tp", 1)[0] == 0
    train_t5_tokenizer(tmp_path / "out" / "tokenizer")
    code, _, err = cli("verify", tmp_path / "out" / "1-gpu", "--generate")
    assert code == 1
    assert "does not generate what a working t5 model does" in err
    assert "the probe's judgement fails: BLEU" in err


def test_an_unreadable_expected_tokens_file_is_named(cli, converted, tmp_path):
    bad = tmp_path / "expected.json"
    bad.write_text('{"cases": []}')
    code, _, err = cli("verify", converted("t5", 1), "--expected-tokens", bad)
    assert code == 1
    assert f"--expected-tokens {bad}" in err
