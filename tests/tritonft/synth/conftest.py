"""Fixtures for synth tests: a throwaway project (the real program, a stack file of the test's making)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A copy of the real project's program and stacks, so tests can add stack files without touching the repo."""
    root = tmp_path / "project"
    root.mkdir()
    shutil.copy(REPO / "Pulumi.yaml", root / "Pulumi.yaml")
    shutil.copy(REPO / "__main__.py", root / "__main__.py")
    shutil.copytree(REPO / "stacks", root / "stacks")
    return root
