"""The servers' lifetime (``tests/lifetime.py``): stopped after the last test that needs them, shown on inner pytest
runs (a subprocess each: the plugin's state is per session)."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

CONFTEST = """
import pytest
from pathlib import Path
from tests import lifetime

LOG = Path(__file__).parent / "log.txt"

def note(text):
    with LOG.open("a") as log:
        log.write(text + "\\n")

@pytest.fixture(scope="session")
def server(request):
    note("start server")
    stopped = []

    def stop():  # idempotent, as a server's stop is
        if not stopped:
            stopped.append(note("stop server"))

    lifetime.stop_after_last_use(request, stop)
    yield "server"
    stop()

@pytest.fixture(scope="session")
def uses_server(server):
    return server

@pytest.fixture(scope="session")
def start():
    def started(name):
        note(f"start {name}")
        lifetime.stop_after_this_module(lambda: note(f"stop {name}"))
    return started

@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item):
    note(f"test {item.name}")
"""


def run(pytester: pytest.Pytester, *args: str, **modules: str) -> list[str]:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(**modules)
    result = pytester.runpytest_subprocess("-p", "tests.lifetime", "-p", "no:cacheprovider", *args)
    assert result.ret == 0, result.stdout.str()
    return (pytester.path / "log.txt").read_text().splitlines()


@pytest.fixture
def inner(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    return pytester


def test_a_fixtures_server_stops_after_the_last_test_that_needs_it_even_through_another_fixture(
    inner: pytest.Pytester,
) -> None:
    log = run(
        inner,
        test_a="def test_one(server): pass\ndef test_two(uses_server): pass\ndef test_three(): pass\n",
    )
    assert log == ["start server", "test test_one", "test test_two", "stop server", "test test_three"]


def test_the_last_use_is_counted_after_deselection(inner: pytest.Pytester) -> None:
    log = run(
        inner,
        "-k",
        "not two",
        test_a="def test_one(server): pass\ndef test_two(server): pass\ndef test_three(): pass\n",
    )
    assert log == ["start server", "test test_one", "stop server", "test test_three"]


def test_a_server_a_test_started_stops_after_its_modules_last_test(inner: pytest.Pytester) -> None:
    log = run(
        inner,
        test_a="def test_one(start): start('a')\ndef test_two(): pass\n",
        test_b="def test_three(start): pass\n",
    )
    assert log == ["test test_one", "start a", "test test_two", "stop a", "test test_three"]


def test_a_fixture_server_is_not_stopped_with_the_module_that_started_it(inner: pytest.Pytester) -> None:
    log = run(
        inner,
        test_a="def test_one(server): pass\n",
        test_b="def test_two(): pass\n",
        test_c="def test_three(server): pass\n",
    )
    assert log == ["start server", "test test_one", "test test_two", "test test_three", "stop server"]
