"""The GPU node types' CPUs: a vLLM engine's CPU limit (``components.common.sizing.vllm_cpu_limit``)."""

from __future__ import annotations

import json

import pytest

from components.settings import load_settings
from components.settings.gpus import AWS_GPU_INSTANCES
from tests.components.settings.test_validation import kubernetes_stack


@pytest.mark.parametrize(
    ("instance_type", "vcpus"),
    [("g5.xlarge", 4), ("g5.12xlarge", 48), ("g6e.48xlarge", 192), ("p3.2xlarge", 8), ("g4dn.metal", 96)],
)
def test_each_aws_gpu_type_knows_its_vcpus(instance_type: str, vcpus: int) -> None:
    assert AWS_GPU_INSTANCES[instance_type].vcpus == vcpus


def test_an_existing_clusters_gpu_nodes_have_the_cpus_it_states() -> None:
    values = kubernetes_stack(gpuNodeCpus=16)
    settings = load_settings(
        {k: v if isinstance(v, str) else json.dumps(v) for k, v in values.items()}, project="triton-ft", stack="t"
    )
    assert settings.cluster.gpu_node.vcpus == 16


def test_an_existing_clusters_gpu_nodes_cpus_are_not_known_unless_stated() -> None:
    values = kubernetes_stack()
    settings = load_settings(
        {k: v if isinstance(v, str) else json.dumps(v) for k, v in values.items()}, project="triton-ft", stack="t"
    )
    assert settings.cluster.gpu_node.vcpus is None
