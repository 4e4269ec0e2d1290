"""Every object a pod, a claim or a chart of the built stacks' plans refers to by name (ConfigMaps, claims,
StorageClasses, PriorityClasses, IngressClasses, namespaces) is made by the same plan, or is one Kubernetes itself
makes: the cluster these stacks build starts empty, so nothing else can be relied on. (Secrets, the Gateway's
class, proxy config and issuer: ``test_eks_plan_checks.py`` and ``tests/tritonft/synth/test_edge_plan.py``.)"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.components.platform.aws.test_eks_plan_checks import BUILT, charts, manifests
from tests.plans import StackPlans

WORKLOADS = ("Deployment", "Job", "StatefulSet", "DaemonSet")
KUBERNETES_MADE_CONFIGMAPS = {"kube-root-ca.crt"}
"""Published into every namespace by the control plane's root-CA publisher."""
BUILT_IN_PRIORITY_CLASSES = {"system-cluster-critical", "system-node-critical"}


def made(objs: list[dict[str, Any]], kind: str) -> set[tuple[str | None, str]]:
    return {(o["metadata"].get("namespace"), o["metadata"]["name"]) for o in objs if o["kind"] == kind}


def pods(objs: list[dict[str, Any]]) -> Iterator[tuple[str, str | None, dict[str, Any]]]:
    for o in objs:
        if o["kind"] in WORKLOADS:
            yield o["metadata"]["name"], o["metadata"].get("namespace"), o["spec"]["template"]["spec"]


def configmap_refs(pod: dict[str, Any]) -> Iterator[str]:
    for volume in pod.get("volumes", []):
        if "configMap" in volume:
            yield volume["configMap"]["name"]
        for source in volume.get("projected", {}).get("sources", []):
            if "configMap" in source:
                yield source["configMap"]["name"]
    for container in pod.get("containers", []) + pod.get("initContainers", []):
        for source in container.get("envFrom", []):
            if "configMapRef" in source:
                yield source["configMapRef"]["name"]
        for env in container.get("env", []):
            ref = env.get("valueFrom", {}).get("configMapKeyRef")
            if ref:
                yield ref["name"]


@pytest.mark.parametrize("stack", BUILT)
def test_every_configmap_and_claim_a_pod_mounts_is_made_by_the_plan(stack_plan: StackPlans, stack: str) -> None:
    objs = manifests(stack_plan(stack))
    configmaps, claims = made(objs, "ConfigMap"), made(objs, "PersistentVolumeClaim")
    checked = 0
    for name, namespace, pod in pods(objs):
        for ref in configmap_refs(pod):
            checked += 1
            assert ref in KUBERNETES_MADE_CONFIGMAPS or (namespace, ref) in configmaps, (name, ref)
        for volume in pod.get("volumes", []):
            claim = volume.get("persistentVolumeClaim", {}).get("claimName")
            assert claim is None or (namespace, claim) in claims, (name, claim)
    assert checked, "the conversion Jobs and the gateway mount ConfigMaps"


@pytest.mark.parametrize("stack", BUILT)
def test_every_storage_class_a_claim_or_a_chart_names_is_made_by_the_plan(stack_plan: StackPlans, stack: str) -> None:
    plan = stack_plan(stack)
    objs = manifests(plan)
    classes = {name for _, name in made(objs, "StorageClass")}
    for claim in (o for o in objs if o["kind"] == "PersistentVolumeClaim"):
        assert claim["spec"].get("storageClassName") in classes, claim["metadata"]["name"]
    kps = charts(plan).get("kube-prometheus-stack")
    if kps is not None:
        values = kps.inputs["values"]
        for spec in (values["prometheus"]["prometheusSpec"], values["alertmanager"].get("alertmanagerSpec", {})):
            template = spec.get("storageSpec", spec.get("storage", {})).get("volumeClaimTemplate")
            if template:
                assert template["spec"]["storageClassName"] in classes


@pytest.mark.parametrize("stack", BUILT)
def test_every_priority_and_ingress_class_is_made_by_the_plan(stack_plan: StackPlans, stack: str) -> None:
    objs = manifests(stack_plan(stack))
    priorities = {name for _, name in made(objs, "PriorityClass")} | BUILT_IN_PRIORITY_CLASSES
    for name, _, pod in pods(objs):
        assert pod.get("priorityClassName", "system-node-critical") in priorities, (name, pod["priorityClassName"])
    ingress_classes = {name for _, name in made(objs, "IngressClass")}
    for ingress in (o for o in objs if o["kind"] == "Ingress"):
        assert ingress["spec"].get("ingressClassName") in ingress_classes, ingress["metadata"]["name"]


@pytest.mark.parametrize("stack", BUILT)
def test_every_chart_installs_into_a_namespace_the_plan_makes(stack_plan: StackPlans, stack: str) -> None:
    plan = stack_plan(stack)
    namespaces = {name for _, name in made(manifests(plan), "Namespace")} | {"kube-system"}
    for name, chart in charts(plan).items():
        assert chart.inputs.get("namespace") in namespaces, (name, chart.inputs.get("namespace"))
