"""A model whose Triton has no route from where the probe runs (FasterTransformer's 23.04, vLLM: issue 51) is judged
through the OpenAI gateway only: the probe opens no connection to Triton, judges the gateway's answers, and a wrong
or missing answer fails it naming the gateway."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from tests.tritonft.probe.test_wake import ANSWER, GATEWAY, SAMPLE, SleepingGateway
from tritonft.probe import ModelStatus, ModelTarget, ProbeConfig, ProbeReport, run_probe
from tritonft.probe.client import V2Client
from tritonft.probe.retry import TransientError
from tritonft.spec import Family


def _no_triton(_endpoint: Any, _headers: Any) -> V2Client:
    raise AssertionError("the probe opened a connection to Triton")


def _probe(complete: Any, *, scales_to_zero: bool = False, gateway_url: str | None = GATEWAY) -> ProbeReport:
    target = ModelTarget("gpt", Family.GPT2, expected=(SAMPLE,), scales_to_zero=scales_to_zero)
    config = ProbeConfig("", (target,), deadline_s=5, call_timeout_s=1, gateway_url=gateway_url)
    return run_probe(config, _no_triton, lambda _s: None, complete)


def test_without_a_v2_endpoint_each_model_is_judged_through_the_gateway_and_triton_is_never_asked() -> None:
    log: list[str] = []
    report = _probe(SleepingGateway(log, asleep=0).complete)
    assert report.ok and log == ["gateway"]
    (model,) = report.models
    assert (model.status, model.sample_prompt, model.sample_answer) == (ModelStatus.OK, SAMPLE.prompt, ANSWER)
    assert [c.check for c in report.checks] == ["gateway"]
    assert report.endpoint == GATEWAY


def test_a_wrong_answer_through_the_gateway_fails_the_probe_naming_the_gateway() -> None:
    report = _probe(SleepingGateway([], asleep=0, answer=" something else").complete)
    assert not report.ok and report.models[0].status is ModelStatus.GATEWAY_FAILED
    assert "the OpenAI gateway answered wrong" in report.checks[0].detail


def test_a_gateway_that_never_answers_fails_the_probe() -> None:
    def down(base_url: str, model: str, prompts: Sequence[str], **_: Any) -> list[str]:
        raise TransientError(f"POST {base_url}/completions: connection refused")

    report = _probe(down)
    assert not report.ok and report.models[0].status is ModelStatus.GATEWAY_FAILED


def test_a_model_that_scales_to_zero_has_its_wake_timed_through_the_gateway_too() -> None:
    report = _probe(SleepingGateway([], asleep=2).complete, scales_to_zero=True)
    assert report.ok and report.models[0].wake is not None
    assert [c.check for c in report.checks] == ["wake", "gateway"]


def test_without_a_v2_endpoint_and_without_a_gateway_the_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="gateway_url"):
        _probe(SleepingGateway([], asleep=0).complete, gateway_url=None)
