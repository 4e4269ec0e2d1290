"""The canary phase's decisions: the routes' weights per phase, the candidate's replicas before the switch, the
verdict from two versions' samples, and the queries that give those samples."""

from __future__ import annotations

import math

import pytest

from components.common.edge import EdgeArgs, GatewayRef, WeightedBackend, model_grpc_route_spec, model_http_route_spec
from components.serving.canary import (
    Phase,
    VersionSample,
    canary_verdict,
    failure_message,
    handover_step,
    replicas_before_switch,
    route_backends,
    sample_from,
    sample_queries,
)
from components.settings.model import CanarySettings

POLICY = CanarySettings(
    enabled=True, max_error_ratio_increase_percent=1, max_latency_increase_percent=20, min_requests=50
)
STABLE = VersionSample(requests=1000, failures=5, p95_ms=100.0)
EDGE = EdgeArgs(gateway=GatewayRef("prod-edge"), host="t5.example.com", listener="https-m-t5")


# -- the routes per phase ------------------------------------------------------------------------------------------


def test_the_stable_phase_routes_everything_to_the_user_facing_service() -> None:
    assert route_backends(Phase.STABLE, stable="t5", candidate="t5-abcd1234", weight_percent=10) == [
        WeightedBackend("t5")
    ]


def test_the_canary_phase_gives_the_candidate_its_weight_and_the_stable_the_rest() -> None:
    assert route_backends(Phase.CANARY, stable="t5", candidate="t5-abcd1234", weight_percent=10) == [
        WeightedBackend("t5", 90),
        WeightedBackend("t5-abcd1234", 10),
    ]


def test_the_canary_phase_weights_reach_both_routes_backend_refs() -> None:
    backends = route_backends(Phase.CANARY, stable="t5", candidate="t5-abcd1234", weight_percent=25)
    http = model_http_route_spec(EDGE, "t5", backends)["rules"][0]["backendRefs"]
    grpc = model_grpc_route_spec(EDGE, backends)["rules"][0]["backendRefs"]
    assert [(r["name"], r["weight"], r["port"]) for r in http] == [("t5", 75, 8000), ("t5-abcd1234", 25, 8000)]
    assert [(r["name"], r["weight"], r["port"]) for r in grpc] == [("t5", 75, 8001), ("t5-abcd1234", 25, 8001)]


@pytest.mark.parametrize("weight", [0, 100])
def test_a_canary_weight_that_is_all_or_nothing_is_refused(weight: int) -> None:
    with pytest.raises(ValueError, match=r"1\.\.99 percent"):
        route_backends(Phase.CANARY, stable="t5", candidate="t5-abcd1234", weight_percent=weight)


# -- replicas before the switch ------------------------------------------------------------------------------------


def test_the_candidate_gets_as_many_replicas_as_the_stable_has_ready() -> None:
    assert replicas_before_switch(3, min_replicas=1, max_replicas=5) == 3


def test_the_candidate_replicas_are_bounded_by_replicas_max() -> None:
    assert replicas_before_switch(7, min_replicas=1, max_replicas=4) == 4


def test_the_candidate_gets_at_least_the_autoscalers_minimum_and_one_pod() -> None:
    assert replicas_before_switch(0, min_replicas=2, max_replicas=4) == 2
    assert replicas_before_switch(0, min_replicas=0, max_replicas=4) == 1


# -- the verdict ---------------------------------------------------------------------------------------------------


def test_a_candidate_equal_to_the_stable_passes() -> None:
    verdict = canary_verdict(VersionSample(100, 0.5, 100.0), STABLE, POLICY)
    assert verdict.passed
    assert {f.metric for f in verdict.findings} == {"error_ratio", "latency_p95"}


def test_a_candidate_worse_on_errors_fails_naming_the_metric_both_values_and_the_threshold() -> None:
    verdict = canary_verdict(VersionSample(200, 10, 100.0), STABLE, POLICY)
    assert not verdict.passed
    (failed,) = verdict.failures
    assert failed.metric == "error_ratio"
    assert (failed.candidate, failed.stable) == (0.05, 0.005)
    assert failed.threshold == pytest.approx(0.015)
    assert "candidate 5.00% (10 of 200), stable 0.50% (5 of 1000); threshold 1.50%" in failed.message


def test_an_error_ratio_just_within_the_allowed_increase_passes() -> None:
    verdict = canary_verdict(VersionSample(200, 3, 100.0), STABLE, POLICY)  # 1.5% = 0.5% + 1 point
    assert verdict.passed


def test_a_candidate_worse_on_p95_fails_naming_both_values_and_the_threshold() -> None:
    verdict = canary_verdict(VersionSample(200, 1, 130.0), STABLE, POLICY)
    (failed,) = verdict.failures
    assert failed.metric == "latency_p95"
    assert (failed.candidate, failed.stable) == (130.0, 100.0)
    assert failed.threshold == pytest.approx(120.0)
    assert "candidate 130.0 ms, stable 100.0 ms; threshold 120.0 ms" in failed.message


def test_a_p95_within_the_allowed_increase_passes() -> None:
    assert canary_verdict(VersionSample(200, 1, 119.0), STABLE, POLICY).passed


def test_too_few_candidate_requests_is_inconclusive_and_fails() -> None:
    verdict = canary_verdict(VersionSample(12, 0, 90.0), STABLE, POLICY)
    (failed,) = verdict.failures
    assert failed.metric == "requests"
    assert "answered 12 requests in the phase, fewer than canaryMinRequests 50" in failed.message


def test_a_stable_without_a_latency_summary_leaves_the_p95_unjudged_and_says_so() -> None:
    verdict = canary_verdict(VersionSample(200, 1, 500.0), VersionSample(1000, 5, None), POLICY)
    assert verdict.passed
    (latency,) = [f for f in verdict.findings if f.metric == "latency_p95"]
    assert "not judged" in latency.message


def test_a_candidate_that_answered_without_a_latency_summary_fails() -> None:
    verdict = canary_verdict(VersionSample(200, 1, None), STABLE, POLICY)
    assert [f.metric for f in verdict.failures] == ["latency_p95"]


def test_the_failure_message_names_the_model_version_metric_and_the_way_out() -> None:
    verdict = canary_verdict(VersionSample(200, 10, 100.0), STABLE, POLICY)
    message = failure_message("t5", "abcd1234", verdict, 10, 300)
    assert message.startswith("canary phase of t5 version abcd1234 failed after 300 s at 10% of the traffic: FAIL:")
    assert "error ratio: candidate 5.00%" in message
    assert "The stable version serves 100% again and the candidate takes no traffic" in message


# -- the queries ---------------------------------------------------------------------------------------------------


def test_the_queries_select_one_versions_service_and_the_model_clients_call() -> None:
    queries = sample_queries("triton", "t5-abcd1234", "t5", 300)
    sel = 'namespace="triton",job="t5-abcd1234",model="t5"'
    assert queries["failures"] == f"sum(increase(nv_inference_request_failure{{{sel}}}[300s]))"
    assert f"nv_inference_request_success{{{sel}}}[300s]" in queries["requests"]
    assert queries["p95_ms"] == (
        f'max(avg_over_time((nv_inference_request_summary_us{{{sel},quantile="0.95"}} >= 0)[300s:])) / 1000'
    )


def test_a_sample_without_answers_counts_zero_requests_and_no_p95() -> None:
    sample = sample_from({"requests": None, "failures": None, "p95_ms": math.nan})
    assert sample == VersionSample(0.0, 0.0, None)
    assert sample.error_ratio == 0.0


def _handover(target: int, stable: int) -> list[tuple[int, int]]:
    """(candidate, stable) replicas at each step of a handover whose every new candidate pod becomes ready."""
    candidate, steps = 1, []
    while candidate < target:
        step = handover_step(target, candidate_replicas=candidate, candidate_ready=candidate, stable_replicas=stable)
        candidate, stable = step.candidate, step.stable
        steps.append((candidate, stable))
    return steps


def test_the_handover_grows_the_candidate_by_one_while_the_stable_shrinks_by_one() -> None:
    assert _handover(5, 5) == [(2, 4), (3, 3), (4, 2), (5, 1)]


def test_the_handover_never_holds_more_than_one_pod_beyond_the_target() -> None:
    for target in range(1, 8):
        assert all(c + s <= target + 1 for c, s in _handover(target, target))


def test_the_pods_serving_users_never_drop_below_the_target_during_the_handover() -> None:
    # While a step's new pod starts, the stable's remaining (pinned) pods and the candidate's ready ones serve.
    target, candidate, stable = 5, 1, 5
    while candidate < target:
        step = handover_step(target, candidate_replicas=candidate, candidate_ready=candidate, stable_replicas=stable)
        assert step.stable + candidate >= target
        candidate, stable = step.candidate, step.stable


def test_the_handover_keeps_a_candidate_its_autoscaler_raised_and_shrinks_the_stable_to_make_room() -> None:
    step = handover_step(5, candidate_replicas=3, candidate_ready=2, stable_replicas=5)
    assert (step.candidate, step.stable) == (3, 3)


def test_the_stable_shrinks_only_as_far_as_the_candidates_ready_pods_replace_it() -> None:
    # The autoscaler raised the candidate to its floor of 3 at the switch; one of its pods is ready so far.
    step = handover_step(5, candidate_replicas=3, candidate_ready=1, stable_replicas=5)
    assert (step.candidate, step.stable) == (3, 4)
    assert step.stable + 1 >= 5, "the stable's pinned pods and the candidate's ready one still serve 5"


def test_with_an_autoscaler_raised_candidate_users_are_served_by_the_target_at_every_step() -> None:
    for target in range(1, 8):
        for floor in range(1, target + 1):
            candidate, ready, stable = floor, 1, target
            while ready < target:
                step = handover_step(
                    target, candidate_replicas=candidate, candidate_ready=ready, stable_replicas=stable
                )
                assert step.stable + ready >= target, (target, floor, candidate, ready, stable)
                # The next step starts once one more candidate pod is ready.
                candidate, ready, stable = step.candidate, ready + 1, step.stable


def test_the_stable_keeps_one_pod_until_the_candidate_is_complete() -> None:
    step = handover_step(3, candidate_replicas=5, candidate_ready=2, stable_replicas=2)
    assert step.stable == 1
