"""Status conditions as the API reports them, including before any controller wrote one; how the tests' waits poll."""

from __future__ import annotations

import itertools

import pytest

from tritonft import kube
from tritonft.kube import condition_true, wait_for


def test_a_freshly_created_object_with_null_conditions_has_no_condition_true() -> None:
    assert condition_true({"metadata": {"name": "crd"}, "status": {"conditions": None}}, "Established") is False
    assert condition_true({"metadata": {"name": "crd"}, "status": None}, "Established") is False


def test_a_condition_counts_only_when_its_status_is_true() -> None:
    status = {"conditions": [{"type": "Established", "status": "False"}, {"type": "NamesAccepted", "status": "True"}]}
    assert condition_true({"status": status}, "NamesAccepted") is True
    assert condition_true({"status": status}, "Established") is False


class FakeClock:
    """``time`` for :func:`wait_for`: sleeping advances the clock and is recorded."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_wait_for_polls_quickly_at_first_then_backs_off_to_its_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock()
    monkeypatch.setattr(kube, "time", clock)
    answers = iter([None] * 12 + ["ready"])
    assert wait_for("the thing", lambda: next(answers), timeout_s=60, interval_s=0.25) == "ready"
    assert clock.sleeps[0] == pytest.approx(0.02)
    assert all(b == pytest.approx(min(a * 1.5, 0.25)) for a, b in itertools.pairwise(clock.sleeps))
    assert clock.sleeps[-4:] == [0.25] * 4


def test_wait_for_gives_up_after_its_timeout_naming_what_it_waited_for(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock()
    monkeypatch.setattr(kube, "time", clock)
    with pytest.raises(TimeoutError, match="timed out after 5 s waiting for the Job to complete"):
        wait_for("the Job to complete", lambda: False, timeout_s=5)
    assert 5 <= sum(clock.sleeps) <= 5 + 0.25
