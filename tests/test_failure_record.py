"""The failure record (``tests/failure_record.py``): a failed phase is appended as it happens, with its tails."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import pytest

from tests.failure_record import RECORD, pytest_runtest_logreport


def report(
    outcome: Literal["passed", "failed"], longrepr: str = "", sections: list[tuple[str, str]] | None = None
) -> pytest.TestReport:
    return pytest.TestReport(
        "tests/test_x.py::test_y", ("tests/test_x.py", 1, "test_y"), {}, outcome, longrepr, "call", sections or [], 2.5
    )


def test_a_failure_is_appended_with_its_phase_time_and_traceback_tail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "failures.txt"
    monkeypatch.setenv(RECORD, str(path))
    traceback = "\n".join(f"line {n}" for n in range(100))
    pytest_runtest_logreport(report("failed", traceback, [("Captured stderr call", "server said no")]))
    pytest_runtest_logreport(report("failed", "second"))
    text = path.read_text()
    assert text.count("FAILED tests/test_x.py::test_y (call, 2.5 s, at ") == 2
    assert "line 99" in text and "line 60" in text and "line 59\n" not in text
    assert "--- Captured stderr call\nserver said no" in text


def test_a_passed_test_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "failures.txt"
    monkeypatch.setenv(RECORD, str(path))
    pytest_runtest_logreport(report("passed"))
    assert not path.exists()


def test_without_the_variable_nothing_is_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(RECORD, raising=False)
    monkeypatch.chdir(tmp_path)
    pytest_runtest_logreport(report("failed", "boom"))
    assert list(tmp_path.iterdir()) == []
