"""prod's plan deployed once per test module on the real control plane, with the pods the security tests look at:
the stack's Triton and gateway pods as the API server admitted them, a pod of the stack's namespace that is not the
gateway, and a pod of another namespace."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from components.common.podsec import container_security_context, pod_security_context
from tests.system.controlplane.fixtures import Cluster, remove_pods
from tests.system.controlplane.plan import Plan, retarget
from tests.system.controlplane.prod import deploy
from tests.system.controlplane.server import ControlPlane
from tests.system.netpol import Pod
from tritonft.kube import wait_for
from tritonft.synth.plandiff import load_plan as load_resources

TRITON = "app.kubernetes.io/component=triton"
GATEWAY = "app.kubernetes.io/component=gateway"
JUDGE_PODS = "app.kubernetes.io/component=judge"
_made = itertools.count(1)


@dataclass(frozen=True)
class Deployed:
    cluster: Cluster
    plan_objects: list[dict[str, Any]]
    applied: list[str]
    policies: list[dict[str, Any]]
    namespaces: dict[str, dict[str, str]]
    triton: list[Pod]
    gateway: list[Pod]
    intruder: Pod
    """A restricted-compliant pod of the stack's own namespace that is not the gateway."""
    outsider: Pod
    """A pod of the ``default`` namespace."""
    judges: list[Pod] = field(default_factory=list)
    """The pods of the plan's judge Jobs (a candidate's judge, ``components.serving.judge_job``), as the API server
    admitted them: each Job of the plan's in-cluster judges applied as the judge's provider applies it."""


JUDGE = "pulumi-python:dynamic/tritonft:InClusterJudge"


def judge_jobs(plan: Plan, namespace: str) -> list[dict[str, Any]]:
    """The judge Jobs of the plan's in-cluster judges (their manifests are the judges' inputs), in ``namespace``."""
    jobs = [r["inputs"]["job"] for r in load_resources(plan.manifests.parent) if r["type"] == JUDGE]
    return retarget(jobs, plan.settings.namespace, namespace)


def restricted_pod(name: str, namespace: str, labels: dict[str, str]) -> dict[str, Any]:
    """A pod that meets the ``restricted`` Pod Security Standard (the stack's own pod and container contexts)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "securityContext": pod_security_context(),
            "containers": [{"name": "c", "image": "busybox:1.36", "securityContext": container_security_context()}],
        },
    }


@contextlib.contextmanager
def deployed_prod(control_plane: ControlPlane, prod_plan: Plan) -> Iterator[Deployed]:
    """prod deployed in a namespace of its own with the visitors; everything removed afterwards."""
    kube = control_plane.kube
    cluster = Cluster(kube, f"np{next(_made)}-network-policies")
    try:
        objs, applied = deploy(cluster, prod_plan)
        settings = prod_plan.settings
        n_triton = settings.serving.replicas_min * len(settings.models)
        n_gateway = settings.serving.gateway.replicas_min
        wait_for(f"{n_triton} Triton pods", lambda: len(cluster.pods(TRITON)) == n_triton, 90)
        wait_for(f"{n_gateway} gateway pods", lambda: len(cluster.pods(GATEWAY)) == n_gateway, 90)
        jobs = judge_jobs(prod_plan, cluster.namespace)
        for job in jobs:
            kube.apply(job)
        wait_for(f"{len(jobs)} judge pods", lambda: len(cluster.pods(JUDGE_PODS)) == len(jobs), 90)
        kube.apply(restricted_pod("intruder", cluster.namespace, {"app": "intruder"}))
        kube.apply(restricted_pod(f"{cluster.namespace}-outsider", "default", {"app": "outsider"}))
        yield Deployed(
            cluster=cluster,
            plan_objects=objs,
            applied=applied,
            policies=kube.items("networking.k8s.io/v1", "NetworkPolicy", cluster.namespace),
            namespaces={
                ns["metadata"]["name"]: dict(ns["metadata"].get("labels") or {}) for ns in kube.items("v1", "Namespace")
            },
            triton=[Pod.from_object(p) for p in cluster.pods(TRITON)],
            gateway=[Pod.from_object(p) for p in cluster.pods(GATEWAY)],
            intruder=Pod.from_object(kube.get("v1", "Pod", "intruder", cluster.namespace)),
            outsider=Pod.from_object(kube.get("v1", "Pod", f"{cluster.namespace}-outsider", "default")),
            judges=[Pod.from_object(p) for p in cluster.pods(JUDGE_PODS)],
        )
    finally:
        kube.delete("v1", "Pod", f"{cluster.namespace}-outsider", "default")
        kube.delete("v1", "Namespace", cluster.namespace)
        remove_pods(kube, cluster.namespace)
        for node in cluster.nodes:
            kube.delete("v1", "Node", node)
        for pv in kube.items("v1", "PersistentVolume"):
            if pv["metadata"]["name"].startswith(cluster.namespace):
                kube.delete("v1", "PersistentVolume", pv["metadata"]["name"])
