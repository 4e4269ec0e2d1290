"""``tests/built_tools.py``: a test that runs a tool the test command builds in the background gets it before its
time limit starts, however long the build takes; the build runs once per session."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import built_tools

USES_THE_TOOL = """
import pytest
from tests import built_tools

{marker}
def test_uses_it():
    assert built_tools.tool_path("slowtool") == "/built/slowtool"
"""


@pytest.fixture
def slow_tool(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A stand-in build script that takes 3 s and counts its runs in ``runs``."""
    script = tmp_path / "build.sh"
    script.write_text(f"echo run >> {tmp_path / 'runs'}; sleep 3; echo /built/slowtool\n")
    monkeypatch.setitem(built_tools.SCRIPTS, "slowtool", str(script))
    monkeypatch.setattr(built_tools, "_builds", {})
    return tmp_path / "runs"


def run(pytester: pytest.Pytester, marker: str) -> pytest.RunResult:
    pytester.makepyfile(USES_THE_TOOL.format(marker=marker))
    return pytester.runpytest_inprocess("-p", "tests.built_tools", "--timeout=2", "-p", "no:cacheprovider")


def test_a_marked_test_gets_its_tool_before_its_time_limit_starts(pytester: pytest.Pytester, slow_tool: Path) -> None:
    run(pytester, '@pytest.mark.built_tool("slowtool")').assert_outcomes(passed=1)
    assert slow_tool.read_text().split() == ["run"]


def test_unmarked_the_same_build_counts_against_the_tests_limit(pytester: pytest.Pytester, slow_tool: Path) -> None:
    result = run(pytester, "")
    result.assert_outcomes(failed=1)
    assert "Timeout" in result.stdout.str()


def test_the_build_runs_once_and_its_failure_names_the_script(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    script = tmp_path / "build.sh"
    script.write_text(f"echo run >> {tmp_path / 'runs'}; echo 'no Go here' >&2; exit 1\n")
    monkeypatch.setitem(built_tools.SCRIPTS, "broken", str(script))
    monkeypatch.setattr(built_tools, "_builds", {})
    for _ in range(2):
        with pytest.raises(pytest.fail.Exception, match=f"{script} failed:\nno Go here"):
            built_tools.tool_path("broken")
    assert (tmp_path / "runs").read_text().split() == ["run"]
