"""``/health/ready``: which models' Tritons must answer for the gateway to take traffic."""

from __future__ import annotations

from tritonft.gateway.health import readiness


def test_every_triton_answering_is_ready() -> None:
    assert readiness([], any_up=True, scales_to_zero=frozenset()) == (200, "ok")


def test_one_model_down_while_another_serves_stays_ready_and_names_it() -> None:
    assert readiness(["gptj"], any_up=True, scales_to_zero=frozenset()) == (200, "not ready: gptj")


def test_no_triton_answering_is_not_ready() -> None:
    assert readiness(["t5", "gptj"], any_up=False, scales_to_zero=frozenset()) == (503, "not ready: t5, gptj")


def test_every_model_asleep_stays_ready_so_its_requests_can_wake_it() -> None:
    assert readiness(["gptj"], any_up=False, scales_to_zero=frozenset({"gptj"})) == (200, "asleep: gptj")


def test_a_model_down_that_does_not_scale_to_zero_still_counts_when_nothing_serves() -> None:
    status, text = readiness(["t5", "gptj"], any_up=False, scales_to_zero=frozenset({"gptj"}))
    assert (status, text) == (503, "not ready: t5; asleep: gptj")
