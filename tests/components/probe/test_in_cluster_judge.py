"""The InClusterJudge dynamic provider's diff (called directly): what re-runs a judgement."""

from __future__ import annotations

from typing import Any

from components.probe.in_cluster import InClusterJudgeProvider

JUDGED: dict[str, Any] = {
    "namespace": "triton",
    "job": {"metadata": {"name": "dev-gpt2-judge"}, "spec": {"activeDeadlineSeconds": 1200}},
    "candidate_service": "dev-gpt2",
    "candidate_deployment": "dev-gpt2",
    "rolled": 3,
    "ok": True,
    "verdict": "passed: gpt2 ok",
}


def test_an_unchanged_judge_is_not_run_again() -> None:
    assert not InClusterJudgeProvider().diff("triton/dev-gpt2-judge", JUDGED, dict(JUDGED)).changes


def test_another_rollout_of_a_version_judged_in_place_runs_its_judge_again() -> None:
    """A revert to a version: its Deployment rolled again (its rollout watch saw another generation)."""
    assert InClusterJudgeProvider().diff("triton/dev-gpt2-judge", JUDGED, {**JUDGED, "rolled": 5}).changes


def test_a_new_verdict_alone_is_no_change() -> None:
    assert not InClusterJudgeProvider().diff("x", JUDGED, {**JUDGED, "verdict": None, "ok": None}).changes
