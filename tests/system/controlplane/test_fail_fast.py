"""Fail fast: the wait ``pulumi up`` runs for each Triton Deployment (``RolloutWatch``), against the real scheduler.

prod's plan on a cluster with a single 4-GPU node: the scheduler cannot place the second t5-3b replica
(``Insufficient nvidia.com/gpu``). With nothing able to add a GPU node the wait fails with the scheduler's reason
as soon as the grace period is over, instead of waiting out the rollout deadline (the startup budget).
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from components.rollout_watch import RolloutWatchProvider
from tests.system.controlplane.fixtures import Cluster
from tests.system.controlplane.plan import Plan, gpu_node_shape
from tests.system.controlplane.prod import deploy, triton_pods
from tests.system.controlplane.server import ControlPlane
from tritonft.kube import wait_for
from tritonft.rollout.verdict import unplaced
from tritonft.rollout.watch import RolloutFailedError

GRACE_S = 5.0
"""Shorter than the 60 s default, to keep the suite fast; the decision is the same."""
DEADLINE_S = 900.0
"""A startup budget's order of magnitude: the wait must fail long before it."""


def props(plane: ControlPlane, cluster: Cluster, plan: Plan, *, autoscaler: bool, nodes_max: int) -> dict[str, Any]:
    """The RolloutWatch's inputs as the program sets them for prod-t5-3b, with the test cluster's kubeconfig."""
    return {
        "namespace": cluster.namespace,
        "deployment": plan.deployment("prod-t5-3b"),
        "generation": 1,
        "min_replicas": 2,  # prod's replicasMin
        "autoscaler": autoscaler,
        "nodes_max": nodes_max,
        "deadline_s": DEADLINE_S,
        "grace_s": GRACE_S,
        "kubeconfig": str(plane.workdir / "kubeconfig"),
        "context": None,
    }


@pytest.mark.parametrize(
    ("autoscaler", "nodes_max", "why"),
    [
        (False, 0, "no node autoscaler manages the GPU nodes (1 present)"),
        (True, 1, "the node autoscaler is at its maximum (1 of gpuNodesMax 1 GPU nodes)"),
    ],
    ids=["existing-cluster", "aws-at-gpuNodesMax"],
)
def test_up_fails_with_the_schedulers_reason_when_no_node_can_be_added(
    *, control_plane: ControlPlane, cluster: Cluster, prod_plan: Plan, autoscaler: bool, nodes_max: int, why: str
) -> None:
    deploy(cluster, prod_plan, gpu_nodes=1)
    with pytest.raises(RolloutFailedError) as info:
        RolloutWatchProvider().create(
            props(control_plane, cluster, prod_plan, autoscaler=autoscaler, nodes_max=nodes_max)
        )
    message = str(info.value)
    t5 = prod_plan.deployment("prod-t5-3b")
    assert message.startswith(f"Deployment {cluster.namespace}/{t5} cannot roll out: Triton pod {t5}-")
    assert "Insufficient nvidia.com/gpu" in message, "the scheduler's own reason"
    assert why in message
    assert "did not roll out within" not in message, "failed on the verdict, not at the deadline"


def test_the_wait_ends_when_the_deployment_has_rolled_out(
    control_plane: ControlPlane, cluster: Cluster, prod_plan: Plan
) -> None:
    deploy(cluster, prod_plan)
    done = RolloutWatchProvider().create(props(control_plane, cluster, prod_plan, autoscaler=False, nodes_max=0))
    assert done.id == f"{cluster.namespace}/{prod_plan.deployment('prod-t5-3b')}"
    assert done.outs is not None
    assert done.outs["ready_replicas"] == prod_plan.settings.serving.replicas_min
    live = cluster.kube.get("apps/v1", "Deployment", prod_plan.deployment("prod-t5-3b"), cluster.namespace)
    assert done.outs["generation"] == live["metadata"]["generation"] >= 1, "what an in-place judge follows"
    assert "kubeconfig" not in done.outs, "credentials never reach the state"


def test_a_pod_karpenter_nominated_a_node_for_is_waited_for_until_the_node_comes(
    control_plane: ControlPlane, cluster: Cluster, prod_plan: Plan
) -> None:
    # An existing cluster (nothing the stack knows can add a node) whose Karpenter launches GPU nodes on demand:
    # it nominates a node claim for the pending pod, and the node joins minutes later.
    deploy(cluster, prod_plan, gpu_nodes=1)
    outcome: list[Any] = []

    def watch() -> None:
        try:
            outcome.append(
                RolloutWatchProvider().create(props(control_plane, cluster, prod_plan, autoscaler=False, nodes_max=0))
            )
        except RolloutFailedError as exc:
            outcome.append(exc)

    waiting = threading.Thread(target=watch, daemon=True)
    waiting.start()
    wait_for("a t5-3b pod the scheduler cannot place", lambda: unplaced_t5(cluster), 60)
    nominated: set[str] = set()
    until = time.monotonic() + GRACE_S * 3
    while time.monotonic() < until and waiting.is_alive():  # as Karpenter, for every pod it provisions for
        for pending in unplaced_t5(cluster) - nominated:
            nominate(cluster, pending)
            nominated.add(pending)
        time.sleep(0.5)
    assert waiting.is_alive(), f"the wait ended before the node came: {outcome}"

    settings = prod_plan.settings
    assert settings.cluster.aws is not None
    joining = [
        gpu_node_shape(settings, f"{cluster.namespace}-gpu-{i}") for i in range(1, settings.cluster.aws.gpu_nodes_min)
    ]
    cluster.add_nodes(joining)
    waiting.join(120)
    (done,) = outcome
    assert not isinstance(done, RolloutFailedError), str(done)
    assert done.outs["ready_replicas"] == settings.serving.replicas_min


def unplaced_t5(cluster: Cluster) -> set[str]:
    """The prod-t5-3b pods marked unschedulable."""
    return {str(p["metadata"]["name"]) for p in triton_pods(cluster, "prod-t5-3b") if unplaced(p) is not None}


def nominate(cluster: Cluster, pod: str) -> None:
    """Karpenter's event on a pod it launches a node claim for."""
    cluster.kube.request(
        "POST",
        f"/api/v1/namespaces/{cluster.namespace}/events",
        body={
            "metadata": {"generateName": f"{pod}."},
            "involvedObject": {"kind": "Pod", "name": pod, "namespace": cluster.namespace},
            "reason": "Nominated",
            "message": "Pod should schedule on: nodeclaim/gpu-x7k2q",
            "type": "Normal",
            "source": {"component": "karpenter"},
        },
    )
