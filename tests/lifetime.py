"""Servers stopped after the last test that needs them, not at the end of the session.

A session-scoped server lives, by pytest's rules, until the session ends: with every real Triton of the suite kept
up that way, the machine's available memory had fallen from 23.2 to 3.5 GB (5.3 GB of it the servers' ``/dev/shm``
regions) when the last tests started a vLLM engine, where CI's run failed. Two ways to hand a server's ``stop`` here:

- :func:`stop_after_last_use` from a fixture: called once the last test whose fixture closure names that fixture
  has been torn down (the run's order, after every reordering and deselection, is known when collection ends);
- :func:`stop_after_this_module`: called once the last test of the module now running has been torn down (a
  server a test or a module fixture started; a later module that asks for the same server starts it again).

A stop handed here is still the fixture's to call at its own teardown (stops are idempotent). Registered by the root
``conftest.py`` (``pytest_plugins``).
"""

from __future__ import annotations

from collections.abc import Callable, Generator

import pytest

Stop = Callable[[], None]

_last_item_of_fixture: dict[str, str] = {}
_last_item_of_module: dict[str, str] = {}
_due: dict[str, list[Stop]] = {}
"""node id of an item -> the stops to call once that item has been torn down."""
_current: list[pytest.Item] = []


def module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def pytest_collection_finish(session: pytest.Session) -> None:
    _last_item_of_fixture.clear()
    _last_item_of_module.clear()
    for item in session.items:
        for name in getattr(item, "fixturenames", ()):
            _last_item_of_fixture[name] = item.nodeid
        _last_item_of_module[module_of(item.nodeid)] = item.nodeid


def stop_after_last_use(request: pytest.FixtureRequest, stop: Stop) -> None:
    """Call ``stop`` once the last test whose fixture closure names ``request``'s fixture is done (a fixture no
    collected test names, e.g. one asked for by ``getfixturevalue``, keeps its server until its own teardown)."""
    if request.fixturename is None:
        raise TypeError("stop_after_last_use takes a fixture's request (a test's request names no fixture)")
    last = _last_item_of_fixture.get(request.fixturename)
    _forget(stop)
    if last is not None:
        _due.setdefault(last, []).append(stop)


def stop_after_this_module(stop: Stop) -> None:
    """Call ``stop`` once the last test of the module now running is done (outside a test: at the session's end)."""
    if not _current:
        return
    last = _last_item_of_module.get(module_of(_current[-1].nodeid), _current[-1].nodeid)
    _due.setdefault(last, []).append(stop)


def _forget(stop: Stop) -> None:
    for stops in _due.values():
        while stop in stops:
            stops.remove(stop)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, object, object]:
    _current.append(item)
    try:
        return (yield)
    finally:
        _current.pop()
        for stop in _due.pop(item.nodeid, []):
            try:
                stop()
            except Exception as exc:  # a server that fails to stop must not end the session: the next test says
                item.warn(pytest.PytestWarning(f"stopping a server after {item.nodeid} failed: {exc!r}"))
