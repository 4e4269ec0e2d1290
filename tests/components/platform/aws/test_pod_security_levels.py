"""Pod Security Admission labels on every namespace ``platform: aws`` creates, asserted on the captured inputs:
``restricted`` enforced on the workload namespace, ``privileged`` only where a chart's pods need the host (the
NVIDIA device plugin, kube-prometheus-stack's node-exporter, dcgm-exporter), ``baseline`` elsewhere; ``restricted``
warned and audited everywhere. The real API server's enforcement: ``tests/system/controlplane/test_pod_security.py``."""

from __future__ import annotations

from components.platform.aws.addons import AddonFlags
from tests.components.platform.aws.helpers import build_platform
from tritonft.synth.engine import RecordingMocks

NAMESPACE = "kubernetes:core/v1:Namespace"
ENFORCE = "pod-security.kubernetes.io/enforce"
ALL_ADDONS = AddonFlags(
    ingress_nginx=True,
    cert_manager=True,
    kube_prometheus_stack=True,
    prometheus_adapter=True,
    keda=True,
    metrics_server=True,
    dcgm_exporter=True,
)


def _levels(mocks: RecordingMocks) -> dict[str, dict[str, str]]:
    return {
        ns.inputs["metadata"]["name"]: {
            k.rsplit("/", 1)[1]: v for k, v in ns.inputs["metadata"]["labels"].items() if "pod-security" in k
        }
        for ns in mocks.of_type(NAMESPACE)
    }


def test_the_workload_namespace_enforces_restricted(mocks: RecordingMocks) -> None:
    build_platform(namespace="models", addons=ALL_ADDONS)
    assert _levels(mocks)["models"] == {"enforce": "restricted", "warn": "restricted", "audit": "restricted"}


def test_only_the_charts_that_need_the_host_get_privileged(mocks: RecordingMocks) -> None:
    build_platform(namespace="models", addons=ALL_ADDONS)
    enforced = {name: labels["enforce"] for name, labels in _levels(mocks).items()}
    assert {name for name, level in enforced.items() if level == "privileged"} == {
        "nvidia-device-plugin",
        "monitoring",
        "dcgm-exporter",
    }
    assert {name for name, level in enforced.items() if level == "baseline"} == {
        "ingress-nginx",
        "cert-manager",
        "keda",
        "metrics-server",
        "cluster-autoscaler",
    }


def test_every_namespace_warns_and_audits_at_restricted(mocks: RecordingMocks) -> None:
    build_platform(namespace="models", addons=ALL_ADDONS)
    levels = _levels(mocks)
    assert len(levels) == 9
    assert all(labels["warn"] == labels["audit"] == "restricted" for labels in levels.values())
