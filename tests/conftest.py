"""Shared fixtures: the deterministic mock engine (see ``tritonft.synth.engine``); the stacks' plans, made once per
session; a failed test's report carries the logs of the gateways it started; the tests that serve a vLLM model and
the control-plane tests are ordered last; ``--lane`` keeps one lane of the test command's (:func:`lane_of`)."""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType

import pytest

from tests.failure_logs import attach_on_failure
from tests.plans import StackPlans
from tests.tritonft.gateway.server import log_sections
from tritonft import vllm_env
from tritonft.engines.vllm import local as vllm_local
from tritonft.synth.engine import RecordingMocks, mock_engine

pytest_plugins = ["tests.failure_record", "tests.lifetime", "tests.built_tools", "pytester"]
pytest_runtest_makereport = attach_on_failure(log_sections)

SYSTEM_TESTS = "tests/system/"
"""Where every test of the lanes but ``units`` lives (the control plane's fixtures are this folder's too): the test
command has those lanes collect only this folder, and ``units`` everything but it."""
CONTROL_PLANE_TESTS = f"{SYSTEM_TESTS}controlplane/"
ROLLOUT_TESTS = (
    *(
        f"{CONTROL_PLANE_TESTS}{module}.py::"
        for module in ("test_judged_promotion", "test_promotion_gate", "test_startup_budget")
    ),
    f"{SYSTEM_TESTS}test_promotion_under_load.py::",
)
"""The judged promotion's tests on the control plane (and the promotion under a client's load): about half of the
control-plane tests' time, nearly all of it waiting on the real controllers (rollouts, Jobs, deletions), so they get
a lane and a control plane of their own."""


VLLM_SERVERS = (vllm_local.__name__, "tests.system.realtriton.vllm_server")
"""The modules that start a vLLM-serving Triton (its first start builds the vLLM engine's environment): the engine's
own ``local`` and the tests' session-wide server."""


def _uses(module: ModuleType | None, names: tuple[str, ...]) -> bool:
    return module is not None and any(
        isinstance(value, ModuleType) and value.__name__ in names for value in vars(module).values()
    )


def serves_vllm(module: ModuleType | None) -> bool:
    """Whether a test module serves a vLLM model (it uses one of :data:`VLLM_SERVERS`)."""
    return _uses(module, VLLM_SERVERS)


def needs_vllm_environment(module: ModuleType | None) -> bool:
    """Whether a test module runs the vLLM engine's environment: it serves a vLLM model, or runs that environment's
    Python itself (``tritonft.vllm_env``, e.g. to ask transformers there)."""
    return _uses(module, (*VLLM_SERVERS, vllm_env.__name__))


def run_order(item: pytest.Item) -> tuple[bool, bool]:
    """Everything else first, then the tests that serve a vLLM model, then the control-plane tests."""
    return item.nodeid.startswith(CONTROL_PLANE_TESTS), serves_vllm(getattr(item, "module", None))


def order(items: list[pytest.Item]) -> None:
    """On a fresh machine the test command installs the vLLM engine's environment and builds the control plane in
    the background (scripts/test.sh): the tests that need them run last (a stable sort: in their own order), so they
    wait for them only once everything else has run."""
    items.sort(key=run_order)


REAL_TRITON_TESTS = f"{SYSTEM_TESTS}realtriton/"
CLIENT_TESTS = tuple(
    f"{REAL_TRITON_TESTS}{module}.py::"
    for module in (
        "test_encoders",
        "test_ensembles",
        "test_gateway",
        "test_gateway_coalescing",
        "test_gateway_embeddings",
        "test_gateway_openai_clients",
        "test_gateway_probe",
        "test_gateway_spreading",
        "test_gateway_stream_errors",
        "test_harness",
        "test_judge",
        "test_openai_conformance",
        "test_probe_bench",
        "test_probe_encoders",
        "test_probe_streaming",
        "test_reference_engine",
        "test_wake_through_gateway",
    )
)
"""The real-Triton tests of what talks to Triton (the gateway, the probe, the judge, the harness, the ensembles'
clients): about half of that folder's time, nearly all of it waiting on the servers, so they get a lane of their own;
the shared servers they use (the matrix of generators, the encoders) are theirs alone."""

LANES = ("servers", "clients", "engines", "cluster", "rollouts", "units")
"""The test command's lanes (``scripts/test.sh`` runs one pytest per lane, side by side): every test is in one."""


def lane_of(item: pytest.Item) -> str:
    """The lane a test runs in: outside :data:`SYSTEM_TESTS`, ``units`` (plans, rules, renderers, CLIs). Inside it,
    ``rollouts`` the judged promotion's tests on the control plane (:data:`ROLLOUT_TESTS`), ``cluster`` every other
    test on the control plane (its folder's, and any other whose fixtures use it); each of the two starts its own
    control plane, once its build is done. ``clients`` the real-Triton tests of :data:`CLIENT_TESTS`, ``servers``
    the other tests of ``tests/system/realtriton``, both serving no vLLM model; ``engines`` the other system tests
    (the vLLM engine's)."""
    nodeid = item.nodeid
    if not nodeid.startswith(SYSTEM_TESTS):
        return "units"
    if nodeid.startswith(ROLLOUT_TESTS):
        return "rollouts"
    if nodeid.startswith(CONTROL_PLANE_TESTS) or "control_plane" in getattr(item, "fixturenames", ()):
        return "cluster"
    if nodeid.startswith(REAL_TRITON_TESTS) and not serves_vllm(getattr(item, "module", None)):
        return "clients" if nodeid.startswith(CLIENT_TESTS) else "servers"
    return "engines"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--lane", choices=LANES, help="run only this lane's tests (scripts/test.sh runs every lane)")
    parser.addoption(
        "--show-lanes",
        action="store_true",
        help="print '<lane> <node id>' for each collected test (with --collect-only: where the test command runs it)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reporter = config.pluginmanager.get_plugin("terminalreporter") if config.getoption("show_lanes") else None
    if reporter is not None:
        for item in items:
            reporter.write_line(f"{lane_of(item)} {item.nodeid}")
    lane = config.getoption("lane")
    if lane:
        deselected = [i for i in items if lane_of(i) != lane]
        if deselected:
            config.hook.pytest_deselected(items=deselected)
            items[:] = [i for i in items if lane_of(i) == lane]
    order(items)


@pytest.fixture(scope="session")
def stack_plan(tmp_path_factory: pytest.TempPathFactory) -> StackPlans:
    """The repository's stacks' plans, each synthesized once per session (see ``tests/plans.py``): read only."""
    return StackPlans(tmp_path_factory.mktemp("plans"))


@pytest.fixture
def mocks() -> Iterator[RecordingMocks]:
    """A fresh mock engine (project ``triton-ft``, stack ``test``) recording every registered resource."""
    recorder = RecordingMocks()
    with mock_engine(recorder, project="triton-ft", stack="test"):
        yield recorder


SETTINGS_DATE = __import__("datetime").date(2026, 11, 26)
"""The day the EKS version rules judge on in every test (versions enter extended support as time passes: a test
must not change its verdict with the calendar); tests of those rules pass their own dates."""


@pytest.fixture(autouse=True)
def _eks_calendar_fixed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("components.settings.eks.today", lambda: SETTINGS_DATE)
