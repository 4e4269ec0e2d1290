"""prod's PriorityClasses on the real kube-apiserver + kube-scheduler (nodes simulated by kwok): with every GPU of
the GPU nodes taken by batch pods, prod's Triton pods preempt them and are placed.

The batch pods stand for the stack's tools Jobs' pods (or any batch work of the batch class) holding the GPU nodes:
bare pods of the plan's batch class, each taking all the GPUs of one node (a Job's pod would be completed at once by
kwok, which completes Job-owned pods). The classes, the Triton Deployments and everything else are the plan that
``tritonft synth`` writes, applied as it is; the scheduler's preemption is the real one."""

from __future__ import annotations

from typing import Any

from components.common.target import GPU_RESOURCE
from tests.system.controlplane.fixtures import Cluster
from tests.system.controlplane.plan import Plan, load_plan, retarget
from tests.system.controlplane.prod import SCHEDULE_TIMEOUT_S, add_prod_nodes, all_scheduled, gpus
from tritonft.kube import wait_for


def batch_pod(name: str, namespace: str, node: dict[str, Any], priority_class: str) -> dict[str, Any]:
    """A pod of the batch class taking every GPU of ``node`` (pinned there by its hostname label)."""
    labels = node["metadata"]["labels"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"test/role": "batch"}},
        "spec": {
            "priorityClassName": priority_class,
            "nodeSelector": {"kubernetes.io/hostname": labels["kubernetes.io/hostname"]},
            "tolerations": [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}],
            "automountServiceAccountToken": False,
            "securityContext": {"runAsNonRoot": True, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [
                {
                    "name": "work",
                    "image": "registry.invalid/batch:1",
                    "resources": {
                        "requests": {GPU_RESOURCE: node["status"]["allocatable"][GPU_RESOURCE], "cpu": "1"},
                        "limits": {GPU_RESOURCE: node["status"]["allocatable"][GPU_RESOURCE]},
                    },
                    "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                }
            ],
        },
    }


def running(cluster: Cluster, names: list[str]) -> bool:
    pods = {p["metadata"]["name"]: p for p in cluster.pods("test/role=batch")}
    return all(pods.get(n, {}).get("status", {}).get("phase") == "Running" for n in names)


def test_prod_s_triton_pods_preempt_batch_pods_holding_every_gpu(cluster: Cluster, prod_plan: Plan) -> None:
    settings = prod_plan.settings
    objs = retarget(load_plan(prod_plan.manifests), settings.namespace, cluster.namespace)
    classes = {o["metadata"]["name"]: o for o in objs if o["kind"] == "PriorityClass"}
    (serving,) = [o for o in classes.values() if o["preemptionPolicy"] == "PreemptLowerPriority"]
    (batch,) = [o for o in classes.values() if o["preemptionPolicy"] == "Never"]
    add_prod_nodes(cluster, settings)
    for priority_class in classes.values():
        cluster.kube.apply(priority_class)
    cluster.kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": cluster.namespace}})
    gpu_nodes = [
        n
        for n in cluster.kube.items("v1", "Node")
        if n["metadata"]["name"] in cluster.nodes and GPU_RESOURCE in n["status"]["allocatable"]
    ]
    batch_names = [f"batch-{i}" for i in range(len(gpu_nodes))]
    for name, node in zip(batch_names, gpu_nodes, strict=True):
        cluster.kube.apply(batch_pod(name, cluster.namespace, node, batch["metadata"]["name"]))
    wait_for("the batch pods to hold every GPU", lambda: running(cluster, batch_names), SCHEDULE_TIMEOUT_S)

    cluster.apply(prod_plan.manifests, settings.namespace)
    expected = settings.serving.replicas_min * len(settings.models)
    pods = wait_for(f"{expected} Triton pods scheduled", lambda: all_scheduled(cluster, expected), SCHEDULE_TIMEOUT_S)

    on_gpus = [p for p in pods if gpus(p)]
    assert on_gpus, "prod serves models on GPUs"
    assert {p["spec"].get("priorityClassName") for p in pods} == {serving["metadata"]["name"]}
    assert {p["spec"].get("priority") for p in pods} == {serving["value"]}
    left = {
        p["metadata"]["name"]: p for p in cluster.pods("test/role=batch") if not p["metadata"].get("deletionTimestamp")
    }
    preempted = set(batch_names) - set(left)
    assert preempted, "the Triton pods got GPUs only by preempting batch pods"
    serving_nodes = {p["spec"]["nodeName"] for p in on_gpus}
    assert not serving_nodes & {p["spec"].get("nodeName") for p in left.values()}, (
        "no GPU node is shared with a batch pod"
    )
