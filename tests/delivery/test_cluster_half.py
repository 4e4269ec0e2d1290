"""The pure parts of the rehearsal's Kubernetes half (:mod:`tests.delivery.cluster_half`): what a pod references,
what the registry holds, where a pod may land, the nodes a stage starts with. The half itself runs on the real control
plane: ``tests/system/controlplane/test_delivery_rehearsal.py``."""

from __future__ import annotations

from typing import Any

from components.common.target import GPU_RESOURCE
from components.settings.stack_file import settings_from_stack_file
from tests.delivery.cluster_half import (
    STAGE_LABEL,
    expected_replicas,
    misplaced,
    missing_references,
    references,
    stage_nodes,
    unpromoted_images,
)
from tests.delivery.conftest import REPO
from tests.delivery.standins import image_resolves, pod_references, secret_refs

OURS = "123456789012.dkr.ecr.us-west-2.amazonaws.com/triton-ft"


def pod(**spec: Any) -> dict[str, Any]:
    return {"containers": [{"name": "c", "image": "busybox"}], **spec}


def test_a_pod_references_its_secrets_config_maps_claims_account_and_priority_class_but_no_optional_one() -> None:
    spec = pod(
        serviceAccountName="judge",
        priorityClassName="triton-batch",
        volumes=[
            {"name": "a", "secret": {"secretName": "token"}},
            {"name": "b", "secret": {"secretName": "maybe", "optional": True}},
            {"name": "c", "configMap": {"name": "spec"}},
            {"name": "d", "persistentVolumeClaim": {"claimName": "store"}},
            {"name": "e", "projected": {"sources": [{"configMap": {"name": "ca"}}, {"secret": {"name": "tls"}}]}},
        ],
        containers=[
            {
                "name": "c",
                "image": "busybox",
                "env": [{"name": "K", "valueFrom": {"configMapKeyRef": {"name": "env", "key": "k"}}}],
                "envFrom": [{"secretRef": {"name": "keys"}}],
            }
        ],
    )
    assert pod_references(spec) == {
        ("ServiceAccount", "judge"),
        ("PriorityClass", "triton-batch"),
        ("Secret", "token"),
        ("ConfigMap", "spec"),
        ("PersistentVolumeClaim", "store"),
        ("ConfigMap", "ca"),
        ("Secret", "tls"),
        ("ConfigMap", "env"),
        ("Secret", "keys"),
    }
    assert secret_refs(spec) == {"token", "tls", "keys"}


def test_a_pod_without_an_account_references_the_namespaces_default_one() -> None:
    assert pod_references(pod()) == {("ServiceAccount", "default")}


def test_a_workloads_references_are_namespaced_but_its_priority_class() -> None:
    job = {
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "ns"},
        "spec": {"template": {"spec": pod(priorityClassName="batch")}},
    }
    assert references(job) == {("ServiceAccount", "ns", "default"), ("PriorityClass", None, "batch")}


def test_an_image_resolves_by_its_digest_under_its_repository_only() -> None:
    registry = {f"{OURS}/server:abc-r1.1": "sha256:" + "a" * 64}
    assert image_resolves(f"{OURS}/server@sha256:{'a' * 64}", registry)
    assert not image_resolves(f"{OURS}/tools@sha256:{'a' * 64}", registry)
    assert not image_resolves(f"{OURS}/server@sha256:{'b' * 64}", registry)
    assert image_resolves(f"{OURS}/server:abc-r1.1", registry)


def test_only_images_of_the_stacks_registry_must_be_in_it() -> None:
    deployment = {
        "kind": "Deployment",
        "metadata": {"name": "d", "namespace": "ns"},
        "spec": {
            "template": {
                "spec": {
                    "containers": [{"name": "a", "image": f"{OURS}/tools@sha256:{'c' * 64}"}],
                    "initContainers": [{"name": "b", "image": "docker.io/library/busybox:1.36"}],
                }
            }
        },
    }
    assert unpromoted_images([deployment], {}, OURS) == [
        f"Deployment ns/d runs {OURS}/tools@sha256:{'c' * 64}, which the registry does not hold (never pushed): its "
        "pods fail with ErrImagePull"
    ]


def node(name: str, stage: str, pool: str, gpus: int) -> dict[str, Any]:
    allocatable = {GPU_RESOURCE: str(gpus)} if gpus else {}
    return {
        "metadata": {"name": name, "labels": {STAGE_LABEL: stage, "triton-ft.io/node-pool": pool}},
        "status": {"allocatable": allocatable},
    }


def placed(name: str, on: str, gpus: int) -> dict[str, Any]:
    requests = {GPU_RESOURCE: str(gpus)} if gpus else {}
    return {"metadata": {"name": name}, "spec": {"nodeName": on, "containers": [{"resources": {"requests": requests}}]}}


def test_a_pod_is_misplaced_off_its_stage_or_off_its_pool() -> None:
    nodes = {
        "g": node("g", "x-dev", "gpu", 4),
        "s": node("s", "x-dev", "system", 0),
        "other": node("other", "x-staging", "system", 0),
    }
    pods = [placed("ok-gpu", "g", 1), placed("ok-cpu", "s", 0), placed("cpu-on-gpu", "g", 0)]
    pods += [placed("gpu-on-cpu", "s", 1), placed("elsewhere", "other", 0)]
    assert misplaced(pods, nodes, "x-dev") == [
        "pod cpu-on-gpu asks for no GPU and is on g, not a system node",
        "pod gpu-on-cpu asks for 1 GPUs and is on s, no GPU node",
        "pod elsewhere is on other, not a node of x-dev",
    ]


def test_prod_starts_with_its_desired_gpu_nodes_and_its_minimum_of_system_nodes_of_its_instance_type() -> None:
    settings = settings_from_stack_file(REPO, "prod", ("hfToken",))
    shapes = stage_nodes(settings, "x", "prod")
    gpu = [s for s in shapes if GPU_RESOURCE in s.allocatable]
    system = [s for s in shapes if GPU_RESOURCE not in s.allocatable]
    assert len(gpu) == 4 and all(s.allocatable[GPU_RESOURCE] == "4" for s in gpu)
    assert len(system) == 2
    # r6i.2xlarge: 8 vCPUs, 64 GiB, less EKS's reservations and the DaemonSets' allowance
    assert system[0].allocatable["cpu"] == "7910m" and 55_000 < int(system[0].allocatable["memory"][:-2]) < 60_000
    assert {s.labels[STAGE_LABEL] for s in shapes} == {"x-prod"}


def test_a_deployment_an_autoscaler_owns_settles_at_the_autoscalers_minimum() -> None:
    deployments: list[dict[str, Any]] = [
        {"metadata": {"name": "owned"}, "spec": {}},
        {"metadata": {"name": "fixed"}, "spec": {"replicas": 3}},
        {"metadata": {"name": "above"}, "spec": {"replicas": 4}},
    ]
    autoscalers = [
        {"spec": {"scaleTargetRef": {"kind": "Deployment", "name": "owned"}, "minReplicas": 2}},
        {"spec": {"scaleTargetRef": {"kind": "Deployment", "name": "above"}, "minReplicas": 2}},
    ]
    assert expected_replicas(deployments, autoscalers) == 2 + 3 + 4


def test_a_reference_neither_created_nor_checked_nor_there_is_named_with_what_it_holds_up() -> None:
    job = {
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "ns"},
        "spec": {"template": {"spec": pod(volumes=[{"name": "t", "secret": {"secretName": "hf-token"}}])}},
    }
    known: set[tuple[str, str | None, str]] = {("ServiceAccount", "ns", "default")}
    assert missing_references([job], known, lambda ref: False) == [
        "Job ns/j needs Secret hf-token, which neither the stack creates nor `tritonft preflight` checks: the kubelet "
        "leaves its pods in ContainerCreating"
    ]
    assert missing_references([job], known | {("Secret", "ns", "hf-token")}, lambda ref: False) == []
    assert missing_references([job], known, lambda ref: ref == ("Secret", "ns", "hf-token")) == []
