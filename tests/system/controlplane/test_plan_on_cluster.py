"""prod's plan on a real kube-apiserver + kube-scheduler + kube-controller-manager, nodes simulated by kwok.

The issue's three failures, each shown on the real scheduler: prod at ``replicasMin`` fits its ``gpuNodesMin``
nodes (capacity), the 1-GPU pods pack onto one node so both 4-GPU replicas find whole nodes (fragmentation), and a
change to a model rolls out to completion on the full cluster (rollouts that hang).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from components.common.target import GPU_RESOURCE
from components.platform.aws.nodegroups import POOL_LABEL, SYSTEM_POOL
from components.settings.capacity import PACKING_LABEL
from tests.plans import deploy_secrets
from tests.system.controlplane.fixtures import Cluster
from tests.system.controlplane.plan import Plan, gpu_node_shape, load_plan, retarget
from tests.system.controlplane.prod import copy_project, deploy, deploy_and_schedule, gpus, triton_pods
from tritonft.errors import UserError
from tritonft.kube import wait_for
from tritonft.rollout.verdict import NodeGrowth
from tritonft.rollout.watch import WatchConfig, watch_rollout
from tritonft.synth.run import synthesize


def test_prod_fits_at_replicas_min_with_every_gpu_models_triton_pod_on_a_gpu_node_with_its_gpus(
    cluster: Cluster, prod_plan: Plan
) -> None:
    settings = prod_plan.settings
    pods = deploy_and_schedule(cluster, prod_plan)
    nodes = {n["metadata"]["name"]: n for n in cluster.kube.items("v1", "Node")}
    used: Counter[str] = Counter()
    for pod in [p for p in pods if gpus(p)]:
        node = nodes[pod["spec"]["nodeName"]]
        assert node["metadata"]["labels"]["triton-ft.io/accelerator"] == "nvidia"
        assert any(t["key"] == GPU_RESOURCE for t in node["spec"]["taints"])
        used[node["metadata"]["name"]] += gpus(pod)
    assert all(used[n] <= int(nodes[n]["status"]["allocatable"][GPU_RESOURCE]) for n in used)
    assert sum(used.values()) == sum(settings.serving.replicas_min * m.gpus for m in settings.models) == 12
    by_model = Counter(p["metadata"]["labels"]["app.kubernetes.io/instance"] for p in pods)
    assert by_model == {f"prod-{m.name}": settings.serving.replicas_min for m in settings.models}


def test_each_models_replicas_land_on_different_nodes_leaving_whole_nodes_to_the_four_gpu_model(
    cluster: Cluster, prod_plan: Plan
) -> None:
    pods = deploy_and_schedule(cluster, prod_plan)
    small = [p["spec"]["nodeName"] for p in pods if p["metadata"]["labels"].get(PACKING_LABEL) == "partial"]
    big = [p["spec"]["nodeName"] for p in pods if p["metadata"]["labels"].get(PACKING_LABEL) == "whole"]
    by_model: dict[str, list[str]] = {}
    for pod in pods:
        if pod["metadata"]["labels"].get(PACKING_LABEL) == "partial":
            by_model.setdefault(pod["metadata"]["labels"]["triton-ft/model"], []).append(pod["spec"]["nodeName"])
    assert sorted(by_model) == ["gpt-j-6b", "llama-3-1-8b"]
    for model, nodes in by_model.items():
        assert len(nodes) == len(set(nodes)) == 2, f"{model}'s replicas on two nodes (one node lost, one left): {nodes}"
    assert len(big) == len(set(big)) == 2 and set(small).isdisjoint(big), "each t5-3b replica on a node of its own"


def test_the_cpu_encoders_pods_land_on_cpu_nodes_without_gpus_next_to_the_generators(
    cluster: Cluster, prod_plan: Plan
) -> None:
    settings = prod_plan.settings
    pods = deploy_and_schedule(cluster, prod_plan)
    on_cpu = {m.name for m in settings.models if m.on_cpu}
    assert on_cpu, "prod serves an encoder on CPU nodes"
    encoder_pods = [p for p in pods if p["metadata"]["labels"]["triton-ft/model"] in on_cpu]
    assert len(encoder_pods) == settings.serving.replicas_min * len(on_cpu)
    for pod in encoder_pods:
        assert gpus(pod) == 0
        node = cluster.kube.get("v1", "Node", pod["spec"]["nodeName"])
        assert node["metadata"]["labels"][POOL_LABEL] == SYSTEM_POOL
        assert GPU_RESOURCE not in node["status"]["allocatable"] and not node["spec"].get("taints")
    generator_nodes = {p["spec"]["nodeName"] for p in pods if gpus(p)}
    assert generator_nodes and generator_nodes.isdisjoint(p["spec"]["nodeName"] for p in encoder_pods)


def test_conversion_jobs_run_on_cpu_nodes_and_complete_and_every_object_is_accepted(
    cluster: Cluster, prod_plan: Plan
) -> None:
    settings = prod_plan.settings
    objs, applied = deploy(cluster, prod_plan)
    jobs = [o["metadata"]["name"] for o in objs if o["kind"] == "Job"]
    # One Job per model, and a T5/GPT-2/GPT-J model's reference Job beside its conversion Job.
    assert len(jobs) == len(settings.models) + sum(m.family.is_fastertransformer for m in settings.models)
    conversion_pods = cluster.pods("app.kubernetes.io/component=conversion")
    assert {p["metadata"]["labels"]["job-name"] for p in conversion_pods} == set(jobs)
    for pod in conversion_pods:
        node = cluster.kube.get("v1", "Node", pod["spec"]["nodeName"])
        assert node["metadata"]["labels"][POOL_LABEL] == SYSTEM_POOL
        assert pod["status"]["phase"] == "Succeeded"
    assert len(applied) == len(objs), "every object of the plan was accepted"


def changed_prod(tmp_path: Path) -> Path:
    """prod assuming a slower model store (loadBandwidthMiBps 47 -> 30), synthesised: every Triton pod's start-up
    probe allows longer, a change to the pods that leaves what each model serves (its serving version) as it was, so
    the Deployments roll in place. (A change to what a model serves, e.g. its maxBatchSize, brings a new version up
    beside it instead: test_judged_promotion.py.)"""
    project = copy_project(tmp_path)
    stack = project / "stacks/Pulumi.prod.yaml"
    text = stack.read_text()
    assert "loadBandwidthMiBps" not in text
    stack.write_text(text.replace("config:\n", "config:\n  triton-ft:loadBandwidthMiBps: 30\n", 1))
    synthesize("prod", out=tmp_path / "out", project_dir=project, assume_secrets=deploy_secrets("prod"))
    return tmp_path / "out/manifests"


def test_a_change_to_the_whole_node_model_surges_and_never_has_fewer_replicas_on_nodes(
    cluster: Cluster, prod_plan: Plan, tmp_path: Path
) -> None:
    """On a full cluster t5-3b's surge pod waits for a node, which cluster-autoscaler adds (here: the test, once the
    pod is pending, within gpuNodesMax); meanwhile no old replica is removed. Counted as replicas bound to a node and
    not being deleted (kwok's readiness follows its node leases, which a starved machine lets lapse)."""
    settings = prod_plan.settings
    deploy_and_schedule(cluster, prod_plan)
    instance = "prod-t5-3b"
    name = prod_plan.deployment(instance)
    replicas = settings.serving.replicas_min
    growth = NodeGrowth(autoscaler=True, nodes_max=settings.cluster.aws.gpu_nodes_max if settings.cluster.aws else 1)
    config = WatchConfig(cluster.namespace, name, growth, deadline_s=120, min_replicas=replicas, poll_s=1)
    watch_rollout(cluster.kube, config)
    before = cluster.kube.get("apps/v1", "Deployment", name, cluster.namespace)
    old_pods = {p["metadata"]["name"] for p in triton_pods(cluster, instance)}
    on_nodes: list[int] = []

    def sample() -> list[Any]:
        pods = triton_pods(cluster, instance)
        on_nodes.append(sum(1 for p in pods if p["spec"].get("nodeName")))
        return pods

    # Only t5-3b's Deployment changes: were the 1-GPU models to roll too, their new pods could gather on one node
    # and leave another whole node free, where the surge pod would then land without waiting.
    changed = retarget(load_plan(changed_prod(tmp_path)), settings.namespace, cluster.namespace)
    cluster.kube.apply(next(o for o in changed if o["kind"] == "Deployment" and o["metadata"]["name"] == name))
    after = cluster.kube.get("apps/v1", "Deployment", name, cluster.namespace)
    assert after["metadata"]["generation"] > before["metadata"]["generation"], "the change reached the Deployment"
    assert after["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}
    wait_for("t5-3b's surge pod pending for a node", lambda: any(not p["spec"].get("nodeName") for p in sample()), 60)
    cluster.add_nodes([gpu_node_shape(settings, f"{cluster.namespace}-gpu-surge")])

    def rolled() -> bool:
        pods = sample()
        new = {p["metadata"]["name"] for p in pods if p["spec"].get("nodeName")}
        return len(pods) == len(new) == replicas and new.isdisjoint(old_pods)

    wait_for("t5-3b rolled out", rolled, 180, interval_s=0.2)
    assert min(on_nodes) >= replicas, f"t5-3b replicas on nodes through the rollout: {on_nodes}"


def test_a_plan_that_cannot_fit_is_refused_before_any_resource(tmp_path: Path) -> None:
    project = copy_project(tmp_path)
    stack = project / "stacks/Pulumi.prod.yaml"
    text = stack.read_text()
    for key in ("gpuNodesMin", "gpuNodesMax", "gpuNodesDesired"):
        text = "\n".join(
            f"  triton-ft:{key}: 2" if line.startswith(f"  triton-ft:{key}:") else line for line in text.splitlines()
        )
    stack.write_text(text + "\n")
    with pytest.raises(UserError) as info:
        synthesize("prod", out=tmp_path / "out", project_dir=project, assume_secrets=deploy_secrets("prod"))
    assert "replicasMin: 2 x 4 (t5-3b) + 2 x 1 (gpt-j-6b) + 2 x 1 (llama-3-1-8b) = 12 GPUs need 4" in str(info.value)
    assert not (tmp_path / "out").exists(), "nothing of the plan was written, so nothing can be applied"
