"""``tests/conftest.py``'s run order: the tests that wait for an install the test command makes in the background
(the vLLM engine's environment, the control plane) run after every other test, each group in its own order."""

from __future__ import annotations

from types import ModuleType, SimpleNamespace
from typing import cast

import pytest

from tests import conftest
from tests.system.realtriton import test_vllm_engine, test_vllm_signal
from tests.tritonft import test_quantity


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
    conftest.pytest_collection_modifyitems(items)
    assert [i.nodeid for i in items] == [
        "tests/components/test_b.py::test_1",
        "tests/tritonft/test_c.py::test_1",
        "tests/system/realtriton/test_v.py::test_1",
        "tests/system/realtriton/test_v.py::test_2",
        "tests/system/controlplane/test_a.py::test_1",
        "tests/system/controlplane/test_a.py::test_2",
    ]
