"""FT's GEMM tuning step on a real kube-apiserver + kube-scheduler, prod's plan as ``tritonft synth`` writes it.

kwok's nodes run no containers, so what the control plane shows is where the tuning runs and with what: the real
scheduler binds each Triton pod, init container included, to a GPU node; the tuning asks for exactly Triton's GPUs,
which the scheduler does not add to Triton's (a 4-GPU pod still fits a 4-GPU node); Triton's container is declared
to start in the directory the tuning writes into, after it (kwok reports the init phase completed, as a kubelet
would); and every replica of a model points at the same per-key cache directory. What the script then does with
that cache (tune once, a second replica copies it, a failure falls back) is run for real in
``tests/tritonft/engines/fastertransformer/test_tune_script.py``.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from components.common.target import GPU_RESOURCE
from components.rollout_watch import RolloutWatchProvider
from components.serving.gemm_tuning import INIT_CONTAINER, WORKDIR, WORKDIR_VOLUME
from tests.system.controlplane.fixtures import Cluster
from tests.system.controlplane.plan import Plan
from tests.system.controlplane.prod import deploy_and_schedule
from tests.system.controlplane.server import ControlPlane
from tests.system.controlplane.test_fail_fast import props
from tests.tritonft.engines.fastertransformer.test_tune_script import start
from tritonft.kube import wait_for


def _init(pod: dict[str, Any]) -> dict[str, Any]:
    (init,) = pod["spec"]["initContainers"]
    return dict(init)


def _triton(pod: dict[str, Any]) -> dict[str, Any]:
    (triton,) = pod["spec"]["containers"]
    return dict(triton)


def _env(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in container.get("env", [])}


def _model(pod: dict[str, Any]) -> str:
    return str(pod["metadata"]["labels"]["triton-ft/model"])


def tuned(pods: list[Any]) -> list[Any]:
    """The pods of FasterTransformer's models (an encoder's pod has no tuning step)."""
    return [p for p in pods if p["spec"].get("initContainers")]


def test_the_tuning_runs_on_the_gpu_node_with_exactly_tritons_gpus_and_costs_no_extra_gpu(
    cluster: Cluster, prod_plan: Plan
) -> None:
    pods = tuned(deploy_and_schedule(cluster, prod_plan))
    nodes = {n["metadata"]["name"]: n for n in cluster.kube.items("v1", "Node")}
    for pod in pods:
        init, triton = _init(pod), _triton(pod)
        assert init["name"] == INIT_CONTAINER
        assert init["resources"] == triton["resources"], "same GPUs, CPU and memory as Triton"
        node = nodes[pod["spec"]["nodeName"]]
        assert node["metadata"]["labels"]["triton-ft.io/accelerator"] == "nvidia"
    whole = [p for p in pods if _model(p) == "t5-3b"]
    assert len(whole) == 2
    for pod in whole:
        gpus = int(_init(pod)["resources"]["requests"][GPU_RESOURCE])
        allocatable = int(nodes[pod["spec"]["nodeName"]]["status"]["allocatable"][GPU_RESOURCE])
        assert gpus == allocatable == 4, "init + Triton = 8 GPUs if the scheduler added them; it takes the larger"


def initialized_pods(cluster: Cluster, expected: int) -> list[Any]:
    """The Triton pods once ``expected`` of them report their init phase done (kwok does it as a kubelet would)."""

    def initialized() -> list[Any] | None:
        pods = tuned(cluster.pods("app.kubernetes.io/component=triton"))
        done = [
            p
            for p in pods
            if any(
                c["type"] == "Initialized" and c["status"] == "True" for c in p.get("status", {}).get("conditions", [])
            )
            and p["status"].get("initContainerStatuses")
        ]
        return done if len(done) == expected == len(pods) else None

    pods: list[Any] = wait_for(f"{expected} Triton pods initialized", initialized, 60)
    return pods


def test_triton_starts_after_the_tuning_in_the_directory_it_writes_gemm_config_into(
    cluster: Cluster, prod_plan: Plan
) -> None:
    scheduled = tuned(deploy_and_schedule(cluster, prod_plan))
    pods = initialized_pods(cluster, len(scheduled))
    for pod in pods:
        (status,) = pod["status"]["initContainerStatuses"]
        assert status["name"] == INIT_CONTAINER and "terminated" in status["state"]
        init, triton = _init(pod), _triton(pod)
        assert triton["workingDir"] == _env(init)["WORKDIR"] == WORKDIR
        shared = {m["name"] for m in init["volumeMounts"]} & {m["name"] for m in triton["volumeMounts"]}
        assert WORKDIR_VOLUME in shared


def test_every_replica_of_a_model_uses_one_cache_directory_and_each_model_its_own(
    cluster: Cluster, prod_plan: Plan
) -> None:
    pods = tuned(deploy_and_schedule(cluster, prod_plan))
    caches: dict[str, set[str]] = defaultdict(set)
    for pod in pods:
        caches[_model(pod)].add(_env(_init(pod))["CACHE_DIR"])
    assert {model: len(dirs) for model, dirs in caches.items()} == {"t5-3b": 1, "gpt-j-6b": 1}
    (t5,), (gptj,) = caches["t5-3b"], caches["gpt-j-6b"]
    assert t5 != gptj
    assert "/t5-fp16-tp4/" in t5 and "/gptj-fp16-tp1/" in gptj


def test_up_reports_what_each_pods_tuning_did_and_names_a_fallback(
    control_plane: ControlPlane, cluster: Cluster, prod_plan: Plan, tmp_path: Path
) -> None:
    scheduled = tuned(deploy_and_schedule(cluster, prod_plan))
    t5 = sorted(p["metadata"]["name"] for p in initialized_pods(cluster, len(scheduled)) if _model(p) == "t5-3b")
    # The lines the script writes as its termination message, from the script itself (stand-in tuner failing, then
    # a second pod finding a cache), put where the kubelet puts a finished init container's message.
    (t5_spec,) = [m for m in prod_plan.settings.models if m.name == "t5-3b"]
    start(tmp_path, "failed", model=t5_spec, mode="fail")
    start(tmp_path, "tuned", model=t5_spec)
    start(tmp_path, "cached", model=t5_spec)
    lines = [(tmp_path / name / "termination-log").read_text() for name in ("failed", "cached")]
    for name, message in zip(t5, lines, strict=True):
        pod = cluster.kube.get("v1", "Pod", name, cluster.namespace)
        (status,) = pod["status"]["initContainerStatuses"]
        status["state"]["terminated"]["message"] = message
        cluster.kube.request(
            "PATCH",
            cluster.kube.path("v1", "Pod", cluster.namespace, name) + "/status",
            body={"status": {"initContainerStatuses": [status]}},
            content_type="application/merge-patch+json",
        )
    done = RolloutWatchProvider().create(props(control_plane, cluster, prod_plan, autoscaler=False, nodes_max=0))
    assert done.outs is not None
    report = done.outs["gemm_tuning"]
    assert set(report) == set(t5), "every pod of the Deployment, by name"
    failed, cached = (report[name] for name in t5)
    assert failed.startswith("fallback: t5_gemm ") and "exited with status 255" in failed
    assert "default GEMM algorithms" in failed
    assert cached.startswith("cached: reused ")
    assert json.loads(lines[0])["status"] == "fallback"
