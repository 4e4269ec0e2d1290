"""prod's plan on the test control plane: its nodes (the issue's cluster), its deploy and what the tests read back.

The cluster is the issue's: prod's ``gpuNodesMin`` GPU nodes with 4 GPUs each, tainted and labelled as the stack's
node group, and 2 CPU nodes. The plan is the one ``tritonft synth`` writes, applied server-side.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from components.common.target import GPU_RESOURCE
from components.settings.model import Settings
from tests.system.controlplane.fixtures import Cluster
from tests.system.controlplane.plan import Plan, cpu_node_shape, gpu_node_shape
from tritonft.kube import wait_for

REPO = Path(__file__).resolve().parents[3]
SCHEDULE_TIMEOUT_S = 90
TRITON = "app.kubernetes.io/component=triton"


def add_prod_nodes(cluster: Cluster, settings: Settings, gpu_nodes: int | None = None) -> None:
    nodes = gpu_nodes if gpu_nodes is not None else settings.cluster.aws.gpu_nodes_min if settings.cluster.aws else 1
    ns = cluster.namespace
    cluster.add_nodes(
        [gpu_node_shape(settings, f"{ns}-gpu-{i}") for i in range(nodes)]
        + [cpu_node_shape(settings, f"{ns}-cpu-{i}") for i in range(2)]
    )


def triton_pods(cluster: Cluster, instance: str = "") -> list[Any]:
    """The Triton pods not being deleted (of one Deployment's ``app.kubernetes.io/instance`` if given)."""
    selector = f"{TRITON},app.kubernetes.io/instance={instance}" if instance else TRITON
    return [p for p in cluster.pods(selector) if not p["metadata"].get("deletionTimestamp")]


def gpus(pod: Any) -> int:
    return sum(int(c["resources"]["requests"].get(GPU_RESOURCE, 0)) for c in pod["spec"]["containers"])


def all_scheduled(cluster: Cluster, expected: int) -> list[Any] | None:
    pods = triton_pods(cluster)
    bound = [p for p in pods if p["spec"].get("nodeName")]
    return bound if len(pods) == expected and len(bound) == expected else None


def deploy(cluster: Cluster, plan: Plan, gpu_nodes: int | None = None) -> tuple[list[dict[str, Any]], list[str]]:
    """The issue's cluster, then every object of the plan (conversion Jobs completed first): the objects, and
    what the API server accepted."""
    add_prod_nodes(cluster, plan.settings, gpu_nodes)
    return cluster.apply(plan.manifests, plan.settings.namespace)


def deploy_and_schedule(cluster: Cluster, plan: Plan) -> list[Any]:
    """Deploy, then wait until every Triton pod at ``replicasMin`` is bound to a node; returns those pods."""
    deploy(cluster, plan)
    expected = plan.settings.serving.replicas_min * len(plan.settings.models)
    pods: list[Any] = wait_for(
        f"{expected} Triton pods scheduled", lambda: all_scheduled(cluster, expected), SCHEDULE_TIMEOUT_S
    )
    return pods


def copy_project(tmp_path: Path) -> Path:
    """The program and its stacks in a scratch directory, so a test can edit a stack file."""
    project = tmp_path / "project"
    project.mkdir()
    for name in ("Pulumi.yaml", "__main__.py"):
        shutil.copy(REPO / name, project / name)
    shutil.copytree(REPO / "stacks", project / "stacks")
    return project
