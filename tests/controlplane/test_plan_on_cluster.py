"""prod's plan on a real kube-apiserver + kube-scheduler + kube-controller-manager, nodes simulated by kwok.

The cluster is the issue's: 3 GPU nodes with 4 GPUs each (prod's ``gpuNodesMin``), tainted and labelled as the
stack's node group, and 2 CPU nodes. The plan is the one ``tritonft synth`` writes, applied server-side.
"""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from components.cluster import GPU_RESOURCE
from components.settings.model import Settings
from components.settings.stack_file import settings_from_stack_file
from tests.controlplane.conftest import Cluster
from tests.controlplane.plan import cpu_node_shape, gpu_node_shape
from tritonft.errors import UserError
from tritonft.kube import wait_for
from tritonft.synth.run import synthesize

REPO = Path(__file__).resolve().parents[2]
SCHEDULE_TIMEOUT_S = 90


@pytest.fixture(scope="module")
def prod(tmp_path_factory: pytest.TempPathFactory) -> tuple[Settings, Path]:
    out = tmp_path_factory.mktemp("prod-plan")
    synthesize("prod", out=out, project_dir=REPO)
    return settings_from_stack_file(REPO, "prod"), out / "manifests"


def prod_cluster(cluster: Cluster, settings: Settings) -> None:
    nodes = settings.cluster.aws.gpu_nodes_min if settings.cluster.aws else 1
    ns = cluster.namespace
    cluster.add_nodes(
        [gpu_node_shape(settings, f"{ns}-gpu-{i}") for i in range(nodes)]
        + [cpu_node_shape(settings, f"{ns}-cpu-{i}") for i in range(2)]
    )


def triton_pods(cluster: Cluster) -> list[Any]:
    return cluster.pods("app.kubernetes.io/component=triton")


def gpus(pod: Any) -> int:
    return sum(int(c["resources"]["requests"].get(GPU_RESOURCE, 0)) for c in pod["spec"]["containers"])


def all_scheduled(cluster: Cluster, expected: int) -> list[Any] | None:
    pods = [p for p in triton_pods(cluster) if not p["metadata"].get("deletionTimestamp")]
    bound = [p for p in pods if p["spec"].get("nodeName")]
    return bound if len(pods) == expected and len(bound) == expected else None


def rolled_out(cluster: Cluster, name: str) -> bool:
    d = cluster.kube.get("apps/v1", "Deployment", name, cluster.namespace)
    status, want = d.get("status", {}), d["spec"]["replicas"]
    return bool(
        status.get("observedGeneration", 0) >= d["metadata"]["generation"]
        and status.get("updatedReplicas") == want
        and status.get("availableReplicas") == want
        and status.get("replicas") == want
    )


def deploy_prod(cluster: Cluster, prod: tuple[Settings, Path]) -> list[Any]:
    settings, manifests = prod
    prod_cluster(cluster, settings)
    cluster.apply(manifests, settings.namespace)
    expected = settings.serving.replicas_min * len(settings.models)
    pods: list[Any] = wait_for(
        f"{expected} Triton pods scheduled", lambda: all_scheduled(cluster, expected), SCHEDULE_TIMEOUT_S
    )
    return pods


def test_prod_fits_at_replicas_min_with_every_triton_pod_on_a_gpu_node(
    cluster: Cluster, prod: tuple[Settings, Path]
) -> None:
    settings, _ = prod
    pods = deploy_prod(cluster, prod)
    nodes = {n["metadata"]["name"]: n for n in cluster.kube.items("v1", "Node")}
    used: Counter[str] = Counter()
    for pod in pods:
        node = nodes[pod["spec"]["nodeName"]]
        assert node["metadata"]["labels"]["triton-ft.io/accelerator"] == "nvidia"
        used[node["metadata"]["name"]] += gpus(pod)
    assert all(used[n] <= int(nodes[n]["status"]["allocatable"][GPU_RESOURCE]) for n in used)
    assert sum(used.values()) == 10  # 2 x 4 (t5-3b) + 2 x 1 (gpt-j-6b)
    by_model = Counter(p["metadata"]["labels"]["app.kubernetes.io/instance"] for p in pods)
    assert by_model == {f"prod-{m.name}": settings.serving.replicas_min for m in settings.models}


def test_the_one_gpu_pods_share_a_node_leaving_whole_nodes_to_the_four_gpu_model(
    cluster: Cluster, prod: tuple[Settings, Path]
) -> None:
    pods = deploy_prod(cluster, prod)
    small = {p["spec"]["nodeName"] for p in pods if gpus(p) == 1}
    big = {p["spec"]["nodeName"] for p in pods if gpus(p) == 4}
    assert len(small) == 1
    assert len(big) == 2 and small.isdisjoint(big)


def test_conversion_jobs_run_on_cpu_nodes_and_complete(cluster: Cluster, prod: tuple[Settings, Path]) -> None:
    settings, manifests = prod
    prod_cluster(cluster, settings)
    objs, applied = cluster.apply(manifests, settings.namespace)
    jobs = [o["metadata"]["name"] for o in objs if o["kind"] == "Job"]
    assert len(jobs) == len(settings.models)
    for pod in cluster.pods("app.kubernetes.io/component=conversion"):
        node = cluster.kube.get("v1", "Node", pod["spec"]["nodeName"])
        assert node["metadata"]["labels"]["triton-ft.io/node-pool"] == "system"
        assert pod["status"]["phase"] == "Succeeded"
    assert len(applied) == len(objs), "every object of the plan was accepted"


def copy_project(tmp_path: Path) -> Path:
    """The program and its stacks in a scratch directory, so a test can edit a stack file."""
    project = tmp_path / "project"
    project.mkdir()
    for name in ("Pulumi.yaml", "__main__.py"):
        shutil.copy(REPO / name, project / name)
    shutil.copytree(REPO / "stacks", project / "stacks")
    return project


def _changed_prod(tmp_path: Path) -> Path:
    """prod with t5-3b's maxBatchSize 32 -> 16 (the issue's change), synthesised."""
    project = copy_project(tmp_path)
    stack = project / "stacks/Pulumi.prod.yaml"
    text = stack.read_text()
    assert "maxBatchSize: 32" in text
    stack.write_text(text.replace("maxBatchSize: 32", "maxBatchSize: 16", 1))
    synthesize("prod", out=tmp_path / "out", project_dir=project)
    return tmp_path / "out/manifests"


def test_a_change_to_a_model_rolls_out_to_completion_on_a_full_cluster(
    cluster: Cluster, prod: tuple[Settings, Path], tmp_path: Path
) -> None:
    settings, _ = prod
    deploy_prod(cluster, prod)
    name = "prod-t5-3b"
    before = cluster.kube.get("apps/v1", "Deployment", name, cluster.namespace)
    changed = _changed_prod(tmp_path)
    cluster.apply(changed, settings.namespace)
    after = cluster.kube.get("apps/v1", "Deployment", name, cluster.namespace)
    assert after["metadata"]["generation"] > before["metadata"]["generation"], "the change reached the Deployment"
    assert after["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 0, "maxUnavailable": 1}
    wait_for(f"{name} to roll out", lambda: rolled_out(cluster, name), SCHEDULE_TIMEOUT_S)


def test_a_plan_that_cannot_fit_is_refused_before_any_resource(cluster: Cluster, tmp_path: Path) -> None:
    project = copy_project(tmp_path)
    stack = project / "stacks/Pulumi.prod.yaml"
    text = stack.read_text()
    for key in ("gpuNodesMin", "gpuNodesMax", "gpuNodesDesired"):
        text = "\n".join(
            f"  triton-ft:{key}: 2" if line.startswith(f"  triton-ft:{key}:") else line for line in text.splitlines()
        )
    stack.write_text(text + "\n")
    with pytest.raises(UserError) as info:
        synthesize("prod", out=tmp_path / "out", project_dir=project)
    assert "replicasMin: 2 x 4 (t5-3b) + 2 x 1 (gpt-j-6b) = 10 GPUs need 3" in str(info.value)
    assert not (tmp_path / "out").exists()
    assert cluster.kube.items("v1", "Pod", cluster.namespace) == []
