"""The start-up budget of prod's Triton pods on a real kube-apiserver + kube-scheduler with kwok nodes.

What is real here and what is simulated: the ``scheduled`` stage is the real scheduler's (pod creation → its
``PodScheduled=True``), and so is the wait for a node that joins later (``node_provisioned``, from the node
autoscaler's event, which the test posts as Karpenter would). kwok plays the kubelet: it reports the init
container, the server's start and ``Ready`` the instant a pod is bound, so ``init``, ``started`` and ``ready`` are
simulated (0 s here; minutes on a GPU node) and no image pull or Triton log exists (those are read from a real
Triton in ``tests/system/realtriton/test_startup_budget.py``).
"""

from __future__ import annotations

import json
import time

import pytest

from components.rollout_watch import RolloutWatchProvider
from tests.system.controlplane.fixtures import Cluster
from tests.system.controlplane.plan import Plan, gpu_node_shape
from tests.system.controlplane.prod import deploy, triton_pods
from tests.system.controlplane.server import ControlPlane
from tests.system.controlplane.test_fail_fast import nominate, props, unplaced_t5
from tritonft.cli import main
from tritonft.kube import wait_for
from tritonft.rollout.command import deployment_startups
from tritonft.rollout.startup import STAGES, timestamp


def test_the_rollout_watch_reports_every_pods_stages_when_up_rolls_it_out(
    control_plane: ControlPlane, cluster: Cluster, prod_plan: Plan
) -> None:
    deploy(cluster, prod_plan)
    done = RolloutWatchProvider().create(props(control_plane, cluster, prod_plan, autoscaler=False, nodes_max=0))
    assert done.outs is not None
    report = done.outs["startup"]
    pods = {p["metadata"]["name"] for p in triton_pods(cluster, "prod-t5-3b")}
    assert set(report) == pods, "every pod of the Deployment, by name"
    for budget in report.values():
        assert all(budget[stage] is not None for stage in STAGES), budget
        assert budget["total"] == pytest.approx(sum(budget[stage] for stage in STAGES))
        assert "gemm_tuning" in budget, "t5-3b's pods run FT's GEMM tuning as an init container"
        assert "models" not in budget, "kwok serves no container log: no Triton load times are made up"
    json.dumps(report)  # a stack output: plain JSON


def test_a_pod_that_waited_for_a_new_node_shows_the_wait_in_its_scheduled_stage(
    control_plane: ControlPlane, cluster: Cluster, prod_plan: Plan
) -> None:
    deploy(cluster, prod_plan, gpu_nodes=1)
    pending = wait_for("a t5-3b pod the scheduler cannot place", lambda: unplaced_t5(cluster), 60)
    for pod in pending:
        nominate(cluster, pod)  # as Karpenter: a node is coming for it
    settings = prod_plan.settings
    assert settings.cluster.aws is not None
    time.sleep(2.0)  # the node joins later than the pod was created
    cluster.add_nodes(
        [gpu_node_shape(settings, f"{cluster.namespace}-gpu-{i}") for i in range(1, settings.cluster.aws.gpu_nodes_min)]
    )
    RolloutWatchProvider().create(props(control_plane, cluster, prod_plan, autoscaler=False, nodes_max=0))
    nodes = {n["metadata"]["name"]: n for n in cluster.kube.items("v1", "Node")}
    startups = {
        s.pod: s for s in deployment_startups(cluster.kube, cluster.namespace, prod_plan.deployment("prod-t5-3b"))
    }
    pods = {p["metadata"]["name"]: p for p in triton_pods(cluster, "prod-t5-3b")}
    for name in pending:
        pod, startup = pods[name], startups[name]
        node = nodes[pod["spec"]["nodeName"]]
        node_joined = timestamp(node["metadata"]["creationTimestamp"])
        created = timestamp(pod["metadata"]["creationTimestamp"])
        scheduled = startup.stages["scheduled"]
        assert scheduled is not None and scheduled >= (node_joined - created).total_seconds() >= 1.0, (
            "a pod cannot be scheduled before its node exists"
        )
        provisioned = startup.details["node_provisioned"]
        assert provisioned is not None and 0 < provisioned <= scheduled
    gptj = prod_plan.deployment("prod-gpt-j-6b")  # keyed by its serving version: gpt-j-6b has room to promote
    startups.update({s.pod: s for s in deployment_startups(cluster.kube, cluster.namespace, gptj)})
    no_event = [s for n, s in startups.items() if n not in pending]
    assert len(no_event) >= 2, "gpt-j-6b's two pods at least: no node was announced for them"
    assert all(s.details["node_provisioned"] is None for s in no_event)


def test_tritonft_startup_budget_prints_a_row_per_pod_of_the_deployment(
    control_plane: ControlPlane, cluster: Cluster, prod_plan: Plan, capsys: pytest.CaptureFixture[str]
) -> None:
    deploy(cluster, prod_plan)
    RolloutWatchProvider().create(props(control_plane, cluster, prod_plan, autoscaler=False, nodes_max=0))
    kubeconfig = str(control_plane.workdir / "kubeconfig")
    args = [
        "startup-budget",
        "--namespace",
        cluster.namespace,
        "--deployment",
        prod_plan.deployment("prod-t5-3b"),
        "--kubeconfig",
    ]
    assert main([*args, kubeconfig]) == 0
    header, *rows = capsys.readouterr().out.splitlines()
    assert header.split()[:7] == ["pod", "node", *STAGES, "total"]
    assert sorted(r.split()[0] for r in rows) == sorted(
        p["metadata"]["name"] for p in triton_pods(cluster, "prod-t5-3b")
    )


def test_tritonft_startup_budget_json_gives_each_pods_stages_as_the_stack_output_does(
    control_plane: ControlPlane, cluster: Cluster, prod_plan: Plan, capsys: pytest.CaptureFixture[str]
) -> None:
    deploy(cluster, prod_plan)
    done = RolloutWatchProvider().create(props(control_plane, cluster, prod_plan, autoscaler=False, nodes_max=0))
    assert done.outs is not None
    kubeconfig = str(control_plane.workdir / "kubeconfig")
    args = [
        "startup-budget",
        "--namespace",
        cluster.namespace,
        "--deployment",
        prod_plan.deployment("prod-t5-3b"),
        "--json",
    ]
    assert main([*args, "--kubeconfig", kubeconfig]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == done.outs["startup"], "a pod's past start reads the same later"


def test_tritonft_startup_budget_names_a_deployment_that_does_not_exist(
    control_plane: ControlPlane, cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster.kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": cluster.namespace}})
    kubeconfig = str(control_plane.workdir / "kubeconfig")
    code = main(
        ["startup-budget", "--namespace", cluster.namespace, "--deployment", "nope", "--kubeconfig", kubeconfig]
    )
    assert code == 1
    err = capsys.readouterr().err
    assert "--deployment nope: no such Deployment" in err and cluster.namespace in err
