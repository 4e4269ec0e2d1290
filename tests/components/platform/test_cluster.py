"""ExistingCluster: an explicit provider from the stack's kubeconfig/context and a labelled namespace."""

from __future__ import annotations

from components.common.target import GpuScheduling
from components.platform.cluster import ExistingCluster, ExistingClusterArgs
from tritonft.synth.engine import RecordingMocks, run_program


def build(**overrides: object) -> None:
    fields: dict[str, object] = {
        "kubeconfig": "/home/me/.kube/config",
        "context": "kind-gpu",
        "namespace": "triton",
        "gpu": GpuScheduling(),
        "cpu_node_selector": {},
        "storage_class": None,
    }
    fields |= overrides
    ExistingCluster("local", ExistingClusterArgs(**fields))  # type: ignore[arg-type]


def test_provider_uses_the_given_kubeconfig_and_context(mocks: RecordingMocks) -> None:
    run_program(build)
    (provider,) = mocks.of_type("pulumi:providers:kubernetes")
    assert provider.inputs["kubeconfig"] == "/home/me/.kube/config"
    assert provider.inputs["context"] == "kind-gpu"


def test_namespace_is_created_through_the_explicit_provider(mocks: RecordingMocks) -> None:
    run_program(build)
    (provider,) = mocks.of_type("pulumi:providers:kubernetes")
    (ns,) = mocks.of_type("kubernetes:core/v1:Namespace")
    assert ns.provider.startswith(provider.urn)
    assert ns.inputs["metadata"]["name"] == "triton"
    assert ns.inputs["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


def test_without_kubeconfig_the_provider_falls_back_to_the_environment(mocks: RecordingMocks) -> None:
    run_program(lambda: build(kubeconfig=None, context=None))
    (provider,) = mocks.of_type("pulumi:providers:kubernetes")
    assert "kubeconfig" not in provider.inputs and "context" not in provider.inputs


def test_children_are_parented_to_the_component(mocks: RecordingMocks) -> None:
    run_program(build)
    (component,) = mocks.of_type("triton-ft:cluster:ExistingCluster")
    assert all(r.parent == component.urn for r in mocks.resources if r is not component)


def test_default_gpu_scheduling_tolerates_the_nvidia_taint() -> None:
    assert GpuScheduling().tolerations == ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},)
