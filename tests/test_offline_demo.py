"""The quick start's offline demo: the conversion Job's path (convert -> verify -> repo) on a small random T5."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tritonft.repo.check import check_repository

REPO = Path(__file__).resolve().parents[1]


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
