"""Helpers shared by the converter tests: run the real CLI in-process or as a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tritonft.cli import main

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def cli(capsys):
    """Run ``tritonft ARGS`` in-process; returns (exit code, stdout, stderr)."""

    def run(*args: object) -> tuple[int, str, str]:
        code = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return code, out, err

    return run


def subprocess_cli(*args: object, env: dict[str, str] | None = None, **kwargs: object) -> subprocess.Popen[str]:
    """Start ``python -m tritonft ARGS`` (a real process: it can be killed, run as another user, see env vars)."""
    full_env = {**os.environ, **(env or {})}
    proc: subprocess.Popen[str] = subprocess.Popen(
        [sys.executable, "-m", "tritonft", *map(str, args)],
        cwd=REPO,
        env=full_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,  # type: ignore[call-overload]
    )
    return proc
