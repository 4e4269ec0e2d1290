"""The fail-fast decision: when a Triton pod waiting for GPUs will never get them, and when it may."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from tritonft.rollout.verdict import NodeGrowth, progress_failure, rolled_out, stuck_for_gpus

NOW = datetime(2026, 11, 23, 9, 0, 0, tzinfo=UTC)
SCHEDULER = (
    "0/5 nodes are available: 2 node(s) didn't match Pod's node affinity/selector, 3 Insufficient nvidia.com/gpu. "
    "preemption: 0/5 nodes are available: 2 Preemption is not helpful for scheduling, 3 No preemption victims found "
    "for incoming pod."
)
NOTHING = NodeGrowth(autoscaler=False)
AUTOSCALED = NodeGrowth(autoscaler=True, nodes_max=4)


def pod(name: str, *, gpus: int = 4, unschedulable_for_s: float | None = None, message: str = SCHEDULER) -> Any:
    status: dict[str, Any] = {"phase": "Pending"}
    if unschedulable_for_s is not None:
        since = (NOW - timedelta(seconds=unschedulable_for_s)).strftime("%Y-%m-%dT%H:%M:%SZ")
        status["conditions"] = [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "lastTransitionTime": since,
                "message": message,
            }
        ]
    return {
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "triton", "resources": {"requests": {"nvidia.com/gpu": str(gpus)}}}]},
        "status": status,
    }


def terminating(name: str) -> Any:
    found = pod(name, gpus=4)
    found["metadata"]["deletionTimestamp"] = "2026-11-23T08:59:50Z"
    found["status"] = {"phase": "Running"}
    return found


def event(pod_name: str, reason: str, message: str) -> Any:
    return {"involvedObject": {"kind": "Pod", "name": pod_name}, "reason": reason, "message": message}


def verdict(pods: list[Any], *, growth: NodeGrowth = NOTHING, gpu_nodes: int = 3, events: Any = (), others: Any = ()):
    return stuck_for_gpus(pods, [*pods, *others], list(events), growth=growth, gpu_nodes=gpu_nodes, now=NOW, grace_s=60)


def test_a_pod_short_of_gpus_with_nothing_to_add_a_node_fails_with_the_schedulers_reason() -> None:
    message = verdict([pod("prod-t5-3b-abc", unschedulable_for_s=61)])
    assert message is not None
    assert message.startswith(
        "Triton pod prod-t5-3b-abc (4 GPU(s)) cannot be scheduled and nothing can add a GPU node (no node autoscaler "
        "manages the GPU nodes (3 present)). The scheduler says: 0/5 nodes are available:"
    )
    assert "3 Insufficient nvidia.com/gpu" in message
    assert message.endswith(
        "for incoming pod. Free GPUs, add GPU nodes (gpuNodesMin/gpuNodesMax) or lower replicasMin/tensorParallel"
    )


def test_a_pod_within_the_grace_period_is_given_time_for_the_schedulers_retries() -> None:
    assert verdict([pod("p", unschedulable_for_s=30)]) is None


def test_a_pod_unschedulable_for_another_reason_is_not_a_gpu_shortage() -> None:
    pvc = "0/5 nodes are available: pod has unbound immediate PersistentVolumeClaims."
    assert verdict([pod("p", unschedulable_for_s=600, message=pvc)]) is None


def test_a_scheduled_or_pending_but_unmarked_pod_is_no_verdict() -> None:
    assert verdict([pod("p")]) is None


def test_a_terminating_gpu_pod_frees_gpus_so_the_rollout_waits() -> None:
    assert verdict([pod("new", unschedulable_for_s=120)], others=[terminating("old")]) is None


def test_an_autoscaler_below_its_maximum_may_add_a_node_so_the_rollout_waits() -> None:
    assert verdict([pod("p", unschedulable_for_s=120)], growth=AUTOSCALED, gpu_nodes=3) is None


def test_an_autoscaler_at_its_maximum_cannot_add_a_node() -> None:
    message = verdict([pod("p", unschedulable_for_s=120)], growth=AUTOSCALED, gpu_nodes=4)
    assert message is not None
    assert "the node autoscaler is at its maximum (4 of gpuNodesMax 4 GPU nodes)" in message


def test_an_autoscaler_that_refused_to_scale_up_fails_with_its_own_reason() -> None:
    refused = event("p", "NotTriggerScaleUp", "pod didn't trigger scale-up: 1 max node group size reached")
    message = verdict([pod("p", unschedulable_for_s=120)], growth=AUTOSCALED, gpu_nodes=3, events=[refused])
    assert message is not None
    assert "cluster-autoscaler: pod didn't trigger scale-up: 1 max node group size reached" in message


def test_a_scale_up_already_triggered_for_the_pod_waits_for_the_node() -> None:
    triggered = event("p", "TriggeredScaleUp", "pod triggered scale-up: [{gpu 3->4 (max: 4)}]")
    assert verdict([pod("p", unschedulable_for_s=120)], growth=AUTOSCALED, gpu_nodes=4, events=[triggered]) is None


def test_a_node_karpenter_nominated_for_the_pod_is_waited_for_whatever_the_stack_knows() -> None:
    nominated = event("p", "Nominated", "Pod should schedule on: nodeclaim/gpu-l4-x7k2q")
    assert verdict([pod("p", unschedulable_for_s=300)], growth=NOTHING, events=[nominated]) is None


def test_a_pod_the_scheduler_preempted_others_for_is_waited_for() -> None:
    preempting = pod("p", unschedulable_for_s=120)
    preempting["status"]["nominatedNodeName"] = "gpu-2"
    assert verdict([preempting]) is None


def test_another_pods_nomination_does_not_save_a_pod_that_has_none() -> None:
    nominated = event("other", "Nominated", "Pod should schedule on: nodeclaim/gpu-l4-x7k2q")
    assert verdict([pod("p", unschedulable_for_s=300)], events=[nominated]) is not None


def deployment(
    *, generation: int = 2, observed: int = 2, want: int = 2, updated: int = 2, available: int = 2, replicas: int = 2
) -> Any:
    """A Deployment's status as the controller writes it; by default rolled out at 2 replicas."""
    return {
        "metadata": {"generation": generation},
        "spec": {"replicas": want},
        "status": {
            "observedGeneration": observed,
            "updatedReplicas": updated,
            "availableReplicas": available,
            "replicas": replicas,
        },
    }


def test_a_deployment_is_rolled_out_when_every_wanted_replica_is_updated_and_available() -> None:
    assert rolled_out(deployment())


def test_a_deployment_mid_rollout_or_not_yet_observed_is_not_rolled_out() -> None:
    assert not rolled_out(deployment(generation=3)), "the controller has not seen the new spec"
    assert not rolled_out(deployment(updated=1)), "one pod still runs the old template"
    assert not rolled_out(deployment(available=1)), "one new pod is not available yet"
    assert not rolled_out(deployment(replicas=3)), "an old pod is still counted"


def test_an_autoscaled_deployment_is_not_rolled_out_before_its_autoscaler_raised_it_to_the_minimum() -> None:
    first = deployment(want=1, updated=1, available=1, replicas=1)
    assert not rolled_out(first, min_replicas=2)
    assert rolled_out(deployment(), min_replicas=2)


def test_the_controllers_progress_deadline_is_reported_with_its_message() -> None:
    failed = deployment(updated=1, available=1)
    failed["status"]["conditions"] = [
        {"type": "Available", "status": "True"},
        {
            "type": "Progressing",
            "status": "False",
            "reason": "ProgressDeadlineExceeded",
            "message": 'ReplicaSet "prod-t5-3b-7d9" has timed out progressing.',
        },
    ]
    expected = 'ProgressDeadlineExceeded: ReplicaSet "prod-t5-3b-7d9" has timed out progressing.'
    assert progress_failure(failed) == expected
    assert progress_failure(deployment()) is None
