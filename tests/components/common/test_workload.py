"""The workload shapes the Triton service and the gateway share: the drain."""

from __future__ import annotations

import pytest

from components.common.workload import drain, drain_in_process, pdb_spec


def test_the_pre_stop_sleep_outlasts_the_removal_reaching_clients_and_the_longest_request() -> None:
    assert drain(15, 60).pre_stop_seconds == 75


def test_the_pre_stop_sleep_is_whole_seconds_rounded_up() -> None:
    assert drain(0.5, 3).pre_stop_seconds == 4


def test_the_grace_period_outlasts_the_pre_stop_sleep_and_the_exit() -> None:
    leaving = drain(15, 60, exit_s=30)
    assert leaving.termination_grace_seconds > leaving.pre_stop_seconds + 30


def test_the_container_hook_sleeps_the_pre_stop_time() -> None:
    assert drain(5, 10).lifecycle() == {"preStop": {"exec": {"command": ["sleep", "15"]}}}


def test_a_server_that_drains_itself_sleeps_only_until_clients_dropped_it() -> None:
    assert drain_in_process(5, 880, exit_s=5).pre_stop_seconds == 5


def test_its_grace_period_still_covers_the_propagation_the_longest_request_and_the_exit() -> None:
    assert drain_in_process(5, 880, exit_s=5).termination_grace_seconds >= 5 + 880 + 5


@pytest.mark.parametrize(("propagation", "longest", "exit_s"), [(-1, 60, 0), (15, 0, 0), (15, 60, -1)])
def test_a_self_drain_of_negative_or_no_time_is_refused(propagation: float, longest: float, exit_s: float) -> None:
    with pytest.raises(ValueError, match="drain"):
        drain_in_process(propagation, longest, exit_s)


@pytest.mark.parametrize(("propagation", "longest", "exit_s"), [(-1, 60, 0), (15, 0, 0), (15, 60, -1)])
def test_a_drain_of_negative_or_no_time_is_refused_naming_the_inputs(
    propagation: float, longest: float, exit_s: float
) -> None:
    with pytest.raises(ValueError, match="longest request"):
        drain(propagation, longest, exit_s)


def test_the_disruption_budget_lets_a_drain_evict_a_pod_that_is_not_ready() -> None:
    assert pdb_spec({"app": "m"})["unhealthyPodEvictionPolicy"] == "AlwaysAllow"


def test_the_disruption_budget_allows_one_replica_down_at_a_time() -> None:
    assert pdb_spec({"app": "m"})["maxUnavailable"] == 1
