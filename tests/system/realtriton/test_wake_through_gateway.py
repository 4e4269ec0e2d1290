"""Wake from zero measured end to end through the gateway: each of ``local``'s models served by the gateway (t5-small,
its FT step stood in for; the real all-MiniLM-L6-v2) asleep, with no server at all, until the probe's request through
the gateway raises the gateway's request counter; then a real ``tritonserver`` 2.51 starts for it (the scaler stood in
for: see ``wake.py``), and the probe times the request at zero replicas -> the first judged answer through the
gateway. The figures go to ``benchmarks/BENCHMARKS.md`` (``benchmarks/wake_bench.py``); here what must hold whatever
the machine's speed."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.system.realtriton.wake import (
    Scaler,
    gateway_flags,
    gateway_serving,
    model_repository,
    probe_wake,
    scaling,
    served_requests,
    stand_in_answers,
    woken_specs,
)
from tritonft.local_triton import TritonRuntime
from tritonft.probe import ProbeReport
from tritonft.spec import Family, ModelSpec

pytestmark = pytest.mark.slow

MODELS = [s.name for s in woken_specs()]


@dataclass
class Woken:
    spec: ModelSpec
    report: ProbeReport
    scaler: Scaler
    probe_started: float
    probe_ended: float


@pytest.fixture(scope="module")
def repositories(
    tmp_path_factory: pytest.TempPathFactory,
    tokenizers: dict[Family, Path],
    encoder_converted: Callable[..., Path],
    encoder_checkpoint: Callable[[str], Path],
) -> dict[str, Path]:
    """Each model's own repository, as its Triton pod loads it."""
    return {
        s.name: model_repository(
            s, tmp_path_factory.mktemp(f"repo-{s.name}"), tokenizers, encoder_converted, encoder_checkpoint
        )
        for s in woken_specs()
    }


@pytest.fixture(scope="module", params=MODELS)
def woken(
    request: pytest.FixtureRequest,
    newest_runtime: TritonRuntime,
    tmp_path_factory: pytest.TempPathFactory,
    repositories: dict[str, Path],
    tokenizers: dict[Family, Path],
) -> Iterator[Woken]:
    """One model asleep behind the gateway (every model of the stack scales to zero), woken by the probe."""
    specs = woken_specs()
    (spec,) = [s for s in specs if s.name == request.param]
    out = tmp_path_factory.mktemp(f"wake-{spec.name}")
    (out / "specs").mkdir()
    scaler = Scaler("", {spec.name: repositories[spec.name]}, newest_runtime, out)
    with (
        pytest.MonkeyPatch.context() as monkeypatch,
        gateway_serving(gateway_flags(specs, out / "specs"), scaler.ready, monkeypatch) as gateway_url,
    ):
        scaler.gateway_url = gateway_url
        with scaling(scaler):
            started = time.monotonic()
            report = probe_wake(spec, gateway_url, scaler, stand_in_answers(spec, tokenizers))
            yield Woken(spec, report, scaler, started, time.monotonic())


def test_the_probe_passes_after_waking_the_model_through_the_gateway(woken: Woken) -> None:
    assert woken.scaler.errors == []
    assert woken.report.ok, woken.report.failure_message()


def test_the_model_was_asleep_at_the_probes_first_request_and_its_wake_is_timed(woken: Woken) -> None:
    wake = woken.report.model(woken.spec.name).wake

    assert wake is not None and wake.asleep and wake.judged_ok
    assert wake.asleep_answers >= 1 and wake.tries > wake.asleep_answers
    assert wake.wake_s is not None and wake.asleep_until_s is not None and wake.answer_s is not None
    assert wake.asleep_until_s < wake.wake_s and wake.answer_s <= wake.wake_s


def test_the_server_started_only_after_the_probes_request_reached_the_gateway(woken: Woken) -> None:
    started = woken.scaler.wakes[woken.spec.name]

    assert woken.probe_started <= started.signal_at <= started.ready_at <= woken.probe_ended
    assert woken.scaler.baseline == {woken.spec.name: 0.0}


def test_the_wake_lasts_at_least_the_servers_start_it_waited_for(woken: Woken) -> None:
    wake = woken.report.model(woken.spec.name).wake
    started = woken.scaler.wakes[woken.spec.name]

    assert wake is not None and wake.wake_s is not None
    assert wake.wake_s >= started.ready_at - started.signal_at


def test_the_judged_answer_came_from_the_server_the_wake_started(woken: Woken) -> None:
    started = woken.scaler.wakes[woken.spec.name]

    assert served_requests(started.server, woken.spec.name) >= 1


def test_the_wake_is_in_the_report_the_stack_output_is_made_from(woken: Woken) -> None:
    (check,) = [c for c in woken.report.checks if c.check == "wake"]
    first = woken.report.checks[0]

    assert first is check and check.ok
    assert "asleep at the first request; first judged answer through the gateway" in check.detail
