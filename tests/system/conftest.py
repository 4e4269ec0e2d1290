"""The system tests' fixtures shared across folders: the one real control plane of the session (and each test's
slice of it), for ``tests/system/controlplane`` and the cross-stage tests that use it (see
``tests/system/controlplane/fixtures.py``). When a run holds a test on the control plane, its binaries are built
(or the test command's background build is waited for) once collection is done, before the first test: on a fresh
machine that takes minutes, past pytest's per-test time limit."""

from __future__ import annotations

import pytest

from tests.system.controlplane import server
from tests.system.controlplane.fixtures import (  # noqa: F401  (fixtures and the failure report's hook)
    cluster,
    control_plane,
    prod_plan,
    pytest_runtest_makereport,
)


def pytest_collection_finish(session: pytest.Session) -> None:
    if session.config.option.collectonly:
        return
    if not any("control_plane" in getattr(item, "fixturenames", ()) for item in session.items):
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line("control plane: finding its binaries (a fresh machine builds them first: minutes)")
    server.control_plane_bin()
