"""Tools some tests run that the test command builds in the background (``scripts/test.sh``: Alertmanager's
``amtool``, a Go build of minutes on a fresh machine). A test marked ``@pytest.mark.built_tool("amtool")`` gets the
tool before pytest-timeout starts its timer: the wrapper below is the outermost (``tryfirst``) and waits for the
background build (its script holds a lock) or builds it. A failed build is left to the test's fixture, which fails
naming the script and its error."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = {"amtool": "scripts/setup/amtool.sh"}
"""Each tool and the script that builds it once (cached outside the work tree) and prints its path."""

_builds: dict[str, subprocess.CompletedProcess[str]] = {}


def build(name: str) -> subprocess.CompletedProcess[str]:
    """The tool's build script run once per session (waiting for a build already running); its result kept."""
    if name not in _builds:
        _builds[name] = subprocess.run(
            ["bash", SCRIPTS[name]], cwd=REPO, capture_output=True, text=True, timeout=3600, check=False
        )
    return _builds[name]


def tool_path(name: str) -> str:
    """The built tool's path; fails the test naming the script when the build failed."""
    built = build(name)
    if built.returncode != 0:
        pytest.fail(f"{SCRIPTS[name]} failed:\n{built.stderr}")
    return built.stdout.strip()


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    marker = item.get_closest_marker("built_tool")
    if marker is not None and marker.args[0] not in _builds:
        reporter = item.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(f"{marker.args[0]}: waiting for its build ({SCRIPTS[marker.args[0]]}; fresh: minutes)")
        build(marker.args[0])
    yield
