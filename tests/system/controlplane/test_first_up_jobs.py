"""prod's first `up` runs all its conversion and reference Jobs at once, beside the monitoring pods and the serving
pods of the system nodes, on the system node group the plan makes; the real kube-scheduler must place every one of
them, or the plan is wrong.

Pulumi creates what does not depend on something else in parallel, so the first `up` starts every model's download/
convert Job and every judge reference Job together (prod: six, ~94 GiB of memory, ~146 GiB of scratch disk); each
stays Pending until a system node has room, and one that fits no node the group can have waits out its deadline and
fails `up` hours in. The delivery rehearsal (:mod:`tests.delivery.cluster_half`) applies them one after the other,
since kwok completes a Job's pod at once; here each Job's pod is a bare pod of its template (kwok keeps it Running),
so they hold their requests together.

The nodes are the group at its ``systemNodesMax``, shaped as the plan makes them: the instance type's allocatable CPU
and memory (:func:`tests.system.controlplane.plan.cpu_node_shape`) and the scratch its root volume leaves, read from
the plan's launch template (the volume less the OS reserve, the images the node holds twice, and the kubelet's 10 %
hard-eviction threshold). kube-prometheus-stack's pods hold what they ask (``charts.monitoring_pods``), and so do the
plan's Deployments on the system nodes (the gateway, a ``device: cpu`` encoder's Triton) at their autoscalers' floor
(they may start while the slower Jobs still run); the chart pods whose requests the stack does not state are not
modelled, nor the DaemonSets beyond their allowance.

Not rehearsed: cluster-autoscaler's scale-out from ``systemNodesMin`` (the Jobs Pending until it adds nodes: no
autoscaler runs here), a node's real disk use (the scheduler reserves what the pods ask, as here).
"""

from __future__ import annotations

import copy
import json
from typing import Any

from components.args import aws_platform_args
from components.platform.aws import charts
from components.platform.aws.decisions import OS_RESERVE_GIB
from components.platform.aws.nodegroups import POOL_LABEL, SYSTEM_POOL
from components.platform.aws.platform import system_images_gib
from tests.delivery.cluster_half import expected_replicas
from tests.system.controlplane.fixtures import Cluster
from tests.system.controlplane.plan import NodeShape, Plan, cpu_node_shape, load_plan, retarget
from tests.system.controlplane.prod import SCHEDULE_TIMEOUT_S
from tritonft.kube import wait_for

EVICTION_HARD_NODEFS = 0.10
"""The kubelet's default hard eviction threshold ``nodefs.available<10%`` (EKS's node images keep it)."""
ROLE = "test/role"


def system_volume_gib(plan: Plan) -> int:
    """The system node group's root volume, from the plan's launch template."""
    resources = json.loads((plan.manifests.parent / "resources.json").read_text())
    (template,) = [
        r
        for r in resources
        if r["type"] == "aws:ec2/launchTemplate:LaunchTemplate" and r["name"].endswith("-system-lt")
    ]
    (device,) = template["inputs"]["blockDeviceMappings"]
    return int(device["ebs"]["volumeSize"])


def system_nodes(plan: Plan, prefix: str) -> list[NodeShape]:
    """The system group at its maximum: each node's allocatable scratch is its volume less the OS reserve, the images
    it holds (compressed and unpacked) and the kubelet's eviction threshold."""
    settings = plan.settings
    assert settings.cluster.aws is not None
    volume = system_volume_gib(plan)
    images = system_images_gib(aws_platform_args(settings))
    scratch = int(volume * (1 - EVICTION_HARD_NODEFS) - OS_RESERVE_GIB - 2 * images)
    shapes = []
    for i in range(settings.cluster.aws.system_nodes_max):
        shape = cpu_node_shape(settings, f"{prefix}-system-{i}")
        shapes.append(
            NodeShape(
                shape.name, shape.labels, shape.taints, {**shape.allocatable, "ephemeral-storage": f"{scratch}Gi"}
            )
        )
    return shapes


def held_pod(workload: dict[str, Any], name: str, namespace: str, role: str) -> dict[str, Any]:
    """A bare pod of ``workload``'s template: its containers' requests, node selector, affinity, tolerations and
    priority as they are; its volumes (the model store, its ConfigMaps and Secrets) and ServiceAccount left out (the
    scheduler places by requests and rules, and the store's claim is ReadWriteMany)."""
    spec = copy.deepcopy(workload["spec"]["template"]["spec"])
    spec.pop("volumes", None)
    spec.pop("serviceAccountName", None)
    spec["automountServiceAccountToken"] = False
    spec["restartPolicy"] = "Never"
    for container in [*spec.get("initContainers", []), *spec.get("containers", [])]:
        container.pop("volumeMounts", None)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {ROLE: role}},
        "spec": spec,
    }


def monitoring_pod(name: str, containers: tuple[charts.PodResources, ...], namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {ROLE: "monitoring"}},
        "spec": {
            "nodeSelector": {POOL_LABEL: SYSTEM_POOL},
            "automountServiceAccountToken": False,
            "containers": [
                {"name": f"c{i}", "image": "registry.invalid/monitoring:1", "resources": c.values()}
                for i, c in enumerate(containers)
            ],
        },
    }


def bound(cluster: Cluster, role: str, expected: int) -> list[Any] | None:
    pods = cluster.pods(f"{ROLE}={role}")
    placed = [p for p in pods if p["spec"].get("nodeName")]
    return placed if len(pods) == expected and len(placed) == expected else None


def pending_reasons(cluster: Cluster) -> list[str]:
    return [
        f"{p['metadata']['name']}: {c.get('message')}"
        for p in cluster.pods()
        if not p["spec"].get("nodeName")
        for c in p.get("status", {}).get("conditions", [])
        if c.get("type") == "PodScheduled"
    ]


def test_prods_first_up_places_every_job_at_once_beside_monitoring_on_its_system_group(
    cluster: Cluster, prod_plan: Plan
) -> None:
    settings = prod_plan.settings
    objs = retarget(load_plan(prod_plan.manifests), settings.namespace, cluster.namespace)
    jobs = [o for o in objs if o["kind"] == "Job"]
    assert len(jobs) >= 6, [j["metadata"]["name"] for j in jobs]
    for priority_class in [o for o in objs if o["kind"] == "PriorityClass"]:
        cluster.kube.apply(priority_class)
    cluster.kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": cluster.namespace}})
    cluster.add_nodes(system_nodes(prod_plan, cluster.namespace))

    monitoring = charts.monitoring_pods(replicas=2)
    for name, containers in monitoring:
        cluster.kube.apply(monitoring_pod(name, containers, cluster.namespace))
    wait_for("the monitoring pods placed", lambda: bound(cluster, "monitoring", len(monitoring)), SCHEDULE_TIMEOUT_S)
    serving = [
        held_pod(d, f"{d['metadata']['name']}-{i}", cluster.namespace, "serving")
        for d in system_deployments(objs)
        for i in range(expected_replicas([d], [o for o in objs if o["kind"] == "HorizontalPodAutoscaler"]))
    ]
    assert serving, "prod's gateway and its CPU encoder run on the system nodes"
    for pod in serving:
        cluster.kube.apply(pod)
    for job in jobs:
        cluster.kube.apply(held_pod(job, job["metadata"]["name"], cluster.namespace, "job"))

    try:
        placed = wait_for(
            f"{len(jobs)} Job pods placed at once", lambda: bound(cluster, "job", len(jobs)), SCHEDULE_TIMEOUT_S
        )
    except TimeoutError as timeout:
        raise AssertionError(f"{timeout}; Pending: {pending_reasons(cluster)}") from None
    nodes = {n["metadata"]["name"]: n for n in cluster.kube.items("v1", "Node")}
    assert {nodes[p["spec"]["nodeName"]]["metadata"]["labels"][POOL_LABEL] for p in placed} == {SYSTEM_POOL}
    wait_for("every Job pod running at once", lambda: running(cluster, len(jobs)), SCHEDULE_TIMEOUT_S)
    assert bound(cluster, "serving", len(serving)), "the serving pods kept their places"


def system_deployments(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        o
        for o in objs
        if o["kind"] == "Deployment"
        and o["spec"]["template"]["spec"].get("nodeSelector", {}).get(POOL_LABEL) == SYSTEM_POOL
    ]


def running(cluster: Cluster, expected: int) -> bool:
    phases = [p.get("status", {}).get("phase") for p in cluster.pods(f"{ROLE}=job")]
    return phases.count("Running") == expected
