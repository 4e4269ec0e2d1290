"""What a stack's settings ask of the cluster, as preflight reads them: the metrics APIs its autoscalers need."""

from __future__ import annotations

from components.cluster_needs import needs_of
from tests.components.settings.test_validation import AWS_ADDONS, aws_stack, kubernetes_stack
from tests.components.test_args import load
from tests.plans import deploy_secrets
from tritonft.preflight.checks import CUSTOM_METRICS_API, RESOURCE_METRICS_API

ADAPTER = ["kube-prometheus-stack", "prometheus-adapter"]


def apis(values: dict[str, object]) -> list[str]:
    return [name for name, _ in needs_of(load(values)).metrics_apis]


def test_triton_hpas_on_an_existing_cluster_need_the_custom_metrics_api() -> None:
    assert CUSTOM_METRICS_API in apis(kubernetes_stack(replicasMax=3, existingAddons=ADAPTER))


def test_a_fixed_replica_count_needs_no_custom_metrics_api() -> None:
    assert CUSTOM_METRICS_API not in apis(kubernetes_stack(replicasMin=1, replicasMax=1))


def test_the_gateways_hpa_on_an_existing_cluster_needs_the_resource_metrics_api() -> None:
    assert RESOURCE_METRICS_API in apis(kubernetes_stack(gatewayReplicasMin=2, gatewayReplicasMax=4))


def test_a_gateway_at_a_fixed_count_or_off_needs_no_resource_metrics_api() -> None:
    assert RESOURCE_METRICS_API not in apis(kubernetes_stack(gatewayReplicasMin=2, gatewayReplicasMax=2))
    assert RESOURCE_METRICS_API not in apis(kubernetes_stack(gateway=False))


def test_on_aws_the_stack_installs_what_its_autoscalers_read() -> None:
    assert (
        apis(aws_stack(replicasMax=3, addons=[*AWS_ADDONS, *ADAPTER], gatewayReplicasMin=2, gatewayReplicasMax=4)) == []
    )


def test_each_needed_api_says_what_reads_it_and_the_fix() -> None:
    ((_, why),) = needs_of(load(kubernetes_stack(gatewayReplicasMin=2, gatewayReplicasMax=4))).metrics_apis
    assert "gateway's HPA" in why and "metrics-server" in why and "gatewayReplicasMax" in why


def test_a_cpu_model_is_a_cpu_need_with_its_replicas_requests_not_a_gpu_shape() -> None:
    from components.common.sizing import server_sizing
    from tests.components.settings.test_validation import MINILM, T5_SMALL

    settings = load(
        kubernetes_stack(models=[dict(T5_SMALL), dict(MINILM, device="cpu")], cpuNodeSelector={"pool": "cpu"})
    )
    needs = needs_of(settings)
    assert needs.models == [("t5-small", 1)]
    (cpu,) = needs.cpu_models
    sized = server_sizing(settings.models[1])
    assert (cpu.name, cpu.cpu, cpu.memory) == ("minilm", sized.cpu_request, sized.memory_request)
    assert needs.cpu_selector == {"pool": "cpu"}


def test_a_llama_family_model_is_a_gpu_shape_of_its_tensor_parallel_size() -> None:
    from tests.components.settings.test_validation import QWEN7B, T5_SMALL

    qwen = dict(QWEN7B, tensorParallel=2, vllm={"maxModelLen": 8192})
    needs = needs_of(load(kubernetes_stack(gpusPerNode=2, models=[dict(T5_SMALL), qwen])))
    assert needs.models == [("t5-small", 1), ("qwen", 2)]
    assert needs.cpu_models == []


def test_the_stacks_llama_family_models_are_counted_by_preflight() -> None:
    from pathlib import Path

    from components.cluster_needs import stack_needs

    repo = Path(__file__).resolve().parents[2]
    assert ("qwen-0-5b", 1) in stack_needs(repo, "local").needs.models
    assert ("llama-3-1-8b", 1) in stack_needs(repo, "prod", deploy_secrets("prod")).needs.models
