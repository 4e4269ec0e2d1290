"""Each failure written down the moment it happens, when ``TRITONFT_FAILURE_RECORD`` names a file.

pytest prints its failures at the end of the session; a run stopped before that (the test command's time limit, a
runner that kills the job) would print none. The test command (``scripts/test.sh``) names a file and prints it after
pytest, whatever ended it. Registered by the root ``conftest.py`` (``pytest_plugins``).
"""

from __future__ import annotations

import os
import time

import pytest

RECORD = "TRITONFT_FAILURE_RECORD"
"""The environment variable naming the file each failure is appended to (unset: nothing is written)."""
LINES = 40
"""The last lines kept of a failure's traceback and of each section (captured output, server logs) attached to it."""


def entry(report: pytest.TestReport, lines: int = LINES) -> str:
    """A failed phase as the record keeps it: the test, the phase, its time and the tails of what pytest reported."""
    head = f"FAILED {report.nodeid} ({report.when}, {report.duration:.1f} s, at {time.strftime('%H:%M:%S')})"
    parts = [head, *report.longreprtext.splitlines()[-lines:]]
    for title, text in report.sections:
        parts += [f"--- {title}", *text.splitlines()[-lines:]]
    return "\n".join(parts) + "\n\n"


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    path = os.environ.get(RECORD)
    if path and report.failed:
        with open(path, "a", encoding="utf-8") as record:
            record.write(entry(report))
