"""The start-up budget from a pod's API objects and Triton's log (shapes as kube-apiserver 1.3x and tritonserver
2.51 write them)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from tritonft.rollout.startup import (
    STAGES,
    pod_startup,
    render_table,
    slowest_stage,
    triton_load,
    with_triton,
)

T0 = datetime(2026, 11, 26, 14, 0, 0, tzinfo=UTC)


def at(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def pod(
    *,
    scheduled: float | None = 3,
    initialized: float | None = 50,
    started: float | None = 170,
    ready: float | None = 230,
    tuning: tuple[float, float] | None = (10, 49),
    restarts: int = 0,
) -> dict[str, Any]:
    """A Triton pod of prod-t5-3b at T0 + the given seconds per milestone (None: not reached)."""
    conditions = []
    for kind, when in (
        ("Initialized", initialized),
        ("Ready", ready),
        ("ContainersReady", ready),
        ("PodScheduled", scheduled),
    ):
        conditions.append(
            {"type": kind, "status": "False" if when is None else "True", "lastProbeTime": None}
            | ({} if when is None else {"lastTransitionTime": at(when)})
        )
    status: dict[str, Any] = {"phase": "Running" if started is not None else "Pending", "conditions": conditions}
    if tuning is not None:
        status["initContainerStatuses"] = [
            {
                "name": "gemm-tuning",
                "state": {
                    "terminated": {
                        "exitCode": 0,
                        "reason": "Completed",
                        "startedAt": at(tuning[0]),
                        "finishedAt": at(tuning[1]),
                    }
                },
                "restartCount": 0,
            }
        ]
    if started is not None:
        status["containerStatuses"] = [
            {"name": "triton", "state": {"running": {"startedAt": at(started)}}, "restartCount": restarts}
        ]
    return {
        "metadata": {
            "name": "prod-t5-3b-7d9f-abcde",
            "uid": "u-1",
            "namespace": "triton-ft",
            "creationTimestamp": at(0),
        },
        "spec": {"nodeName": "ip-10-0-1-7.ec2.internal"},
        "status": status,
    }


def event(reason: str, seconds: float, *, field_path: str = "", name: str = "prod-t5-3b-7d9f-abcde") -> dict[str, Any]:
    return {
        "metadata": {"name": f"{name}.{reason}", "creationTimestamp": at(seconds)},
        "involvedObject": {"kind": "Pod", "name": name, "uid": "u-1", "fieldPath": field_path},
        "reason": reason,
        "firstTimestamp": at(seconds),
        "lastTimestamp": at(seconds),
    }


def test_the_stages_are_the_seconds_between_the_pods_milestones() -> None:
    found = pod_startup(pod(), [])
    assert dict(found.stages) == {"scheduled": 3.0, "init": 47.0, "started": 120.0, "ready": 60.0}


def test_the_stages_add_up_to_creation_to_ready() -> None:
    assert pod_startup(pod(), []).total == 230.0


def test_a_stage_not_reached_yet_has_no_figure_and_no_total() -> None:
    found = pod_startup(pod(started=None, ready=None), [])
    assert found.stages["started"] is None and found.stages["ready"] is None
    assert found.stages["init"] == 47.0
    assert found.total is None


def test_the_gemm_tuning_is_the_init_containers_own_run_time() -> None:
    assert pod_startup(pod(tuning=(10, 49)), []).details["gemm_tuning"] == 39.0


def test_a_pod_without_init_containers_reports_no_tuning() -> None:
    assert pod_startup(pod(tuning=None), []).details["gemm_tuning"] is None


def test_image_pulls_are_each_containers_pulling_to_pulled_added_up() -> None:
    events = [
        event("Pulling", 4, field_path="spec.initContainers{gemm-tuning}"),
        event("Pulled", 9, field_path="spec.initContainers{gemm-tuning}"),
        event("Pulling", 50, field_path="spec.containers{triton}"),
        event("Pulled", 165, field_path="spec.containers{triton}"),
    ]
    assert pod_startup(pod(), events).details["image_pull"] == 120.0


def test_an_image_already_on_the_node_costs_no_pull() -> None:
    events = [event("Pulled", 50, field_path="spec.containers{triton}")]
    assert pod_startup(pod(), events).details["image_pull"] == 0.0


def test_without_pull_events_the_pull_is_unknown_not_zero() -> None:
    assert pod_startup(pod(), [event("Scheduled", 3)]).details["image_pull"] is None


def test_a_node_added_by_the_autoscaler_is_timed_from_its_event_to_scheduling() -> None:
    events = [event("FailedScheduling", 0), event("TriggeredScaleUp", 1)]
    found = pod_startup(pod(scheduled=95), events)
    assert found.details["node_provisioned"] == 94.0
    assert found.stages["scheduled"] == 95.0


def test_karpenters_nomination_counts_as_a_node_being_added() -> None:
    assert pod_startup(pod(scheduled=70), [event("Nominated", 2)]).details["node_provisioned"] == 68.0


def test_no_autoscaler_event_means_no_node_was_provisioned_for_the_pod() -> None:
    assert pod_startup(pod(), [event("Scheduled", 3)]).details["node_provisioned"] is None


def test_events_of_another_pod_are_not_counted() -> None:
    events = [event("TriggeredScaleUp", 1, name="prod-t5-3b-7d9f-other")]
    assert pod_startup(pod(), events).details["node_provisioned"] is None


def test_events_of_an_earlier_pod_with_the_same_name_are_not_counted() -> None:
    old = event("TriggeredScaleUp", 1)
    old["involvedObject"]["uid"] = "u-0"
    assert pod_startup(pod(), [old]).details["node_provisioned"] is None


def test_a_ready_condition_from_before_the_servers_restart_is_not_its_readiness() -> None:
    found = pod_startup(pod(started=400, ready=230, restarts=1), [])
    assert found.stages["ready"] is None
    assert found.restarts == 1


def test_the_slowest_stage_is_where_to_look_first() -> None:
    assert slowest_stage(pod_startup(pod(), [])) == "started"


TRITON_LOG = """\
W1126 14:12:32.340341 29331 pinned_memory_manager.cc:273] "Unable to allocate pinned system memory"
I1126 14:12:32.379304 29331 model_lifecycle.cc:472] "loading: t5-3b-ft:1"
I1126 14:12:32.386038 29331 model_lifecycle.cc:472] "loading: t5-3b-preprocessing:1"
I1126 14:12:39.652479 29331 model_lifecycle.cc:839] "successfully loaded 't5-3b-preprocessing'"
I1126 14:13:41.132152 29331 model_lifecycle.cc:839] "successfully loaded 't5-3b-ft'"
I1126 14:13:41.251207 29331 model_lifecycle.cc:472] "loading: t5-3b:1"
I1126 14:13:41.251390 29331 model_lifecycle.cc:839] "successfully loaded 't5-3b'"
I1126 14:13:41.253163 29331 grpc_server.cc:2558] "Started GRPCInferenceService at 0.0.0.0:8001"
I1126 14:13:41.253405 29331 http_server.cc:4713] "Started HTTPService at 0.0.0.0:8000"
"""


def test_each_models_load_is_its_loading_to_successfully_loaded_line() -> None:
    load = triton_load(TRITON_LOG)
    assert dict(load.models) == {"t5-3b-ft": 68.753, "t5-3b-preprocessing": 7.266, "t5-3b": 0.0}


def test_the_server_is_up_when_its_http_service_started() -> None:
    assert triton_load(TRITON_LOG).server_up_s == 68.913


def test_a_model_that_failed_to_load_has_no_load_time() -> None:
    log = TRITON_LOG.replace("successfully loaded 't5-3b-ft'", "failed to load 't5-3b-ft'")
    assert "t5-3b-ft" not in triton_load(log).models


def test_triton_iso8601_log_lines_are_read_too() -> None:
    log = (
        '2026-11-26T14:12:32Z I 29331 model_lifecycle.cc:472] "loading: gpt2:1"\n'
        "2026-11-26T14:12:35.5Z I 29331 model_lifecycle.cc:839] \"successfully loaded 'gpt2'\"\n"
    )
    assert dict(triton_load(log).models) == {"gpt2": 3.5}


def test_a_log_across_new_year_keeps_counting_forward() -> None:
    log = (
        'I1231 23:59:58.000000 1 model_lifecycle.cc:472] "loading: gpt2:1"\n'
        "I0101 00:00:03.000000 1 model_lifecycle.cc:839] \"successfully loaded 'gpt2'\"\n"
    )
    assert dict(triton_load(log).models) == {"gpt2": 5.0}


def test_the_table_has_a_row_per_pod_with_its_stages_and_total() -> None:
    startup = with_triton(pod_startup(pod(), []), triton_load(TRITON_LOG))
    header, row, models = render_table([startup]).splitlines()
    assert header.split()[:7] == ["pod", "node", *STAGES, "total"]
    assert row.split()[:2] == ["prod-t5-3b-7d9f-abcde", "ip-10-0-1-7.ec2.internal"]
    assert row.split()[2:7] == ["3.0", "47.0", "120.0", "60.0", "230.0"]
    assert models.startswith("prod-t5-3b-7d9f-abcde: Triton up 68.9 s") and "t5-3b-ft 68.8" in models


def test_the_output_carries_stages_details_and_triton_loads() -> None:
    out = with_triton(pod_startup(pod(), []), triton_load(TRITON_LOG)).as_output()
    assert out["total"] == 230.0 and out["ready"] == 60.0 and out["gemm_tuning"] == 39.0
    assert out["models"]["t5-3b-ft"] == 68.753 and out["server_up"] == 68.913
    assert "image_pull" not in out, "an unknown detail is left out, not reported as 0"
