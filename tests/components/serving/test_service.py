"""TritonService: the Triton Deployment and what surrounds it, asserted on the captured inputs."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from components.common import sizing
from components.rollout_watch import RolloutWatchProvider
from components.serving.gemm_tuning import INIT_CONTAINER, WORKDIR, GemmTuning
from components.serving.server_spec import TRITONSERVER
from tests.components.fixtures import (
    DEPLOYMENT,
    GPTJ_6B,
    GPU_POOL,
    NAMESPACE,
    T5_SMALL,
    make_target,
    pod_spec,
    secure_ingress,
    serve,
    served_deployment,
    triton_container,
)
from tritonft.errors import UserError
from tritonft.spec import ModelSpec
from tritonft.synth.engine import RecordingMocks, Registered, mock_engine, run_program


def _deployment(mocks: RecordingMocks, model: ModelSpec = GPTJ_6B, **kwargs: Any) -> Registered:
    return served_deployment(mocks, model, **kwargs)


_triton = triton_container


def test_gpu_limit_is_tp_times_pp(mocks):
    model = replace(GPTJ_6B, tensor_parallel=2, pipeline_parallel=2)
    resources = _triton(_deployment(mocks, model=model))["resources"]
    assert resources["limits"]["nvidia.com/gpu"] == "4"
    assert resources["requests"]["nvidia.com/gpu"] == "4"


def test_triton_lands_on_gpu_nodes_with_the_gpu_toleration(mocks):
    spec = pod_spec(_deployment(mocks))
    assert spec["nodeSelector"] == GPU_POOL
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"]


def test_one_gpu_runs_tritonserver_directly(mocks):
    command = _triton(_deployment(mocks, model=T5_SMALL))["command"]
    assert command[0] == TRITONSERVER


def test_several_gpus_run_one_mpi_process_for_the_node(mocks):
    command = _triton(_deployment(mocks))["command"]
    assert command[:3] == ["mpirun", "-n", "1"]
    assert TRITONSERVER in command


def test_tritonserver_uses_no_model_control_strict_readiness_and_metrics(mocks):
    deployment = _deployment(mocks)
    command = _triton(deployment)["command"]
    (job,) = [j for j in mocks.of_type("kubernetes:batch/v1:Job") if j.name == "m-job"]
    repo_dir = job.inputs["metadata"]["annotations"]["triton-ft/repository-dir"]
    for flag in (
        f"--model-repository={repo_dir}",
        "--model-control-mode=none",
        "--strict-readiness=true",
        "--allow-metrics=true",
    ):
        assert flag in command
    assert not [f for f in command if f.startswith("--load-model")], "none mode loads the model's whole repository"


def test_shm_is_a_memory_emptydir_with_the_computed_limit(mocks):
    deployment = _deployment(mocks)
    (shm,) = [v for v in pod_spec(deployment)["volumes"] if v["name"] == "shm"]
    assert shm["emptyDir"] == {"medium": "Memory", "sizeLimit": sizing.server_sizing(GPTJ_6B).shm_size}
    assert {"name": "shm", "mountPath": "/dev/shm"} in _triton(deployment)["volumeMounts"]


def test_memory_request_includes_the_shm(mocks):
    memory = _triton(_deployment(mocks))["resources"]["requests"]["memory"]
    assert int(memory.removesuffix("Mi")) * sizing.MIB >= sizing.shm_bytes(GPTJ_6B) + sizing.SERVER_BASE_MEMORY


def test_startup_probe_budget_comes_from_the_model_size(mocks):
    probe = _triton(_deployment(mocks))["startupProbe"]
    budget = sizing.startup_budget(GPTJ_6B)
    assert probe["httpGet"]["path"] == "/v2/health/ready"
    assert (probe["periodSeconds"], probe["failureThreshold"]) == (budget.period_seconds, budget.failure_threshold)
    assert "initialDelaySeconds" not in probe


def test_liveness_and_readiness_use_the_v2_health_endpoints(mocks):
    container = _triton(_deployment(mocks))
    assert container["livenessProbe"]["httpGet"]["path"] == "/v2/health/live"
    assert container["readinessProbe"]["httpGet"]["path"] == "/v2/health/ready"


def test_the_server_runs_non_root_without_capabilities_on_a_read_only_root(mocks):
    deployment = _deployment(mocks)
    pod_sc, sc = pod_spec(deployment)["securityContext"], _triton(deployment)["securityContext"]
    assert pod_sc["runAsNonRoot"] is True and pod_sc["seccompProfile"] == {"type": "RuntimeDefault"}
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"] is True


def test_the_model_store_is_mounted_read_only(mocks):
    deployment = _deployment(mocks)
    (store,) = [v for v in pod_spec(deployment)["volumes"] if v["name"] == "store"]
    assert store["persistentVolumeClaim"] == {"claimName": "m-store-models", "readOnly": True}


def test_the_deployment_waits_for_the_conversion_job_and_the_reference_job(mocks):
    deployment = _deployment(mocks)
    jobs = mocks.of_type("kubernetes:batch/v1:Job")
    assert {j.name for j in jobs} == {"m-job", "m-reference-job"}, "a generator's repository needs both"
    assert all(job.urn in deployment.depends_on for job in jobs)


def test_up_waits_for_the_rollout_through_the_rollout_watch_not_the_providers_await(mocks):
    deployment = _deployment(mocks)
    (watch,) = mocks.of_type("pulumi-python:dynamic/tritonft:RolloutWatch")
    assert deployment.inputs["metadata"]["annotations"]["pulumi.com/skipAwait"] == "true"
    assert deployment.urn in watch.depends_on
    assert (watch.inputs["namespace"], watch.inputs["deployment"]) == (NAMESPACE, deployment.inputs["metadata"]["name"])


def test_the_rollout_wait_covers_the_startup_budget_and_the_replaced_pod_s_drain(mocks):
    deployment = _deployment(mocks)
    (watch,) = mocks.of_type("pulumi-python:dynamic/tritonft:RolloutWatch")
    budget = sizing.startup_budget(GPTJ_6B)
    tuning = GemmTuning().budget_seconds()
    grace = pod_spec(deployment)["terminationGracePeriodSeconds"]
    assert watch.inputs["deadline_s"] == 60 * sizing.rollout_timeout_minutes(budget, tuning, grace)
    assert watch.inputs["deadline_s"] >= budget.seconds + tuning + grace + sizing.NODE_SCALE_UP_SECONDS
    assert deployment.inputs["spec"]["progressDeadlineSeconds"] == sizing.progress_deadline_seconds(
        budget, tuning, grace
    )


def test_the_deployments_pods_tune_gemms_in_an_init_container_before_triton_starts(mocks):
    spec = pod_spec(_deployment(mocks))
    (init,) = spec["initContainers"]
    assert init["name"] == INIT_CONTAINER
    assert init["resources"] == _triton_of(spec)["resources"]
    assert _triton_of(spec)["workingDir"] == WORKDIR


def test_the_gemm_tuning_time_is_in_the_progress_deadline_and_the_rollout_wait(mocks):
    tuning = GemmTuning(timeout_seconds=1200)
    deployment = _deployment(mocks, gemm_tuning=tuning)
    (watch,) = mocks.of_type("pulumi-python:dynamic/tritonft:RolloutWatch")
    budget = sizing.startup_budget(GPTJ_6B)
    grace = pod_spec(deployment)["terminationGracePeriodSeconds"]
    assert (
        deployment.inputs["spec"]["progressDeadlineSeconds"]
        == sizing.progress_deadline_seconds(budget, 0, grace) + 1260
    )
    assert watch.inputs["deadline_s"] == 60 * sizing.rollout_timeout_minutes(budget, 1260, grace)


def test_with_gemm_tuning_off_the_pod_has_no_init_container_and_the_deadlines_only_the_load(mocks):
    deployment = _deployment(mocks, gemm_tuning=GemmTuning(enabled=False))
    spec = pod_spec(deployment)
    assert "initContainers" not in spec and "workingDir" not in _triton_of(spec)
    budget = sizing.startup_budget(GPTJ_6B)
    grace = spec["terminationGracePeriodSeconds"]
    assert deployment.inputs["spec"]["progressDeadlineSeconds"] == sizing.progress_deadline_seconds(budget, 0, grace)


def _triton_of(spec: dict[str, Any]) -> dict[str, Any]:
    (container,) = spec["containers"]
    return dict(container)


def test_without_a_node_autoscaler_the_rollout_watch_knows_nothing_can_add_a_gpu_node(mocks):
    _deployment(mocks)
    (watch,) = mocks.of_type("pulumi-python:dynamic/tritonft:RolloutWatch")
    assert watch.inputs["autoscaler"] is False


def test_an_autoscaled_deployment_leaves_replicas_to_the_autoscaler(mocks):
    assert "replicas" not in _deployment(mocks).inputs["spec"]


def test_a_fixed_deployment_sets_its_replicas(mocks):
    deployment = _deployment(mocks, autoscaler="none", monitoring=False, min_replicas=2)
    assert deployment.inputs["spec"]["replicas"] == 2


def _services(mocks: RecordingMocks) -> dict[str, Registered]:
    return {s.inputs["metadata"]["name"]: s for s in mocks.of_type("kubernetes:core/v1:Service")}


def test_the_service_exposes_http_grpc_and_metrics(mocks):
    run_program(lambda: serve("m", T5_SMALL))
    service = _services(mocks)["m"]
    assert {(p["name"], p["port"]) for p in service.inputs["spec"]["ports"]} == {
        ("http", 8000),
        ("grpc", 8001),
        ("metrics", 8002),
    }


def test_a_headless_service_gives_the_gateway_every_ready_pods_grpc_address(mocks):
    """One ClusterIP connection would pin all of the gateway's calls to one pod (kube-proxy balances connections)."""
    outputs: list[str] = []
    run_program(lambda: serve("m", T5_SMALL).grpc_address.apply(outputs.append))
    services = _services(mocks)
    assert sorted(services) == ["m", "m-pods"]
    pods = services["m-pods"].inputs["spec"]
    assert pods["clusterIP"] == "None" and "publishNotReadyAddresses" not in pods
    assert pods["selector"] == services["m"].inputs["spec"]["selector"]
    assert [(p["name"], p["port"], p["targetPort"]) for p in pods["ports"]] == [("grpc", 8001, "grpc")]
    assert outputs == [f"m-pods.{NAMESPACE}.svc:8001"]


def test_every_kubernetes_resource_uses_the_explicit_provider_and_a_namespace(mocks):
    run_program(lambda: serve("m", GPTJ_6B, autoscaler="keda", min_replicas=0, ingress=secure_ingress("m.example.com")))
    workloads = [r for r in mocks.resources if r.typ.startswith("kubernetes:") and "helm.sh" not in r.typ]
    assert len(workloads) >= 12
    for res in workloads:
        assert "::test-k8s::" in res.provider, res.name
        assert res.inputs["metadata"]["namespace"] == NAMESPACE, res.name
        assert res.inputs["metadata"]["name"], res.name


def test_every_child_is_parented_to_its_component(mocks):
    run_program(lambda: serve("m", GPTJ_6B))
    components = {r.urn for r in mocks.resources if r.typ.startswith("triton-ft:")}
    children = [r for r in mocks.resources if r.typ.startswith("kubernetes:") and "helm.sh" not in r.typ]
    assert all(r.parent in components for r in children)


def test_the_pdb_allows_at_most_one_replica_down(mocks):
    run_program(lambda: serve("m", T5_SMALL))
    (pdb,) = mocks.of_type("kubernetes:policy/v1:PodDisruptionBudget")
    assert pdb.inputs["spec"]["maxUnavailable"] == 1


def test_scale_to_zero_without_keda_is_refused_before_anything_is_created(mocks):
    with pytest.raises(UserError, match="autoscaler='keda'"):
        run_program(lambda: serve("m", T5_SMALL, min_replicas=0))
    assert mocks.of_type(DEPLOYMENT) == []


def test_monitoring_without_the_prometheus_operator_is_refused(mocks):
    with pytest.raises(UserError, match="prometheus-operator"):
        run_program(lambda: serve("m", T5_SMALL, target=make_target(addons=frozenset())))


def test_keda_without_the_keda_addon_is_refused(mocks):
    addons = frozenset({"prometheus-operator", "cert-manager", "ingress-nginx"})
    with pytest.raises(UserError, match="'keda' add-on"):
        run_program(
            lambda: serve(
                "m",
                T5_SMALL,
                target=make_target(addons=addons),
                autoscaler="keda",
                min_replicas=0,
                ingress=secure_ingress("m.example.com"),
            )
        )


def test_every_problem_is_reported_at_once(mocks):
    with pytest.raises(UserError) as err:
        run_program(lambda: serve("m", T5_SMALL, target=make_target(addons=frozenset()), min_replicas=0))
    message = str(err.value)
    for fragment in ("autoscaler='keda'", "needs an ingress", "prometheus-operator"):
        assert fragment in message


class _RefreshedAfterScale(RecordingMocks):
    """The engine's state of a Deployment after ``pulumi refresh`` read it back once an HPA had scaled it: the
    scale subresource bumped ``metadata.generation`` (seen on the real kube-apiserver, tests/system/controlplane)."""

    def __init__(self, generation: int) -> None:
        super().__init__()
        self.generation = generation

    def new_resource(self, args: Any) -> tuple[str | None, dict[Any, Any]]:
        rid, state = super().new_resource(args)
        if args.typ == DEPLOYMENT:
            state["metadata"] = {**state.get("metadata", {}), "generation": self.generation}
        return rid, state


@pytest.mark.parametrize("generation", [1, 7])
def test_the_rollout_watchs_inputs_do_not_read_the_live_generation(generation: int) -> None:
    """After an HPA scale, refresh brings a new generation into the Deployment's state; the watch's inputs (so its
    diff) stay what the applied spec gives."""
    inputs = []
    for gen in (1, generation):
        mocks = _RefreshedAfterScale(gen)
        with mock_engine(mocks, project="triton-ft", stack="test"):
            served_deployment(mocks, GPTJ_6B)
        (watch,) = mocks.of_type("pulumi-python:dynamic/tritonft:RolloutWatch")
        inputs.append({k: v for k, v in watch.inputs.items() if k != "__provider"})
    assert inputs[0] == inputs[1]
    assert RolloutWatchProvider().diff("id", inputs[0], inputs[1]).changes is False


def test_a_change_to_the_deployment_spec_changes_the_rollout_watchs_key(mocks):
    def key(**kwargs: Any) -> str:
        mocks.resources.clear()
        _deployment(mocks, **kwargs)
        (watch,) = mocks.of_type("pulumi-python:dynamic/tritonft:RolloutWatch")
        return str(watch.inputs["spec_hash"])

    assert key() == key()
    assert key(gemm_tuning=GemmTuning(enabled=False)) != key()
