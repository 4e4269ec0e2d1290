"""``tests/conftest.py``'s run order: the tests that wait for an install the test command makes in the background
(the vLLM engine's environment, the control plane) run after every other test, each group in its own order; its
lanes; and ``tests/system/conftest.py``'s wait for the control plane's binaries before the first test."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import cast

import pluggy
import pytest
import pytest_timeout  # type: ignore[import-untyped]
from _pytest import hookspec

from tests import conftest
from tests.system import conftest as system_conftest
from tests.system import test_chat_templates
from tests.system.controlplane import server as control_plane_server
from tests.system.realtriton import conftest as realtriton_conftest
from tests.system.realtriton import test_vllm_engine, test_vllm_signal
from tests.tritonft import test_quantity
from tritonft import vllm_env

REPO = Path(__file__).resolve().parents[1]


def item(nodeid: str, module: ModuleType | None) -> pytest.Item:
    return cast(pytest.Item, SimpleNamespace(nodeid=nodeid, module=module))


def test_a_module_that_serves_a_vllm_model_is_recognised() -> None:
    assert conftest.serves_vllm(test_vllm_engine)  # through the session-wide server
    assert conftest.serves_vllm(test_vllm_signal)  # through the engine's own local server


def test_a_module_that_serves_no_vllm_model_is_not() -> None:
    assert not conftest.serves_vllm(test_quantity)
    assert not conftest.serves_vllm(None)


def test_vllm_tests_run_after_the_others_and_control_plane_tests_last_each_in_their_own_order() -> None:
    other = ModuleType("other")
    vllm = ModuleType("vllm_user")
    vllm.local = conftest.vllm_local  # type: ignore[attr-defined]
    items = [
        item("tests/system/controlplane/test_a.py::test_1", other),
        item("tests/system/realtriton/test_v.py::test_1", vllm),
        item("tests/components/test_b.py::test_1", other),
        item("tests/system/controlplane/test_a.py::test_2", other),
        item("tests/system/realtriton/test_v.py::test_2", vllm),
        item("tests/tritonft/test_c.py::test_1", other),
    ]
    conftest.order(items)
    assert [i.nodeid for i in items] == [
        "tests/components/test_b.py::test_1",
        "tests/tritonft/test_c.py::test_1",
        "tests/system/realtriton/test_v.py::test_1",
        "tests/system/realtriton/test_v.py::test_2",
        "tests/system/controlplane/test_a.py::test_1",
        "tests/system/controlplane/test_a.py::test_2",
    ]


def test_a_test_on_the_control_plane_outside_its_folder_runs_in_the_cluster_lane() -> None:
    on_cluster = cast(
        pytest.Item,
        SimpleNamespace(
            nodeid="tests/system/test_canary_under_load.py::t", module=None, fixturenames=["stage", "control_plane"]
        ),
    )
    assert conftest.lane_of(on_cluster) == "cluster"


@pytest.mark.parametrize(
    ("nodeid", "serves", "lane"),
    [
        ("tests/system/controlplane/test_a.py::test_1", False, "cluster"),
        ("tests/system/controlplane/test_judged_promotion.py::test_1", False, "rollouts"),
        ("tests/system/controlplane/test_startup_budget.py::test_1[x]", False, "rollouts"),
        ("tests/system/test_promotion_under_load.py::test_1", False, "rollouts"),
        ("tests/system/realtriton/test_drain.py::test_1", False, "servers"),
        ("tests/system/realtriton/test_ensembles.py::test_1", False, "clients"),
        ("tests/system/realtriton/test_gateway.py::test_1", False, "clients"),
        ("tests/system/realtriton/test_gateway_vllm.py::test_1", True, "engines"),
        ("tests/system/realtriton/test_vllm_engine.py::test_1", True, "engines"),
        ("tests/system/test_offline_demo.py::test_1", False, "engines"),
        ("tests/tritonft/engines/vllm/test_local.py::test_1", True, "units"),
        ("tests/components/test_b.py::test_1", False, "units"),
        ("tests/test_layers.py::test_1", False, "units"),
    ],
)
def test_every_test_has_one_lane(nodeid: str, serves: bool, lane: str) -> None:
    module = ModuleType("m")
    if serves:
        module.local = conftest.vllm_local  # type: ignore[attr-defined]
    assert conftest.lane_of(item(nodeid, module)) == lane


def collected(*args: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode in (0, 5), done.stderr  # 5: every test deselected
    return [line for line in done.stdout.splitlines() if "::" in line]


def test_the_lanes_partition_the_system_tests_and_the_units_lane_takes_the_rest() -> None:
    """On the real suite's ``tests/system`` (where four lanes share a folder), one collection with each test's lane
    printed; outside it every test is ``units`` by :func:`conftest.lane_of`'s first rule (shown above)."""
    lines = collected("tests/system", "--show-lanes")
    shown = [line.split(" ", 1) for line in lines if line.split(" ", 1)[0] in conftest.LANES]
    whole = [line for line in lines if line.split(" ", 1)[0] not in conftest.LANES]
    lanes = {lane: [nodeid for shown_lane, nodeid in shown if shown_lane == lane] for lane in conftest.LANES}
    assert lanes.pop("units") == []
    assert all(lanes.values()), {lane: len(ids) for lane, ids in lanes.items()}
    assert sorted(nodeid for _, nodeid in shown) == sorted(whole), "each test in exactly one lane"


def test_a_lane_keeps_its_tests_in_their_order_and_reports_the_others_deselected() -> None:
    nodeids = [
        "tests/system/controlplane/test_judged_promotion.py::test_2",
        "tests/components/test_b.py::test_1",
        "tests/system/controlplane/test_judged_promotion.py::test_1",
        "tests/system/controlplane/test_a.py::test_1",
    ]
    items = [item(nodeid, None) for nodeid in nodeids]
    deselected: list[pytest.Item] = []
    options = {"lane": "rollouts", "show_lanes": False}
    config = SimpleNamespace(
        getoption=options.__getitem__,
        hook=SimpleNamespace(pytest_deselected=lambda items: deselected.extend(items)),  # noqa: PLW0108 (a keyword)
    )
    conftest.pytest_collection_modifyitems(cast(pytest.Config, config), items)
    assert [i.nodeid for i in items] == [nodeids[0], nodeids[2]]
    assert sorted(i.nodeid for i in deselected) == sorted([nodeids[1], nodeids[3]])


def finish_collection(monkeypatch: pytest.MonkeyPatch, fixturenames: list[list[str]], *, collect_only: bool) -> int:
    """``tests/system/conftest.py``'s collection hook on a session of tests with these fixtures: how many times it
    looked the control plane's binaries up."""
    looked: list[None] = []
    monkeypatch.setattr(control_plane_server, "control_plane_bin", lambda: looked.append(None))
    config = SimpleNamespace(
        option=SimpleNamespace(collectonly=collect_only),
        pluginmanager=SimpleNamespace(get_plugin=lambda _name: None),
    )
    items = [SimpleNamespace(fixturenames=names) for names in fixturenames]
    system_conftest.pytest_collection_finish(cast(pytest.Session, SimpleNamespace(config=config, items=items)))
    return len(looked)


def test_a_run_with_a_control_plane_test_gets_the_binaries_before_its_first_test(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert finish_collection(monkeypatch, [["tmp_path"], ["cluster", "control_plane"]], collect_only=False) == 1


def test_a_run_without_one_or_a_collection_alone_builds_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    assert finish_collection(monkeypatch, [["tmp_path"], ["mocks"]], collect_only=False) == 0
    assert finish_collection(monkeypatch, [["control_plane"]], collect_only=True) == 0


def protocol_waits(monkeypatch: pytest.MonkeyPatch, module: ModuleType, *, built: bool) -> list[str]:
    """``tests/system/conftest.py``'s protocol wrapper run up to its ``yield`` (where the test would start) for a test
    of ``module``: the calls it made to the vLLM environment before it."""
    calls: list[str] = []

    def looked_up() -> Path | None:
        calls.append("built")
        return Path() if built else None

    def ensured() -> Path:
        calls.append("ensure")
        return Path()

    monkeypatch.setattr(vllm_env, "built", looked_up)
    monkeypatch.setattr(vllm_env, "ensure_environment", ensured)
    item = SimpleNamespace(module=module, config=SimpleNamespace(pluginmanager=SimpleNamespace(get_plugin=dict().get)))
    wrapper = system_conftest.pytest_runtest_protocol(cast(pytest.Item, item))
    next(wrapper)
    return calls


def test_a_vllm_test_waits_for_the_engines_environment_before_it_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    assert protocol_waits(monkeypatch, test_vllm_engine, built=False) == ["built", "ensure"]


def test_a_test_running_the_environments_python_itself_waits_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """The chat-template tests ask transformers in that environment without serving a model: a fresh run lost them
    all to the install's lock (300 s each) before they waited here."""
    assert not conftest.serves_vllm(test_chat_templates)
    assert protocol_waits(monkeypatch, test_chat_templates, built=False) == ["built", "ensure"]


def test_other_tests_and_a_built_environment_wait_for_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    assert protocol_waits(monkeypatch, test_quantity, built=False) == []
    assert protocol_waits(monkeypatch, test_vllm_engine, built=True) == ["built"]


def test_the_wait_runs_before_pytest_timeout_starts_a_tests_timer() -> None:
    """pluggy calls a hook's implementations from the end of this list, so the system conftest's wrapper is entered
    first and pytest-timeout's timer starts inside it, whichever plugin is registered first (here the conftest:
    without ``tryfirst`` a plugin registered later would wrap it)."""
    manager = pluggy.PluginManager("pytest")
    manager.add_hookspecs(hookspec)
    manager.register(system_conftest, "system-conftest")
    manager.register(pytest_timeout, "timeout")
    order = [impl.plugin_name for impl in manager.hook.pytest_runtest_protocol.get_hookimpls()]
    assert order.index("timeout") < order.index("system-conftest")


class MarkedItem:
    """The part of a collected test that the realtriton conftest's collection hook and pytest-timeout read."""

    def __init__(self, fixturenames: list[str], *markers: pytest.MarkDecorator) -> None:
        self.fixturenames = fixturenames
        self.own_markers = [m.mark for m in markers]
        self.config = SimpleNamespace(
            getini={"timeout": "300"}.__getitem__,
            _env_timeout=300.0,
            _env_timeout_method="signal",
            _env_timeout_func_only=False,
            _env_timeout_disable_debugger_detection=False,
        )

    def get_closest_marker(self, name: str) -> pytest.Mark | None:
        return next((m for m in reversed(self.own_markers) if m.name == name), None)

    def add_marker(self, marker: pytest.MarkDecorator) -> None:
        self.own_markers.append(marker.mark)


def timeout_settings(item: MarkedItem) -> tuple[float, bool]:
    realtriton_conftest.pytest_collection_modifyitems(cast(list[pytest.Item], [item]))
    settings = pytest_timeout._get_item_settings(item)
    return settings.timeout, settings.func_only


def test_a_test_meeting_the_shared_vllm_server_times_its_call_only_not_the_servers_start() -> None:
    """The first of them starts the server in its setup (minutes on a fresh machine; its ready timeout bounds it)."""
    assert timeout_settings(MarkedItem(["vllm_triton", "tmp_path"])) == (300.0, True)
    assert timeout_settings(MarkedItem(["vllm_triton"], pytest.mark.timeout(600))) == (600.0, True)


def test_other_tests_keep_their_setup_inside_the_time_limit() -> None:
    assert timeout_settings(MarkedItem(["dev_triton"])) == (300.0, False)
