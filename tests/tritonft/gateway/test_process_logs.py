"""Where a test's gateway log goes: into the report of a test that failed, never into a test's captured output.

Tests read their captured output (the probe's ``--json`` report); a gateway log printed there whenever *some* earlier
test of the session had failed broke the next passing test, and CI reported two failures for one."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest_plugins = ("pytester",)

REPO = Path(__file__).resolve().parents[3]

INNER_CONFTEST = "from tests.conftest import pytest_runtest_makereport  # noqa: F401\n"
INNER_TESTS = """
import json
import urllib.error
import urllib.request

import pytest

from tests.tritonft.gateway.server import GatewayProcess, started
from tests.system.realtriton.repos import PROBE_MODEL, matrix_spec
from tritonft.local_triton import free_port

SPEC = matrix_spec(PROBE_MODEL)


def gateway(tmp_path):
    return GatewayProcess(f"127.0.0.1:{free_port()}", [SPEC], tmp_path)


def ask(running):  # a request whose answer is an error (its Triton is nowhere), in the gateway's access log
    body = json.dumps({"model": SPEC.name, "prompt": "hello"}).encode()
    call = urllib.request.Request(f"{running.url}/v1/completions", data=body, method="POST")
    with pytest.raises(urllib.error.HTTPError):
        urllib.request.urlopen(call, timeout=30)
    running.access_entries(until=lambda entry: entry["path"] == "/v1/completions")


@pytest.fixture(scope="module")
def shared(tmp_path_factory, request):
    with started(gateway(tmp_path_factory.mktemp("shared")), request) as running:
        yield running


def test_a_failure_with_a_module_scoped_gateway(shared):
    ask(shared)
    assert False, "failed beside a module-scoped gateway"


def test_an_earlier_failure():
    assert False


def test_output_is_the_tests_own(tmp_path, request, capsys):
    with started(gateway(tmp_path), request):
        print("the test's own output")
    assert capsys.readouterr().out == "the test's own output\\n"


def test_a_failure_after_the_gateway_stopped(tmp_path, request):
    with started(gateway(tmp_path), request) as running:
        ask(running)
    assert False, "failed after the gateway stopped"
"""


def run_inner(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, *args: str) -> pytest.RunResult:
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    pytester.makeconftest(INNER_CONFTEST)
    pytester.makepyfile(test_inner=INNER_TESTS)
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rA", *args)


def test_a_passing_tests_output_holds_no_gateway_log_after_another_test_failed(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    outcome = run_inner(pytester, monkeypatch, "-k", "not module_scoped")
    outcome.assert_outcomes(passed=1, failed=2, deselected=1)
    assert "PASSED test_inner.py::test_output_is_the_tests_own" in outcome.outlines


def failure_report(outcome: pytest.RunResult, test: str) -> str:
    """The failure section of ``test`` in a run's output (its traceback, then its report sections)."""
    text = outcome.stdout.str()
    return text[text.index(f"_ {test} _") :]


@pytest.mark.parametrize(
    ("test", "message", "log"),
    [
        ("test_a_failure_after_the_gateway_stopped", "failed after the gateway stopped", "/gateway.log"),
        (
            "test_a_failure_with_a_module_scoped_gateway",
            "failed beside a module-scoped gateway",
            "/shared0/gateway.log",
        ),
    ],
    ids=["started by the test", "started by a module fixture"],
)
def test_a_failed_tests_report_carries_the_log_of_its_gateway(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, test: str, message: str, log: str
) -> None:
    outcome = run_inner(pytester, monkeypatch, "-k", test)
    outcome.assert_outcomes(failed=1, deselected=3)
    failure = failure_report(outcome, test)
    assert message in failure
    assert "gateway log (" in failure and f"{log}) -" in failure
    assert '"path":"/v1/completions"' in failure.replace(" ", ""), "the access log line of the test's request"
