"""Wake from zero through the gateway: the pure timing (:func:`tritonft.probe.wake.wake_timing`) and how the probe
runs it (a fake gateway answers ``model_starting`` until the model "woke"; a fake Triton records when it was asked).
The real wake, with a real tritonserver and the real gateway: tests/system/realtriton/test_wake_through_gateway.py."""

from __future__ import annotations

import argparse
import http.server
import json
from collections.abc import Sequence
from typing import Any

import pytest

from tests.threaded_server import serving
from tests.tritonft.probe.test_streaming_units import FakeClient
from tritonft.errors import UserError
from tritonft.probe import ModelStatus, ModelTarget, ProbeConfig, ProbeReport, run_probe
from tritonft.probe.cli import add_arguments, config_from_args
from tritonft.probe.contract import TextContract
from tritonft.probe.expectations import Sample
from tritonft.probe.gateway import ModelStartingError, gateway_completions
from tritonft.probe.retry import PermanentError, TransientError
from tritonft.probe.wake import TryOutcome, WakeTiming, WakeTry, wake_timing
from tritonft.spec import Family

ASLEEP, ANSWERED, UNAVAILABLE = TryOutcome.ASLEEP, TryOutcome.ANSWERED, TryOutcome.UNAVAILABLE
GATEWAY = "http://127.0.0.1:9/v1"
ANSWER = " and then"
SAMPLE = Sample("Once upon a time", ANSWER)


def test_a_model_asleep_at_the_first_request_wakes_when_the_judged_answer_arrives() -> None:
    tries = [
        WakeTry(0.0, 0.1, ASLEEP),
        WakeTry(0.3, 0.4, ASLEEP),
        WakeTry(12.0, 12.5, ASLEEP),
        WakeTry(17.0, 19.0, ANSWERED),
    ]

    timing = wake_timing(tries, judged_ok=True)

    assert timing == WakeTiming(
        asleep=True, tries=4, asleep_answers=3, asleep_until_s=12.5, answer_s=2.0, wake_s=19.0, judged_ok=True
    )


def test_times_count_from_the_first_requests_send() -> None:
    tries = [WakeTry(100.0, 100.2, ASLEEP), WakeTry(105.0, 106.5, ANSWERED)]

    timing = wake_timing(tries, judged_ok=True)

    assert (timing.asleep_until_s, timing.answer_s, timing.wake_s) == (0.2, 1.5, 6.5)


def test_a_model_awake_at_the_first_request_has_no_wake_to_measure() -> None:
    timing = wake_timing([WakeTry(0.0, 0.25, ANSWERED)], judged_ok=True)

    assert timing.asleep is False and timing.wake_s is None and timing.answer_s == 0.25
    assert "awake at the first request" in timing.describe()


def test_an_unreachable_gateway_at_the_first_request_is_not_a_wake() -> None:
    timing = wake_timing([WakeTry(0.0, 1.0, UNAVAILABLE), WakeTry(2.0, 2.5, ANSWERED)], judged_ok=True)

    assert timing.asleep is False and timing.wake_s is None


def test_a_wake_that_never_answered_has_no_wake_time_and_is_not_judged() -> None:
    timing = wake_timing([WakeTry(0.0, 0.1, ASLEEP), WakeTry(5.0, 5.1, ASLEEP)], judged_ok=True)

    assert timing.wake_s is None and timing.answer_s is None and timing.judged_ok is False
    assert timing.asleep_until_s == 5.1
    assert "no answer through the gateway after 2 tries" in timing.describe()


def test_a_wrong_answer_ends_the_wake_but_is_not_judged_ok() -> None:
    timing = wake_timing([WakeTry(0.0, 0.1, ASLEEP), WakeTry(1.0, 2.0, ANSWERED)], judged_ok=False)

    assert timing.wake_s == 2.0 and timing.judged_ok is False
    assert "first wrong answer" in timing.describe()


@pytest.mark.parametrize(
    ("tries", "message"),
    [
        ([], "at least one try"),
        ([WakeTry(1.0, 1.1, ASLEEP), WakeTry(0.5, 0.6, ANSWERED)], "in the order they were sent"),
        ([WakeTry(1.0, 0.9, ANSWERED)], "cannot end before it was sent"),
    ],
)
def test_impossible_tries_are_refused(tries: list[WakeTry], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        wake_timing(tries, judged_ok=True)


def test_the_timing_round_trips_through_its_stack_output() -> None:
    timing = wake_timing([WakeTry(0.0, 0.1, ASLEEP), WakeTry(3.0, 3.25, ANSWERED)], judged_ok=True)

    assert WakeTiming.from_dict(timing.to_output()) == timing


class SleepingGateway:
    """``/v1/completions`` of a model that answers ``model_starting`` for its first ``asleep`` requests, then
    ``answer``; records each call, and the Triton client's calls, in one log."""

    def __init__(self, log: list[str], asleep: int, answer: str = ANSWER) -> None:
        self.log = log
        self.asleep = asleep
        self.answer = answer

    def complete(self, base_url: str, model: str, prompts: Sequence[str], **_: Any) -> list[str]:
        self.log.append("gateway")
        if self.asleep > 0:
            self.asleep -= 1
            raise ModelStartingError(f"POST {base_url}/completions (model {model!r}): HTTP 503: no running replica")
        return [self.answer for _ in prompts]


class LoggingClient(FakeClient):
    def __init__(self, log: list[str]) -> None:
        super().__init__(served_decoupled=False)
        self.log = log

    def server_live(self, timeout_s: float) -> bool:
        self.log.append("triton")
        return True

    def infer_text(self, model: str, contract: TextContract, texts: list[str], timeout_s: float) -> list[str]:
        return [ANSWER for _ in texts]


def probe(gateway: SleepingGateway, log: list[str], *, scales_to_zero: bool = True) -> ProbeReport:
    target = ModelTarget("gpt", Family.GPT2, expected=(SAMPLE,), scales_to_zero=scales_to_zero)
    config = ProbeConfig("grpc://127.0.0.1:8001", (target,), deadline_s=30, latency_requests=2, gateway_url=GATEWAY)
    return run_probe(config, lambda _e, _h: LoggingClient(log), lambda _s: None, gateway.complete)


def test_a_model_that_scales_to_zero_is_asked_through_the_gateway_before_anything_else_touches_it() -> None:
    log: list[str] = []

    report = probe(SleepingGateway(log, asleep=3), log)

    assert report.ok, report.failure_message()
    assert log[:5] == ["gateway"] * 4 + ["triton"]
    wake = report.model("gpt").wake
    assert wake is not None and wake.asleep and wake.asleep_answers == 3 and wake.tries == 4 and wake.judged_ok
    assert wake.wake_s is not None and wake.asleep_until_s is not None and wake.wake_s >= wake.asleep_until_s


def test_the_wake_is_timed_from_the_first_request_within_the_probes_own_time() -> None:
    log: list[str] = []

    report = probe(SleepingGateway(log, asleep=3), log)

    wake = report.model("gpt").wake
    assert wake is not None and wake.wake_s is not None and wake.asleep_until_s is not None
    assert 0 <= wake.asleep_until_s <= wake.wake_s <= report.elapsed_s


def test_the_wake_is_a_check_of_the_report_that_says_how_long_it_took() -> None:
    log: list[str] = []

    report = probe(SleepingGateway(log, asleep=2), log)

    (check,) = [c for c in report.checks if c.check == "wake"]
    assert check.ok and check.model == "gpt" and check.attempts == 3
    assert "asleep at the first request; first judged answer through the gateway" in check.detail
    assert "2 answer(s) model_starting" in check.detail


def test_a_wrong_answer_after_the_wake_fails_the_probe_naming_it() -> None:
    log: list[str] = []

    report = probe(SleepingGateway(log, asleep=1, answer=" wrong"), log)

    assert not report.ok
    assert (
        "wake[gpt]: POST /v1/completions: asleep at the first request; first wrong answer" in report.failure_message()
    )
    assert "expected ' and then', got ' wrong'" in report.failure_message()


def test_a_model_that_does_not_scale_to_zero_is_not_woken_first() -> None:
    log: list[str] = []

    report = probe(SleepingGateway(log, asleep=0), log, scales_to_zero=False)

    assert report.ok and report.model("gpt").wake is None
    assert log[0] == "triton" and "wake" not in [c.check for c in report.checks]


def test_the_wake_survives_the_reports_json() -> None:
    log: list[str] = []
    report = probe(SleepingGateway(log, asleep=1), log)

    again = ProbeReport.from_dict(report.to_dict())

    assert again.model("gpt").wake == report.model("gpt").wake
    assert again.model("gpt").status is ModelStatus.OK


class ErrorGateway(http.server.BaseHTTPRequestHandler):
    """Answers every POST with the error ``self.server.error`` (status, OpenAI error code) as the gateway words it."""

    def do_POST(self) -> None:
        status, code = self.server.error  # type: ignore[attr-defined]
        body = json.dumps({"error": {"message": "no running replica", "type": "server_error", "code": code}})
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *_: Any) -> None:
        pass


@pytest.mark.parametrize(
    ("status", "code", "raised"),
    [(503, "model_starting", ModelStartingError), (503, "triton_down", TransientError), (400, None, PermanentError)],
)
def test_only_the_gateways_model_starting_answer_counts_as_asleep(
    status: int, code: str | None, raised: type[Exception]
) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), ErrorGateway)
    server.error = (status, code)  # type: ignore[attr-defined]
    with serving(server), pytest.raises(raised) as caught:
        gateway_completions(
            f"http://127.0.0.1:{server.server_port}/v1", "gpt", ["hi"], max_tokens=4, headers={}, timeout_s=5
        )
    assert (type(caught.value) is ModelStartingError) is (raised is ModelStartingError)
    assert f"HTTP {status}: no running replica" in str(caught.value)


def test_a_wake_is_asked_again_at_most_a_second_apart_so_its_figure_is_within_a_second() -> None:
    log: list[str] = []
    pauses: list[float] = []
    target = ModelTarget("gpt", Family.GPT2, expected=(SAMPLE,), scales_to_zero=True)
    config = ProbeConfig("grpc://127.0.0.1:8001", (target,), deadline_s=30, latency_requests=2, gateway_url=GATEWAY)

    run_probe(config, lambda _e, _h: LoggingClient(log), pauses.append, SleepingGateway(log, asleep=6).complete)

    assert pauses[:6] == [0.2, 0.4, 0.8, 1.0, 1.0, 1.0]


def probe_command(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(["--url", "http://127.0.0.1:8000", "--model", "t5", "--family", "t5", *argv])


def test_the_probe_command_times_a_wake_through_the_gateway_it_is_given() -> None:
    config = config_from_args(probe_command("--gateway", "http://127.0.0.1:8080/v1", "--wake"))

    assert [t.scales_to_zero for t in config.models] == [True]


def test_the_probe_command_refuses_a_wake_without_a_gateway_naming_the_flag() -> None:
    with pytest.raises(
        UserError, match="--wake: the wake is timed through the gateway; give its base URL with --gateway"
    ):
        config_from_args(probe_command("--wake"))
