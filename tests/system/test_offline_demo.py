"""The quick start's offline demo: the conversion Job's path (convert -> verify -> repo) on a small random T5."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tritonft.probe.expectations import GENERIC_PROMPTS
from tritonft.reference import GenerationRequest, build_model, generate, load_checkpoint
from tritonft.repo.check import check_repository
from tritonft.repo.tokenization import generated_tokens, load_tokenizer

REPO = Path(__file__).resolve().parents[2]


def test_offline_demo_writes_a_checked_repository_with_verified_weights(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "offline_demo.py"), "--out", str(tmp_path), "--tp", "2"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    repo = tmp_path / "model_repository"
    weights = repo / "demo-t5-ft" / "1" / "2-gpu"
    manifest = json.loads((weights / "manifest.json").read_text())
    assert manifest["tensor_parallel"] == 2
    assert (weights / "encoder.block.0.layer.0.SelfAttention.q.weight.1.bin").is_file()
    assert check_repository(repo, require_checkpoint=True) == []
    assert "repository check: OK" in done.stdout


def reference_answer(repository: Path) -> str:
    """What tritonft.reference generates for the probe's prompt from the demo's own files (greedy, the spec's 16
    tokens, the T5 prompt ending with </s>), decoded as the postprocessing model does."""
    model = build_model(load_checkpoint(repository / "demo-t5-ft" / "1" / "1-gpu"))
    tokenizer = load_tokenizer(repository / "demo-t5-preprocessing" / "1")
    prompt = (*tokenizer.encode(GENERIC_PROMPTS[0], add_special_tokens=True), model.end_id)
    tokens = generate(model, [GenerationRequest(prompt, 16)]).generated[0][0]
    return tokenizer.decode(generated_tokens(np.asarray(tokens), len(tokens), 0, model.end_id))


@pytest.mark.slow
def test_serve_demo_answers_from_a_real_triton_and_stops_it(tmp_path: Path) -> None:
    made = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "offline_demo.py"), "--out", str(tmp_path), "--tp", "1"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert made.returncode == 0, made.stderr
    repository = tmp_path / "model_repository"
    before = sorted(p.relative_to(repository) for p in repository.rglob("*"))

    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "serve_demo.py"), "--repository", str(repository), "--requests", "5"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert "ok   inference[demo-t5]" in done.stdout and "FAIL" not in done.stdout
    assert next(line for line in lines if line.startswith("answer:  ")) == f"answer:  {reference_answer(repository)}"
    assert re.search(r"^latency: p50 [0-9.]+ ms, p95 [0-9.]+ ms \(5 requests\)$", done.stdout, flags=re.M)
    pid = int(re.findall(r"tritonserver \(pid (\d+)\) stopped", done.stdout)[0])
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)
    assert sorted(p.relative_to(repository) for p in repository.rglob("*")) == before, "served a copy"
