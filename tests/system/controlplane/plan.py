"""The plan ``tritonft synth`` writes, applied to the real control plane the way ``pulumi up`` would.

* objects are retargeted into the test's namespace (one namespace per test, one control plane per session);
* CRDs are installed where an add-on would bring them: the **real** Gateway API CRDs (``sigs.k8s.io/gateway-api``,
  standard channel) and Envoy Gateway's, from the Go modules at the versions the stack installs
  (``scripts/setup/gateway_api.sh``), so every Gateway, route and policy meets its schema and CEL validations;
  **minimal stubs** (any spec accepted) for ServiceMonitor, PodMonitor, PrometheusRule, Certificate, ClusterIssuer and
  ScaledObject, declared here as such; their real schemas are the charts' business;
* nodes are shaped like the stack's node groups (labels, taint, GPUs per node) and simulated by kwok;
* the model store claim is bound to a PersistentVolume "as the EFS CSI driver would provision it";
* order follows the program's dependencies: namespaces, CRDs, storage, config, conversion Jobs (which must
  complete), then the Deployments and what depends on them.
"""

from __future__ import annotations

import copy
import functools
import json
import subprocess
import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from components.common.target import GPU_RESOURCE
from components.platform.aws.nodegroups import POOL_LABEL, SYSTEM_POOL, GpuNodeGroup, gpu_labels
from components.settings.capacity import DAEMONSET_MEMORY_MIB, HOSTNAME_KEY, MIB, cpu_node
from components.settings.model import Settings
from tritonft.kube import ApiError, Kube, condition_true, wait_for
from tritonft.synth.manifests import SECRET_PLACEHOLDER

REPO = Path(__file__).resolve().parents[3]

CRD_STUBS = {
    "ServiceMonitor": ("monitoring.coreos.com", "v1", "servicemonitors"),
    "PodMonitor": ("monitoring.coreos.com", "v1", "podmonitors"),
    "PrometheusRule": ("monitoring.coreos.com", "v1", "prometheusrules"),
    "Certificate": ("cert-manager.io", "v1", "certificates"),
    "ClusterIssuer": ("cert-manager.io", "v1", "clusterissuers"),
    "ScaledObject": ("keda.sh", "v1alpha1", "scaledobjects"),
}
"""Kinds the plan may use whose CRDs an add-on chart installs (stubbed here: group, version, plural)."""
CLUSTER_SCOPED_STUBS = frozenset({"ClusterIssuer"})
REAL_CRD_GROUPS = ("gateway.networking.k8s.io", "gateway.envoyproxy.io")
"""API groups whose real CRDs are installed (:func:`gateway_api_crds`)."""

FIRST = (
    "Namespace",
    "CustomResourceDefinition",
    "PriorityClass",
    "StorageClass",
    "PersistentVolume",
    "ServiceAccount",
    "Secret",
)
BEFORE_JOBS = ("ConfigMap", "PersistentVolumeClaim", "NetworkPolicy", "Service", "Role", "RoleBinding")
AFTER_JOBS = ("Deployment", "PodDisruptionBudget", "HorizontalPodAutoscaler", "Ingress")


def load_plan(manifests: Path) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for path in sorted(manifests.rglob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return docs


def retarget(objs: Iterable[dict[str, Any]], plan_namespace: str, namespace: str) -> list[dict[str, Any]]:
    """The plan's workload namespace becomes ``namespace``; annotations Pulumi reads are dropped; a Secret whose
    whole ``stringData``/``data`` synth masked gets a masked map of that shape (its real keys are secret too)."""
    out = []
    for original in objs:
        obj = copy.deepcopy(original)
        if obj["kind"] == "Secret":
            for key in ("data", "stringData"):
                if obj.get(key) == SECRET_PLACEHOLDER:
                    obj[key] = {"masked": SECRET_PLACEHOLDER if key == "stringData" else "W3NlY3JldF0="}
        meta = obj["metadata"]
        if obj["kind"] == "Namespace" and meta["name"] == plan_namespace:
            meta["name"] = namespace
        if meta.get("namespace") == plan_namespace:
            meta["namespace"] = namespace
        if obj["kind"] == "Secret":  # synth masks a Secret's values whole; the server needs a map
            for key in ("data", "stringData"):
                if obj.get(key) == SECRET_PLACEHOLDER:
                    obj[key] = {"masked": "unset"}
        if obj["kind"] in ADMISSION_KINDS:
            retarget_admission(obj, plan_namespace, namespace)
        out.append(obj)
    return out


ADMISSION_KINDS = ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
"""Cluster-scoped objects of a plan that name its namespace: renamed per test (:func:`retarget_admission`)."""


def retarget_admission(obj: dict[str, Any], plan_namespace: str, namespace: str) -> None:
    """An admission policy and its binding, cluster-scoped, made the test's own: the name (and the binding's policy)
    prefixed with the test's namespace, so tests sharing the control plane neither share nor overwrite one (the
    ``cluster`` fixture deletes them by that prefix), and a binding to the plan's namespace bound to the test's."""
    obj["metadata"]["name"] = f"{namespace}-{obj['metadata']['name']}"
    spec = obj.get("spec", {})
    if "policyName" in spec:
        spec["policyName"] = f"{namespace}-{spec['policyName']}"
    selected = spec.get("matchResources", {}).get("namespaceSelector", {}).get("matchLabels", {})
    if selected.get("kubernetes.io/metadata.name") == plan_namespace:
        selected["kubernetes.io/metadata.name"] = namespace


def crd_stub(kind: str) -> dict[str, Any]:
    group, version, plural = CRD_STUBS[kind]
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}", "labels": {"triton-ft.io/test-stub": "true"}},
        "spec": {
            "group": group,
            "names": {"kind": kind, "plural": plural, "singular": kind.lower(), "listKind": f"{kind}List"},
            "scope": "Cluster" if kind in CLUSTER_SCOPED_STUBS else "Namespaced",
            "versions": [
                {
                    "name": version,
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                }
            ],
        },
    }


def crd_established(kube: Kube, name: str) -> bool:
    return condition_true(kube.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", name), "Established")


@functools.cache
def gateway_api_modules() -> Path:
    """The Go module cache holding the Gateway API's and Envoy Gateway's sources at the versions the stack installs
    (fetched once by ``scripts/setup/gateway_api.sh``)."""
    return Path(
        subprocess.run(
            ["bash", str(REPO / "scripts/setup/gateway_api.sh")], check=True, capture_output=True, text=True
        ).stdout.strip()
    )


def envoy_gateway_source() -> Path:
    """Envoy Gateway's source tree at the release the stack installs."""
    from components.platform.aws.charts import ENVOY_GATEWAY

    return gateway_api_modules() / f"github.com/envoyproxy/gateway@{ENVOY_GATEWAY.version}"


@functools.cache
def gateway_api_crds() -> tuple[dict[str, Any], ...]:
    """The real CRDs of the Gateway API (standard channel) and of Envoy Gateway, read from their Go modules at the
    versions the stack installs (fetched once by ``scripts/setup/gateway_api.sh``)."""
    from components.platform.aws.charts import GATEWAY_API_VERSION

    gateway_api = gateway_api_modules() / f"sigs.k8s.io/gateway-api@{GATEWAY_API_VERSION}/config/crd/standard"
    envoy = envoy_gateway_source() / "charts/gateway-helm/charts/crds/crds"
    files = sorted(gateway_api.glob("gateway.networking.k8s.io_*.yaml")) + sorted(envoy.glob("generated/*.yaml"))
    crds = [
        d for f in files for d in yaml.safe_load_all(f.read_text()) if d and d["kind"] == "CustomResourceDefinition"
    ]
    if not crds:
        raise AssertionError(f"no CRDs found under {gateway_api} and {envoy}")
    return tuple(crds)


_installed: weakref.WeakKeyDictionary[Kube, set[str]] = weakref.WeakKeyDictionary()
"""Per API server client, the CRDs :func:`install_crds` applied and saw established, by name and content: no test
deletes one, and applying an unchanged CRD again still costs the API server a server-side apply of its whole schema
(Envoy Gateway's are large): the control-plane lanes applied 668 of them before this, 50 s of the API server's time."""


def install_crds(kube: Kube, kinds: Iterable[str], api_groups: Iterable[str] = ()) -> None:
    crds = [crd_stub(kind) for kind in sorted(set(kinds) & set(CRD_STUBS))]
    if set(api_groups) & set(REAL_CRD_GROUPS):
        crds += gateway_api_crds()
    done = _installed.setdefault(kube, set())
    new = [(crd, key) for crd in crds if (key := json.dumps(crd, sort_keys=True)) not in done]
    for crd, _ in new:
        kube.apply(crd)
    for crd, key in new:
        name = crd["metadata"]["name"]
        wait_for(f"CRD {name} established", functools.partial(crd_established, kube, name), 60)
        done.add(key)
    if new:
        kube.forget_discovery()


@dataclass(frozen=True)
class Plan:
    """A stack's settings and the manifests ``tritonft synth`` wrote for it."""

    settings: Settings
    manifests: Path

    def deployment(self, instance: str) -> str:
        """The name of the Triton Deployment of ``instance`` (``<stack>-<model>``): ``<instance>-<serving version>``
        since a model's Deployment is keyed by what it serves (``components.serving.promotion``)."""
        return served_deployment(load_plan(self.manifests), instance)


def served_deployment(objs: Iterable[dict[str, Any]], instance: str) -> str:
    """The name of the one Deployment of ``objs`` labelled ``app.kubernetes.io/instance: <instance>``."""
    (name,) = [
        o["metadata"]["name"]
        for o in objs
        if o["kind"] == "Deployment" and o["metadata"].get("labels", {}).get("app.kubernetes.io/instance") == instance
    ]
    return str(name)


@dataclass(frozen=True)
class NodeShape:
    name: str
    labels: dict[str, str]
    taints: list[dict[str, str]]
    allocatable: dict[str, str]


def gpu_node_shape(settings: Settings, name: str, gpus: int | None = None) -> NodeShape:
    """A GPU node as the stack's node group makes it (aws) or as its selector/tolerations expect (kubernetes)."""
    cluster = settings.cluster
    if cluster.platform == "aws":
        labels = gpu_labels(GpuNodeGroup(name="gpu", instance_types=(cluster.gpu_node.name,)))
        taints = [{"key": GPU_RESOURCE, "value": "true", "effect": "NoSchedule"}]
    else:
        labels = dict(cluster.gpu_node_selector)
        taints = [
            {"key": t["key"], "value": t.get("value", "true"), "effect": t.get("effect", "NoSchedule")}
            for t in cluster.gpu_tolerations
            if "key" in t
        ]
    count = cluster.gpu_node.gpus if gpus is None else gpus
    return NodeShape(
        name,
        labels,
        taints,
        {"cpu": "48", "memory": "192Gi", "pods": "110", "ephemeral-storage": "500Gi", GPU_RESOURCE: str(count)},
    )


def cpu_node_shape(settings: Settings, name: str) -> NodeShape:
    """A CPU node of the stack: an aws stack's system node, with its ``systemInstanceType``'s allocatable CPU and
    memory (EKS's reservations and the system DaemonSets' allowance taken off:
    :func:`components.settings.capacity.cpu_node`) where that type is known; else 8 CPUs and 32 GiB."""
    labels = (
        {POOL_LABEL: SYSTEM_POOL} if settings.cluster.platform == "aws" else dict(settings.cluster.cpu_node_selector)
    )
    allocatable = {"cpu": "8", "memory": "32Gi", "pods": "110", "ephemeral-storage": "200Gi"}
    node = cpu_node(settings.cluster.aws.system_instance_type) if settings.cluster.aws else None
    if node is not None:
        allocatable["cpu"] = f"{int(node.allocatable_cpu * 1000)}m"
        allocatable["memory"] = f"{(node.allocatable_memory - DAEMONSET_MEMORY_MIB * MIB) // MIB}Mi"
    return NodeShape(name, labels, [], allocatable)


def node_object(shape: NodeShape) -> dict[str, Any]:
    """The Node as a kubelet registers it: with its capacity in the status (kwok's node stages keep it)."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": shape.name,
            "labels": {**shape.labels, HOSTNAME_KEY: shape.name, "type": "kwok"},
            "annotations": {"kwok.x-k8s.io/node": "fake"},
        },
        "spec": {"taints": shape.taints},
        "status": {"capacity": shape.allocatable, "allocatable": shape.allocatable},
    }


NOT_READY_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")


def node_ready(node: Mapping[str, Any], shape: NodeShape) -> bool:
    """Ready with the shape's capacity, and without the not-ready taint: the API server's admission puts it on
    every new node and the node lifecycle controller lifts it only some seconds after the node turns Ready (more
    under load); until then the scheduler places nothing there and preflight reports the taint."""
    status = node.get("status", {})
    conditions = {c["type"]: c["status"] for c in status.get("conditions", [])}
    taints = {t.get("key") for t in node.get("spec", {}).get("taints") or []}
    return (
        conditions.get("Ready") == "True"
        and all(status.get("allocatable", {}).get(k) == v for k, v in shape.allocatable.items())
        and not taints.intersection(NOT_READY_TAINTS)
    )


def create_nodes(kube: Kube, shapes: Sequence[NodeShape], timeout_s: float = 60) -> None:
    """Register the nodes (a POST keeps the status, as for a kubelet; a status patch after kwok initialised the
    node would race kwok's own status writes) and wait until they are :func:`node_ready`."""
    for shape in shapes:
        kube.request("POST", kube.path("v1", "Node", None), body=node_object(shape))

    def ready() -> bool:
        nodes = {n["metadata"]["name"]: n for n in kube.items("v1", "Node")}
        return all(node_ready(nodes.get(s.name, {}), s) for s in shapes)

    wait_for("the simulated nodes to be Ready with their GPUs", ready, timeout_s)


def bind_store(kube: Kube, objs: Iterable[dict[str, Any]], pv_prefix: str) -> None:
    """A PersistentVolume for each claim, as the storage class's provisioner creates it: bound to the claim by its
    UID, which the volume controller completes at once (a volume bound by name only waits for the controller's
    periodic claim sync, up to 15 s, and a pod created meanwhile for its next scheduling attempt)."""
    for claim in (o for o in objs if o["kind"] == "PersistentVolumeClaim"):
        spec, meta = claim["spec"], claim["metadata"]
        uid = kube.get("v1", "PersistentVolumeClaim", meta["name"], meta["namespace"])["metadata"]["uid"]
        kube.apply(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolume",
                "metadata": {
                    "name": f"{pv_prefix}-{meta['name']}",
                    "annotations": {"pv.kubernetes.io/provisioned-by": "efs.csi.aws.com"},
                },
                "spec": {
                    "capacity": {"storage": spec["resources"]["requests"]["storage"]},
                    "accessModes": spec["accessModes"],
                    "storageClassName": spec.get("storageClassName", ""),
                    "persistentVolumeReclaimPolicy": "Delete",
                    "claimRef": {"namespace": meta["namespace"], "name": meta["name"], "uid": uid},
                    "csi": {"driver": "efs.csi.aws.com", "volumeHandle": f"fs-{pv_prefix}"},
                },
            }
        )


def by_kind(objs: Iterable[dict[str, Any]], kinds: Sequence[str]) -> list[dict[str, Any]]:
    return sorted((o for o in objs if o["kind"] in kinds), key=lambda o: kinds.index(o["kind"]))


def job_complete(kube: Kube, namespace: str, name: str) -> bool:
    return condition_true(kube.get("batch/v1", "Job", name, namespace), "Complete")


def apply_plan(kube: Kube, objs: Sequence[dict[str, Any]], pv_prefix: str, job_timeout_s: float = 90) -> list[str]:
    """Apply every object in dependency order; returns the names of what was applied (kind/name)."""
    applied: list[str] = []
    install_crds(kube, (o["kind"] for o in objs), (o["apiVersion"].split("/")[0] for o in objs))

    def apply(group: Sequence[dict[str, Any]]) -> None:
        for obj in group:
            try:
                kube.apply(obj)
            except ApiError as exc:
                raise ApiError(exc.status, f"{obj['kind']}/{obj['metadata']['name']}: {exc.message}") from None
            applied.append(f"{obj['kind']}/{obj['metadata']['name']}")

    apply(by_kind(objs, FIRST))
    apply(by_kind(objs, BEFORE_JOBS))
    bind_store(kube, objs, pv_prefix)
    jobs = [o for o in objs if o["kind"] == "Job"]
    apply(jobs)
    for job in jobs:
        meta = job["metadata"]
        wait_for(
            f"Job {meta['name']} to complete",
            functools.partial(job_complete, kube, meta["namespace"], meta["name"]),
            job_timeout_s,
        )
    apply(by_kind(objs, AFTER_JOBS))
    known = set(FIRST) | set(BEFORE_JOBS) | set(AFTER_JOBS) | {"Job"}
    apply([o for o in objs if o["kind"] not in known])
    return applied
