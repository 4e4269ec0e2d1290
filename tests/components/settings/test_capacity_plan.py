"""The capacity decisions as they reach the plan: stack settings refused or warned, and prod's Deployments."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.args import rollout
from components.serving.promotion import VERSION_LABEL
from components.settings import load_settings
from components.settings.capacity import PACKING_LABEL, PLACEMENT_ANNOTATION
from tests.components.settings.test_validation import GPTJ, as_cli, aws_stack, kubernetes_stack, problems_of
from tests.plans import StackPlans, deploy_secrets
from tritonft.synth.stackfile import read_stack

REPO = Path(__file__).resolve().parents[3]
T5_3B_TP4 = {
    "name": "t5-3b",
    "hfRepo": "t5-3b",
    "revision": "bed96aab9ee46012a5046386105ee5fd0ac572f0",
    "tensorParallel": 4,
}


def two_model_stack(**overrides: Any) -> dict[str, Any]:
    return aws_stack(
        models=[dict(T5_3B_TP4), dict(GPTJ)],
        replicasMin=2,
        replicasMax=2,
        systemInstanceType="r6i.2xlarge",  # gpt-j-6b's judge reference Job: ~30 GiB (reference-job-fits-cpu-node)
        **overrides,
    )


def test_a_stack_whose_replicas_min_cannot_fit_is_refused_naming_the_keys_and_numbers() -> None:
    problems = problems_of(two_model_stack(gpuNodesMin=2, gpuNodesMax=2, gpuNodesDesired=2))
    assert problems == [
        "replicasMin: 2 x 4 (t5-3b) + 2 x 1 (gpt-j-6b) = 10 GPUs need 4 g5.12xlarge node(s) of 4 GPUs, but only "
        "gpuNodesMin 2 can exist; raise gpuNodesMin/gpuNodesMax to 4 or lower replicasMin"
    ]


def test_a_stack_that_fits_only_after_scale_up_loads_with_a_warning() -> None:
    values = as_cli(two_model_stack(gpuNodesMin=2, gpuNodesMax=4, gpuNodesDesired=2))
    settings = load_settings(values, project="triton-ft", stack="test")
    assert len(settings.warnings) == 1
    assert "waits while the node autoscaler adds 2 node(s)" in settings.warnings[0]


def test_an_existing_cluster_has_no_node_count_to_check_so_it_loads_without_warnings() -> None:
    settings = load_settings(as_cli(kubernetes_stack(gpusPerNode=4)), project="triton-ft", stack="test")
    assert settings.warnings == ()


@pytest.fixture(scope="module")
def prod_plan(stack_plan: StackPlans) -> Path:
    return stack_plan("prod").out / "manifests"


@pytest.fixture(scope="module")
def prod_deployments(prod_plan: Path) -> dict[str, dict[str, Any]]:
    docs = [yaml.safe_load(p.read_text()) for p in prod_plan.rglob("deployment-*.yaml")]
    return {d["metadata"]["labels"]["app.kubernetes.io/instance"]: d for d in docs if d["kind"] == "Deployment"}


def test_the_node_autoscaler_never_drains_a_node_under_a_running_conversion(prod_plan: Path) -> None:
    jobs = [yaml.safe_load(p.read_text()) for p in prod_plan.rglob("job-*.yaml")]
    assert len(jobs) == 6, (
        "one conversion (or download) Job per served model (t5-3b, gpt-j-6b, minilm, llama-3-1-8b) and a judge "
        "reference Job per FasterTransformer generator (t5-3b, gpt-j-6b)"
    )
    for job in jobs:
        annotations = job["spec"]["template"]["metadata"]["annotations"]
        assert annotations["cluster-autoscaler.kubernetes.io/safe-to-evict"] == "false"


def _by_model(deployments: dict[str, dict[str, Any]], model: str) -> dict[str, Any]:
    (found,) = [d for name, d in deployments.items() if name.endswith(model)]
    return found


@pytest.mark.parametrize("model", ["t5-3b", "gpt-j-6b", "minilm"])
def test_prod_rolls_every_model_by_surging_so_a_rollout_never_removes_capacity(
    prod_deployments: dict[str, dict[str, Any]], model: str
) -> None:
    assert _by_model(prod_deployments, model)["spec"]["strategy"]["rollingUpdate"] == {
        "maxSurge": 1,
        "maxUnavailable": 0,
    }


@pytest.mark.parametrize("stack", ["staging", "prod"])
def test_the_shipped_stacks_roll_each_gpu_model_with_a_surge_pod(stack: str) -> None:
    config = read_stack(REPO, stack, deploy_secrets(stack))
    prefix = f"{config.project}:"
    values = {k[len(prefix) :]: v for k, v in config.values.items() if k.startswith(prefix)}
    secrets = {k[len(prefix) :] for k in config.secret_keys if k.startswith(prefix)}
    settings = load_settings(values, project=config.project, stack=stack, secret_keys=secrets)
    rollouts = {m.name: rollout(settings, m) for m in settings.models if m.gpus}
    gpu_models = {"staging": ["t5-3b", "gpt-j-6b", "qwen2-5-7b"], "prod": ["t5-3b", "gpt-j-6b", "llama-3-1-8b"]}[stack]
    assert {name: (r.max_surge, r.max_unavailable) for name, r in rollouts.items()} == dict.fromkeys(
        gpu_models, (1, 0)
    ), "with one replica (staging) a replacement rollout is an outage"


def test_prod_packs_the_one_gpu_model_and_says_where_each_model_lands(
    prod_deployments: dict[str, dict[str, Any]],
) -> None:
    t5, gptj = _by_model(prod_deployments, "t5-3b"), _by_model(prod_deployments, "gpt-j-6b")
    assert t5["spec"]["template"]["metadata"]["labels"][PACKING_LABEL] == "whole"
    assert "podAffinity" not in t5["spec"]["template"]["spec"]["affinity"]
    assert gptj["spec"]["template"]["metadata"]["labels"][PACKING_LABEL] == "partial"
    assert "podAffinity" in gptj["spec"]["template"]["spec"]["affinity"]
    assert "taking all 4 GPUs" in t5["metadata"]["annotations"][PLACEMENT_ANNOTATION]
    assert "packed with other part-node models" in gptj["metadata"]["annotations"][PLACEMENT_ANNOTATION]


@pytest.mark.parametrize("model", ["t5-3b", "gpt-j-6b", "minilm", "llama-3-1-8b"])
def test_prod_spreads_each_models_replicas_over_nodes_and_zones(
    prod_deployments: dict[str, dict[str, Any]], model: str
) -> None:
    deployment = _by_model(prod_deployments, model)
    # the model's pods of every serving version (a candidate spreads away from the serving version's pods too)
    own = {k: v for k, v in deployment["spec"]["selector"]["matchLabels"].items() if k != VERSION_LABEL}
    pod = deployment["spec"]["template"]["spec"]
    (away,) = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert away["podAffinityTerm"] == {"labelSelector": {"matchLabels": own}, "topologyKey": "kubernetes.io/hostname"}
    (zones,) = pod["topologySpreadConstraints"]
    assert (zones["topologyKey"], zones["labelSelector"]) == ("topology.kubernetes.io/zone", {"matchLabels": own})


def test_prods_rollout_waits_know_the_cluster_autoscaler_can_grow_to_gpu_nodes_max(prod_plan: Path) -> None:
    resources = json.loads((prod_plan.parent / "resources.json").read_text())
    rollouts = {r["name"]: r["inputs"] for r in resources if r["type"] == "pulumi-python:dynamic/tritonft:RolloutWatch"}
    assert sorted(rollouts) == [
        "prod-gpt-j-6b-rollout",
        "prod-llama-3-1-8b-rollout",
        "prod-minilm-rollout",
        "prod-t5-3b-rollout",
    ]
    for name, inputs in rollouts.items():
        if name != "prod-minilm-rollout":
            assert (inputs["autoscaler"], inputs["nodes_max"]) == (True, 10)  # stacks/Pulumi.prod.yaml gpuNodesMax
        assert inputs["kubeconfig"] == "[secret]"


def test_prods_cpu_encoder_rollout_waits_for_no_gpu_node_autoscaler(prod_plan: Path) -> None:
    resources = json.loads((prod_plan.parent / "resources.json").read_text())
    (watch,) = [r["inputs"] for r in resources if r["name"] == "prod-minilm-rollout"]
    assert watch["autoscaler"] is False


def test_prods_llama_packs_with_the_other_one_gpu_model_and_surges(
    prod_deployments: dict[str, dict[str, Any]],
) -> None:
    llama = _by_model(prod_deployments, "llama-3-1-8b")
    assert llama["spec"]["template"]["metadata"]["labels"][PACKING_LABEL] == "partial"
    assert llama["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}


def judged_stack(**overrides: Any) -> dict[str, Any]:
    """t5-3b (a whole 4-GPU node a pod) and gpt-j-6b at 1..2 replicas on g5.12xlarge nodes, autoscaled."""
    addons = ["kube-prometheus-stack", "prometheus-adapter", "envoy-gateway", "cert-manager"]
    models = [dict(T5_3B_TP4), dict(GPTJ)]
    return aws_stack(
        models=models,
        replicasMin=1,
        replicasMax=2,
        gpuNodesMin=2,
        gpuNodesDesired=2,
        addons=addons,
        systemInstanceType="r6i.2xlarge",  # gpt-j-6b's judge reference Job (reference-job-fits-cpu-node)
        **overrides,
    )


def test_a_model_without_room_for_a_candidate_is_warned_that_it_is_judged_after_taking_traffic() -> None:
    settings = load_settings(as_cli(judged_stack(gpuNodesMax=3)), project="triton-ft", stack="test")

    (warning,) = settings.warnings
    assert warning.startswith("gpuNodesMax: models[0] 't5-3b' has no room for a candidate beside its serving version")
    assert (
        "is judged only after the roll (a wrong version fails `up` while it serves); gpuNodesMax 4 gives it room"
        in (warning)
    )
    assert rollout(settings, settings.models[0]).max_surge == 0, "it rolls in place, as the warning says"
    assert rollout(settings, settings.models[1]).max_surge == 1, "gpt-j-6b surges: it is judged first, unwarned"


def test_the_gpu_nodes_the_warning_names_give_the_model_its_candidate() -> None:
    settings = load_settings(as_cli(judged_stack(gpuNodesMax=4)), project="triton-ft", stack="test")

    assert settings.warnings == ()
    assert rollout(settings, settings.models[0]).max_surge == 1


def test_without_the_probe_nothing_is_judged_so_nothing_is_warned() -> None:
    settings = load_settings(as_cli(judged_stack(gpuNodesMax=3, probe=False)), project="triton-ft", stack="test")

    assert settings.warnings == ()


# -- an existing cluster that states its GPU nodes (gpuNodes) ---------------------------------------------------------


def _local(**changes: Any) -> Any:
    """``local``'s stack file, with ``changes`` to its keys."""
    config = read_stack(REPO, "local")
    values = {k.removeprefix("triton-ft:"): v for k, v in config.values.items()}
    values.update({k: str(v) for k, v in changes.items()})  # as the CLI hands them over: text
    return load_settings(values, project="triton-ft", stack="local")


def test_local_states_room_for_a_candidate_of_each_gpu_model_so_every_change_is_judged_before_traffic() -> None:
    settings = _local()
    assert settings.warnings == ()
    gpu_models = [m for m in settings.models if not m.on_cpu]
    assert [m.name for m in gpu_models] == ["t5-small", "qwen-0-5b"]
    assert all(rollout(settings, m).max_surge == 1 for m in gpu_models)


def test_a_lab_of_only_the_two_serving_gpus_is_told_before_up_that_changes_roll_in_place() -> None:
    settings = _local(gpuNodes=2)
    assert [w.split(" has no room")[0] for w in settings.warnings] == [
        "gpuNodes: models[0] 't5-small'",
        "gpuNodes: models[2] 'qwen-0-5b'",
    ]
    assert all(
        "is judged only after the roll (a wrong version fails `up` while it serves)" in w for w in settings.warnings
    )
    assert "gpuNodes 4 gives it room" in settings.warnings[1]
    assert all(rollout(settings, m).max_surge == 0 for m in settings.models if not m.on_cpu)


def test_an_existing_cluster_that_states_too_few_gpu_nodes_is_refused_naming_gpu_nodes() -> None:
    problems = problems_of(kubernetes_stack(gpuNodes=1, models=[dict(T5_3B_TP4), dict(GPTJ)], gpusPerNode=4))
    assert problems == [
        "replicasMin: 1 x 4 (t5-3b) + 1 x 1 (gpt-j-6b) = 5 GPUs need 2 existing node(s) of 4 GPUs, but only gpuNodes "
        "1 exist; raise gpuNodes to 2 (with the nodes) or lower replicasMin"
    ]


def test_an_existing_cluster_without_gpu_nodes_is_not_planned_on_and_tries_every_candidate() -> None:
    settings = load_settings(as_cli(kubernetes_stack(gpusPerNode=1)), project="triton-ft", stack="test")
    assert settings.warnings == ()
    assert rollout(settings, settings.models[0]).reason.startswith("cluster size unknown")
