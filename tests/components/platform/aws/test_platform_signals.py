"""Prod's plan scrapes every signal its alerts read and alerts on them (issue 51): Envoy's proxies through a PodMonitor
on the labels and port Envoy Gateway gives them, cert-manager through its chart's ServiceMonitor, each public host
through the blackbox exporter, the GPUs through dcgm-exporter on the GPU nodes; one PrometheusRule in the monitoring
namespace carries the platform's alerts (their behaviour: tests/components/platform/test_signals_rules.py)."""

from __future__ import annotations

from typing import Any

import pytest

from components.platform import signals
from components.platform.aws import charts
from components.platform.aws.addons import AddonFlags
from tests.components.platform.aws.helpers import build_platform
from tests.plans import StackPlans
from tritonft.synth.engine import RecordingMocks, Registered
from tritonft.synth.result import SynthResult

CHART = "kubernetes:helm.sh/v4:Chart"
RESOURCE = "kubernetes:monitoring.coreos.com/v1:{}"


@pytest.fixture(scope="module")
def prod(stack_plan: StackPlans) -> SynthResult:
    return stack_plan("prod")


def _chart(resources: list[Registered], pin: charts.ChartPin) -> Registered:
    (chart,) = [r for r in resources if r.typ == CHART and r.inputs["chart"] == pin.chart]
    return chart


def _values(resources: list[Registered], pin: charts.ChartPin) -> dict[str, Any]:
    return dict(_chart(resources, pin).inputs["values"])


def _one(resources: list[Registered], kind: str, name: str) -> Registered:
    (found,) = [r for r in resources if r.typ == RESOURCE.format(kind) and r.inputs["metadata"]["name"] == name]
    return found


def test_envoys_proxies_are_scraped_on_their_stats_port(prod: SynthResult) -> None:
    monitor = _one(prod.resources, "PodMonitor", "envoy-proxies")
    assert monitor.inputs["metadata"]["namespace"] == charts.ENVOY_GATEWAY.namespace
    spec = monitor.inputs["spec"]
    assert spec["selector"]["matchLabels"]["app.kubernetes.io/component"] == "proxy"
    assert spec["selector"]["matchLabels"]["app.kubernetes.io/managed-by"] == "envoy-gateway"
    assert spec["namespaceSelector"] == {"matchNames": ["envoy-gateway-system"]}
    assert spec["podMetricsEndpoints"][0] | {} == {"port": "metrics", "path": "/stats/prometheus", "interval": "15s"}
    # kube-prometheus-stack's Prometheus takes PodMonitors from every namespace, not only its release's.
    assert (
        _values(prod.resources, charts.KUBE_PROMETHEUS_STACK)["prometheus"]["prometheusSpec"][
            "podMonitorSelectorNilUsesHelmValues"
        ]
        is False
    )


def test_cert_manager_is_scraped_once_the_prometheus_operator_exists(prod: SynthResult) -> None:
    values = _values(prod.resources, charts.CERT_MANAGER)
    assert values["prometheus"] == {"enabled": True, "servicemonitor": {"enabled": True}}
    kps = _chart(prod.resources, charts.KUBE_PROMETHEUS_STACK)
    assert kps.urn in _chart(prod.resources, charts.CERT_MANAGER).depends_on


def test_every_public_host_is_probed_from_outside_the_pods_expecting_the_keys_refusal(prod: SynthResult) -> None:
    values = _values(prod.resources, charts.BLACKBOX_EXPORTER)
    targets = {t["name"]: t for t in values["serviceMonitor"]["targets"]}
    hosts = set(prod.outputs["edgeHosts"])
    assert set(targets) == hosts and "triton.example.com" in hosts
    assert targets["triton.example.com"]["url"] == "https://triton.example.com/v1/models"
    module = values["config"]["modules"][targets["triton.example.com"]["module"]]
    assert module["http"]["valid_status_codes"] == [401]  # prod's apiKey: a 200 without a key fails the probe
    assert module["http"]["fail_if_not_ssl"] is True and module["http"]["follow_redirects"] is False
    for host, target in targets.items():
        assert target["additionalRelabeling"] == [{"targetLabel": signals.BLACKBOX_LABEL, "replacement": host}]
    assert (
        _chart(prod.resources, charts.BLACKBOX_EXPORTER).inputs["namespace"] == charts.KUBE_PROMETHEUS_STACK.namespace
    )


def test_the_gpus_are_watched_by_dcgm_exporter_on_the_gpu_nodes(prod: SynthResult) -> None:
    values = _values(prod.resources, charts.DCGM_EXPORTER)
    assert values["nodeSelector"] == {"triton-ft.io/accelerator": "nvidia"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in values["tolerations"]
    assert values["serviceMonitor"]["enabled"] is True


def test_one_rule_in_the_monitoring_namespace_alerts_on_every_platform_signal(prod: SynthResult) -> None:
    rule = _one(prod.resources, "PrometheusRule", "triton-ft-platform")
    assert rule.inputs["metadata"]["namespace"] == charts.KUBE_PROMETHEUS_STACK.namespace
    assert rule.inputs["spec"] == signals.platform_rule_spec(
        prod.outputs["namespace"], cert_manager=True, envoy=True, blackbox=True, gpus=True
    )


def test_without_kube_prometheus_stack_nothing_is_scraped_or_alerted(mocks: RecordingMocks) -> None:
    build_platform(
        addons=AddonFlags(envoy_gateway=True, cert_manager=True, kube_prometheus_stack=False, prometheus_adapter=False),
        edge_probes=(signals.EdgeProbe("api.example.com", "/v1/models"),),
    )
    kinds = {r.typ for r in mocks.resources}
    assert not {RESOURCE.format("PodMonitor"), RESOURCE.format("PrometheusRule")} & kinds
    assert "prometheus" not in _values(mocks.resources, charts.CERT_MANAGER)
    assert not [
        r for r in mocks.of_type(CHART) if r.inputs["chart"] in ("prometheus-blackbox-exporter", "dcgm-exporter")
    ]
