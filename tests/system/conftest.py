"""The system tests' fixtures shared across folders: the one real control plane of the session (and each test's
slice of it), for ``tests/system/controlplane`` and the cross-stage tests that use it (see
``tests/system/controlplane/fixtures.py``). When a run holds a test on the control plane, its binaries are built
(or the test command's background build is waited for) once collection is done, before the first test: on a fresh
machine that takes minutes, past pytest's per-test time limit. Likewise the vLLM engine's environment (the test
command installs it in the background) is waited for before the first test that serves a vLLM model, outside that
test's time limit."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from tests.conftest import needs_vllm_environment
from tests.system.controlplane import server
from tests.system.controlplane.fixtures import (  # noqa: F401  (fixtures and the failure report's hook)
    cluster,
    control_plane,
    prod_plan,
    pytest_runtest_makereport,
)
from tritonft import vllm_env
from tritonft.local_triton import TritonError


def pytest_collection_finish(session: pytest.Session) -> None:
    if session.config.option.collectonly:
        return
    if not any("control_plane" in getattr(item, "fixturenames", ()) for item in session.items):
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line("control plane: finding its binaries (a fresh machine builds them first: minutes)")
    server.control_plane_bin()


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    """Before a test that serves a vLLM model or runs its engine's environment, that environment, waited for (or
    built) here: on a fresh machine the test command's background install of ~6 GB of wheels can outlast a test's
    time limit (a loaded machine's run lost every vLLM test to it, each waiting on the install's lock). Being the
    outermost wrapper (``tryfirst``), this runs before pytest-timeout's wrapper starts the test's timer. A failed
    install is left to the test's own fixture, which fails naming it."""
    if needs_vllm_environment(getattr(item, "module", None)) and vllm_env.built() is None:
        reporter = item.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line("vLLM engine: waiting for its environment's install (a fresh machine: minutes)")
        with contextlib.suppress(TritonError):
            vllm_env.ensure_environment()
    yield
