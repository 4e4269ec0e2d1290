"""TritonService and ModelConversion for encoders: a ``device: cpu`` replica on CPU nodes without a GPU, a
``device: gpu`` one taking one GPU; asserted on the captured inputs."""

from __future__ import annotations

from typing import Any

from components.common import sizing
from components.common.placement import GPU_PRESENT_LABEL
from components.serving.gemm_tuning import INIT_CONTAINER, GemmTuning
from components.serving.server_spec import TRITONSERVER
from components.settings.capacity import PACKING_LABEL, PLACEMENT_ANNOTATION
from tests.components.fixtures import (
    CPU_POOL,
    GPU_POOL,
    MINILM_CPU,
    MINILM_GPU,
    T5_SMALL,
    containers,
    pod_spec,
    serve,
    served_deployment,
    triton_container,
)
from tritonft.rollout.verdict import NodeGrowth
from tritonft.spec import ModelSpec
from tritonft.synth.engine import RecordingMocks, Registered, run_program

JOB = "kubernetes:batch/v1:Job"


def _deployment(mocks: RecordingMocks, model: ModelSpec = MINILM_CPU, **kwargs: Any) -> Registered:
    return served_deployment(mocks, model, **kwargs)


_triton = triton_container


def _env(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container["env"] if "value" in e}


def _affinity_exprs(spec: dict[str, Any]) -> list[tuple[str, str, tuple[str, ...]]]:
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    return [(e["key"], e["operator"], tuple(e["values"])) for t in terms for e in t["matchExpressions"]]


def test_a_cpu_encoder_requests_no_gpu(mocks):
    resources = _triton(_deployment(mocks))["resources"]
    assert not [k for part in resources.values() for k in part if "gpu" in k], resources


def test_a_cpu_encoder_lands_on_the_cpu_nodes_without_a_gpu_toleration(mocks):
    spec = pod_spec(_deployment(mocks))
    assert spec["nodeSelector"] == CPU_POOL
    assert not spec.get("tolerations")


def test_a_cpu_encoder_is_kept_off_gpu_nodes(mocks):
    exprs = _affinity_exprs(pod_spec(_deployment(mocks)))
    (key, value), *_ = GPU_POOL.items()
    assert (key, "NotIn", (value,)) in exprs
    assert (GPU_PRESENT_LABEL, "NotIn", ("true",)) in exprs


def test_a_cpu_encoder_is_sized_by_the_cpu_rule(mocks):
    resources = _triton(_deployment(mocks))["resources"]
    expected = sizing.cpu_server_sizing(MINILM_CPU)
    assert resources["requests"] == {
        "cpu": expected.cpu_request,
        "memory": expected.memory_request,
        "ephemeral-storage": expected.ephemeral_request,
    }
    assert resources["limits"]["memory"] == expected.memory_limit


def test_a_cpu_encoder_runs_plain_tritonserver_with_cpu_metrics(mocks):
    command = _triton(_deployment(mocks))["command"]
    assert command[0] == TRITONSERVER, "no mpirun"
    assert "--allow-cpu-metrics=true" in command
    assert not [flag for flag in command if "gpu" in flag], command


def test_an_encoder_has_no_nccl_settings(mocks):
    assert "NCCL_LAUNCH_MODE" not in _env(_triton(_deployment(mocks)))


def test_a_cpu_encoder_has_no_gemm_tuning_step(mocks):
    spec = pod_spec(_deployment(mocks, gemm_tuning=GemmTuning(enabled=True)))
    assert not spec.get("initContainers")
    assert "workingDir" not in _triton_of(spec)


def _triton_of(spec: dict[str, Any]) -> dict[str, Any]:
    (container,) = [c for c in spec["containers"] if c["name"] == "triton"]
    return dict(container)


def test_an_encoder_on_gpu_has_no_gemm_tuning_step_either(mocks):
    spec = pod_spec(_deployment(mocks, model=MINILM_GPU, gemm_tuning=GemmTuning(enabled=True)))
    assert INIT_CONTAINER not in [c["name"] for c in spec.get("initContainers", [])]


def test_the_tuning_budget_is_not_added_to_an_encoders_progress_deadline(mocks):
    deployment = _deployment(mocks, gemm_tuning=GemmTuning(enabled=True, timeout_seconds=900))
    budget = sizing.startup_budget(MINILM_CPU)
    grace = pod_spec(deployment)["terminationGracePeriodSeconds"]
    assert deployment.inputs["spec"]["progressDeadlineSeconds"] == sizing.progress_deadline_seconds(budget, 0, grace)


def test_an_encoder_on_gpu_takes_one_gpu_on_a_gpu_node(mocks):
    deployment = _deployment(mocks, model=MINILM_GPU)
    resources = _triton(deployment)["resources"]
    assert resources["limits"]["nvidia.com/gpu"] == "1" == resources["requests"]["nvidia.com/gpu"]
    spec = pod_spec(deployment)
    assert spec["nodeSelector"] == GPU_POOL
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"]
    assert _triton(deployment)["command"][0] == TRITONSERVER
    assert "--allow-gpu-metrics=true" in _triton(deployment)["command"]


def test_a_generator_keeps_its_gpu_metrics_and_nccl_mode(mocks):
    container = _triton(_deployment(mocks, model=T5_SMALL))
    assert "--allow-gpu-metrics=true" in container["command"]
    assert _env(container)["NCCL_LAUNCH_MODE"] == "GROUP"


def test_a_cpu_encoders_conversion_job_is_the_onnx_one(mocks):
    run_program(lambda: serve("m", MINILM_CPU))
    (job,) = mocks.of_type(JOB)
    env = {e["name"]: e["value"] for e in containers(job)[0]["env"]}
    assert (env["ENGINE"], env["TASK"], env["POOLING"], env["NORMALIZE"], env["MAX_SEQ_LENGTH"]) == (
        "onnxruntime",
        "embed",
        "mean",
        "normalize",
        "256",
    )
    assert env["VERIFY_GENERATE"] == "1"  # the answer check: `tritonft verify OUT/onnx --generate`


def test_a_cpu_encoders_rollout_watch_waits_for_no_gpu_node_autoscaler(mocks):
    _deployment(mocks, node_growth=NodeGrowth(autoscaler=True, nodes_max=4))
    (watch,) = mocks.of_type("pulumi-python:dynamic/tritonft:RolloutWatch")
    assert watch.inputs["autoscaler"] is False


def test_a_gpu_encoders_rollout_watch_knows_the_gpu_node_autoscaler(mocks):
    _deployment(mocks, model=MINILM_GPU, node_growth=NodeGrowth(autoscaler=True, nodes_max=4))
    (watch,) = mocks.of_type("pulumi-python:dynamic/tritonft:RolloutWatch")
    assert (watch.inputs["autoscaler"], watch.inputs["nodes_max"]) == (True, 4)


def test_a_cpu_encoder_carries_no_gpu_packing_label_or_placement_note(mocks):
    deployment = _deployment(mocks, gpus_per_node=8)
    labels = deployment.inputs["spec"]["template"]["metadata"]["labels"]
    assert PACKING_LABEL not in labels
    assert PLACEMENT_ANNOTATION not in deployment.inputs["metadata"]["annotations"]
    assert "podAffinity" not in pod_spec(deployment)["affinity"]


def test_a_gpu_encoder_packs_with_the_other_part_node_models(mocks):
    deployment = _deployment(mocks, model=MINILM_GPU, gpus_per_node=8)
    assert deployment.inputs["spec"]["template"]["metadata"]["labels"][PACKING_LABEL] == "partial"
