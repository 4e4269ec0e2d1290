"""The Kubernetes half of the rehearsed `up`: the stage's plan applied to the real API server of the test control plane
(``tests/system/controlplane``), as the stand-in `pulumi up` of :mod:`tests.delivery.standins` runs it when the
rehearsal is given a cluster (``REHEARSAL_KUBECONFIG``, ``REHEARSAL_CLUSTER``: the prefix of its names).

One stage after the other on one control plane, each as the cluster its own `up` builds:

* **node groups** (the stand-in for EKS): the stack's ``gpuNodesDesired`` GPU nodes and ``systemNodesMin`` system
  nodes, shaped as its node groups (labels, GPU taint, GPUs per node: :mod:`tests.system.controlplane.plan`) and
  labelled with the stage; the earlier stages' nodes are cordoned (each stage is a cluster of its own);
* **the objects**, retargeted into the stage's namespace (its cluster-scoped ones, a StorageClass or a
  PriorityClass, replacing any of the same name another stage left: :func:`remove`) and applied by the Pulumi CLI's
  rules (:class:`tests.system.controlplane.pulumi_engine.Engine`: dependency order, server-side apply, Jobs
  awaited), with the CRDs of the charts the stack installs (the real Gateway API and Envoy Gateway ones, stubs for
  the others: :func:`tests.system.controlplane.plan.install_crds`); charts and AWS resources are not applied;
* **what a node would refuse that kwok does not**: every object a workload's pods reference (Secret, ConfigMap,
  ServiceAccount, claim, PriorityClass) is created by the stack, checked by ``tritonft preflight`` or already on the
  API server before anything is applied (`up` would hang on it), and is on the server after; every image of the
  stack's registry is there by its digest (the kubelet's pull);
* **the real scheduler's verdict**: every Deployment's pods bound, a GPU pod on a GPU node of the stage and any other
  on its system nodes.

What the stage left is recorded in ``$REHEARSAL_STATE/cluster.json`` for the tests to read.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from components.common.target import GPU_RESOURCE
from components.platform.aws.nodegroups import POOL_LABEL, SYSTEM_POOL
from components.settings.model import Settings
from tests.delivery.standins import image_resolves, pod_references, pod_specs
from tests.system.controlplane.plan import NodeShape, cpu_node_shape, create_nodes, gpu_node_shape
from tests.system.controlplane.prod import gpus
from tests.system.controlplane.pulumi_engine import Engine, Resource, exists, program
from tritonft.kube import ApiError, Kube, wait_for

STAGE_LABEL = "rehearsal.triton-ft.io/stage"
NAMESPACE = "kubernetes:core/v1:Namespace"
SCHEDULE_TIMEOUT_S = 90
API_VERSIONS = {
    "Secret": "v1",
    "ConfigMap": "v1",
    "ServiceAccount": "v1",
    "PersistentVolumeClaim": "v1",
    "PriorityClass": "scheduling.k8s.io/v1",
}
CLUSTER_SCOPED = frozenset({"PriorityClass"})
WAITS = {
    "Secret": "the kubelet leaves its pods in ContainerCreating",
    "ConfigMap": "the kubelet leaves its pods in ContainerCreating",
    "PersistentVolumeClaim": "the scheduler leaves its pods Pending",
    "ServiceAccount": "the API server refuses its pods",
    "PriorityClass": "the API server refuses its pods",
}
"""What happens to a workload whose pods reference an object that does not exist, by the object's kind."""


def stage_namespace(prefix: str, stage: str) -> str:
    return f"{prefix}-{stage}"


def stage_nodes(settings: Settings, prefix: str, stage: str) -> list[NodeShape]:
    """The nodes the stage's node groups start with: ``gpuNodesDesired`` GPU and ``systemNodesMin`` system nodes (an
    existing cluster's stack: its ``gpuNodes``, and 2 CPU nodes), labelled with the stage."""
    aws, k8s = settings.cluster.aws, settings.cluster.kubernetes
    gpus = aws.gpu_nodes_desired if aws else (k8s.gpu_nodes if k8s and k8s.gpu_nodes else 1)
    system = aws.system_nodes_min if aws else 2
    name = stage_namespace(prefix, stage)
    shapes = [gpu_node_shape(settings, f"{name}-gpu-{i}") for i in range(gpus)]
    shapes += [cpu_node_shape(settings, f"{name}-cpu-{i}") for i in range(system)]
    return [dataclasses.replace(s, labels={**s.labels, STAGE_LABEL: name}) for s in shapes]


def references(manifest: Mapping[str, Any]) -> set[tuple[str, str | None, str]]:
    """(kind, namespace or None when cluster-scoped, name) of every object a workload's pods need."""
    namespace = manifest["metadata"].get("namespace")
    return {
        (kind, None if kind in CLUSTER_SCOPED else namespace, name)
        for pod in pod_specs(dict(manifest))
        for kind, name in pod_references(pod)
    }


def identity(obj: Mapping[str, Any]) -> tuple[str, str | None, str]:
    """(kind, namespace or None, name) of an object."""
    meta = obj["metadata"]
    return str(obj["kind"]), None if obj["kind"] in CLUSTER_SCOPED else meta.get("namespace"), str(meta["name"])


def missing_references(
    manifests: Sequence[Mapping[str, Any]],
    known: set[tuple[str, str | None, str]],
    exists_now: Callable[[tuple[str, str | None, str]], bool],
) -> list[str]:
    """Each object a workload of ``manifests`` references that is not ``known`` (the stack's own objects, those
    preflight checks, each namespace's default ServiceAccount) and does not exist now (``exists_now``)."""
    problems = []
    for manifest in manifests:
        meta = manifest["metadata"]
        for ref in sorted(references(manifest), key=str):
            if ref in known or exists_now(ref):
                continue
            kind, _, name = ref
            problems.append(
                f"{manifest['kind']} {meta.get('namespace')}/{meta['name']} needs {kind} {name}, which neither the "
                f"stack creates nor `tritonft preflight` checks: {WAITS[kind]}"
            )
    return problems


def on_server(kube: Kube) -> Callable[[tuple[str, str | None, str]], bool]:
    """Whether an object (kind, namespace, name) exists on the API server."""
    return lambda ref: exists(kube, API_VERSIONS[ref[0]], ref[0], ref[2], ref[1])


def unpromoted_images(manifests: Iterable[Mapping[str, Any]], registry: Mapping[str, str], ours: str) -> list[str]:
    """Each image of the stack's registry (``ours``) a workload runs that the registry does not hold."""
    problems = []
    for manifest in manifests:
        meta = manifest["metadata"]
        for pod in pod_specs(dict(manifest)):
            for container in [*pod.get("initContainers", []), *pod.get("containers", [])]:
                image = str(container["image"])
                if image.startswith(f"{ours}/") and not image_resolves(image, dict(registry)):
                    problems.append(
                        f"{manifest['kind']} {meta.get('namespace')}/{meta['name']} runs {image}, which the registry "
                        "does not hold (never pushed): its pods fail with ErrImagePull"
                    )
    return problems


def replica_pods(kube: Kube, namespace: str) -> list[Any]:
    """The namespace's Deployment pods (owned by a ReplicaSet) not being deleted."""
    return [
        p
        for p in kube.items("v1", "Pod", namespace)
        if not p["metadata"].get("deletionTimestamp")
        and any(o.get("kind") == "ReplicaSet" for o in p["metadata"].get("ownerReferences", []))
    ]


def expected_replicas(deployments: Iterable[Mapping[str, Any]], autoscalers: Iterable[Mapping[str, Any]]) -> int:
    """The replicas the namespace's Deployments settle at with no load: their own count, or their
    HorizontalPodAutoscaler's ``minReplicas`` when larger (the HPA controller raises a Deployment below it, and a
    Deployment an HPA owns states no count: 1)."""
    floor = {
        hpa["spec"]["scaleTargetRef"]["name"]: int(hpa["spec"].get("minReplicas", 1))
        for hpa in autoscalers
        if hpa["spec"]["scaleTargetRef"].get("kind") == "Deployment"
    }
    return sum(max(int(d["spec"].get("replicas", 1)), floor.get(d["metadata"]["name"], 0)) for d in deployments)


def all_bound(kube: Kube, namespace: str) -> list[Any] | None:
    """Every replica of every Deployment of the namespace (:func:`expected_replicas`), each bound to a node; None
    until then."""
    expected = expected_replicas(
        kube.items("apps/v1", "Deployment", namespace),
        kube.items("autoscaling/v2", "HorizontalPodAutoscaler", namespace),
    )
    pods = replica_pods(kube, namespace)
    return pods if len(pods) == expected and all(p["spec"].get("nodeName") for p in pods) else None


def unscheduled(kube: Kube, namespace: str) -> list[str]:
    """Why the namespace's Deployments are not all on nodes: each ReplicaSet's failure to create its pods (the API
    server's refusal) and each pending pod's ``PodScheduled`` message (the scheduler's)."""
    problems = []
    for rs in kube.items("apps/v1", "ReplicaSet", namespace):
        for condition in (rs.get("status") or {}).get("conditions") or []:
            if condition["type"] == "ReplicaFailure" and condition["status"] == "True":
                problems.append(f"ReplicaSet {rs['metadata']['name']} creates no pod: {condition.get('message')}")
    for pod in replica_pods(kube, namespace):
        if pod["spec"].get("nodeName"):
            continue
        conditions = (pod.get("status") or {}).get("conditions") or []
        why = next((c.get("message") for c in conditions if c["type"] == "PodScheduled"), "not scheduled yet")
        problems.append(f"pod {pod['metadata']['name']} is Pending: {why}")
    return problems or [f"the Deployments of {namespace} never reached their replicas"]


def misplaced(pods: Sequence[Mapping[str, Any]], nodes: Mapping[str, Mapping[str, Any]], stage: str) -> list[str]:
    """Each pod not where the plan places it: on a node of its stage (``stage``: :func:`stage_namespace`), a GPU pod
    on a GPU node, any other on a system node."""
    problems = []
    for pod in pods:
        name, node = pod["metadata"]["name"], nodes.get(pod["spec"]["nodeName"], {})
        labels = node.get("metadata", {}).get("labels", {})
        gpu_node = int(node.get("status", {}).get("allocatable", {}).get(GPU_RESOURCE, 0)) > 0
        if labels.get(STAGE_LABEL) != stage:
            problems.append(f"pod {name} is on {pod['spec']['nodeName']}, not a node of {stage}")
        elif gpus(pod) and not gpu_node:
            problems.append(f"pod {name} asks for {gpus(pod)} GPUs and is on {pod['spec']['nodeName']}, no GPU node")
        elif not gpus(pod) and labels.get(POOL_LABEL) != SYSTEM_POOL:
            problems.append(f"pod {name} asks for no GPU and is on {pod['spec']['nodeName']}, not a system node")
    return problems


def placement(pods: Iterable[Mapping[str, Any]], nodes: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per pod: its node, the node's pool and the GPUs it asks for (what cluster.json records)."""
    return {
        p["metadata"]["name"]: {
            "node": p["spec"]["nodeName"],
            "pool": nodes[p["spec"]["nodeName"]]["metadata"]["labels"].get(POOL_LABEL),
            "gpus": gpus(p),
            "instance": p["metadata"].get("labels", {}).get("app.kubernetes.io/instance"),
        }
        for p in pods
    }


def cordon_other_stages(kube: Kube, name: str) -> None:
    """Every other rehearsed stage's nodes (an earlier stage's, another rehearsal's) take no new pod: each stage is a
    cluster of its own. ``name``: the stage's (:func:`stage_namespace`)."""
    for node in kube.items("v1", "Node", selector=f"{STAGE_LABEL},{STAGE_LABEL}!={name}"):
        kube.apply({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node["metadata"]["name"]}, **_CORDON})


_CORDON = {"spec": {"unschedulable": True}}


def cluster_scoped(manifests: Iterable[Mapping[str, Any]]) -> list[tuple[str, str, str]]:
    """(apiVersion, kind, name) of the cluster-scoped objects among ``manifests`` (no namespace; namespaces and CRDs
    aside: they are shared by every stage on this control plane)."""
    return [
        (str(m["apiVersion"]), str(m["kind"]), str(m["metadata"]["name"]))
        for m in manifests
        if not m["metadata"].get("namespace") and m["kind"] not in ("Namespace", "CustomResourceDefinition")
    ]


def remove(kube: Kube, objects: Iterable[tuple[str, str, str]]) -> None:
    """Delete cluster-scoped objects and wait until they are gone (another stage's, or another test's, of the same
    name: each stage is a cluster of its own, and a StorageClass's parameters, for one, cannot change in place)."""
    for api_version, kind, name in objects:
        kube.delete(api_version, kind, name)
        gone = functools.partial(absent, kube, api_version, kind, name)
        wait_for(f"{kind} {name} to be gone", gone, 30)


def absent(kube: Kube, api_version: str, kind: str, name: str) -> bool:
    return not exists(kube, api_version, kind, name, None)


def preflight_named(settings: Settings, namespace: str) -> set[tuple[str, str | None, str]]:
    """The objects ``tritonft preflight`` checks exist before `up` (an existing Secret a model's Job mounts)."""
    from components.cluster_needs import needs_of

    return {("Secret", namespace, t.secret) for t in needs_of(settings).token_secrets}


def up_on_cluster(
    kube: Kube,
    plan_dir: Path,
    settings: Settings,
    *,
    stage: str,
    prefix: str,
    registry: Mapping[str, str],
    ours: str,
) -> tuple[list[str], dict[str, Any]]:
    """The stage's Kubernetes half (see the module): what would stop or hang it, and its record."""
    namespace = stage_namespace(prefix, stage)
    cordon_other_stages(kube, namespace)
    create_nodes(kube, stage_nodes(settings, prefix, stage))
    resources: list[Resource] = program(plan_dir)
    engine = Engine(kube, namespace, settings.namespace, dynamic={})
    record: dict[str, Any] = {"namespace": namespace, "applied": [], "placement": {}, "cluster_scoped": []}
    manifests = [engine.manifest(r) for r in resources if r.applied]
    namespaces = {engine.manifest(r)["metadata"]["name"] for r in resources if r.type == NAMESPACE}
    known = {identity(m) for m in manifests} | preflight_named(settings, namespace)
    known |= {("ServiceAccount", ns, "default") for ns in namespaces}  # each namespace's own, made by the cluster
    problems = missing_references(manifests, known, on_server(kube))  # before anything: `up` would hang on them
    if problems:
        return problems, record
    record["cluster_scoped"] = cluster_scoped(manifests)
    remove(kube, record["cluster_scoped"])
    try:
        for res in resources:  # the namespaces first (the engine leaves them to its caller)
            if res.type == NAMESPACE:
                kube.apply(engine.manifest(res))
        engine.up(resources)
    except (ApiError, TimeoutError) as exc:
        return [f"the API server: {exc}"], record
    finally:
        record["applied"] = [
            f"{o['kind']}/{o['metadata'].get('namespace') or ''}/{o['metadata']['name']}"
            for o in (engine.manifest(engine.state[urn]) for urn in engine.state if engine.state[urn].applied)
        ]
    problems = missing_references(manifests, preflight_named(settings, namespace), on_server(kube))  # all there?
    problems += unpromoted_images(manifests, registry, ours)
    if problems:
        return problems, record
    try:
        pods: list[Any] = wait_for(
            f"the Deployments of {stage} on nodes", lambda: all_bound(kube, namespace), SCHEDULE_TIMEOUT_S
        )
    except TimeoutError:
        return unscheduled(kube, namespace), record
    nodes = {n["metadata"]["name"]: n for n in kube.items("v1", "Node")}
    record["placement"] = placement(pods, nodes)
    return misplaced(pods, nodes, namespace), record
