"""kube-prometheus-stack on EKS: alerts reach the settings' receivers, nothing watches what EKS does not let anyone
scrape, Prometheus keeps its data on an EBS volume (the EBS CSI driver with its own role)."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from components.platform.aws import charts
from tests.components.platform.aws.helpers import REPO_ROOT, build_platform
from tritonft.quantity import quantity_value
from tritonft.synth.engine import RecordingMocks
from tritonft.synth.manifests import is_secret

CHART = "kubernetes:helm.sh/v4:Chart"
SLACK = {
    "name": "oncall",
    "slack_configs": [{"api_url": "https://hooks.slack.com/services/T0/B0/XYZ", "channel": "#ml"}],
}


def _values(mocks: RecordingMocks) -> dict[str, Any]:
    (kps,) = [c for c in mocks.of_type(CHART) if c.inputs["chart"] == "kube-prometheus-stack"]
    return dict(kps.inputs["values"])


def test_the_receivers_get_alerts_by_severity_from_a_secret_the_chart_reads(mocks: RecordingMocks) -> None:
    build_platform(alert_receivers=(SLACK,))
    secret = mocks.named("tft-alertmanager-config")
    assert secret.inputs["metadata"]["name"] == charts.ALERTMANAGER_SECRET
    assert secret.inputs["metadata"]["namespace"] == charts.KUBE_PROMETHEUS_STACK.namespace
    data = secret.inputs["stringData"]
    assert is_secret(data)  # the webhook URL never shows in the plan or the state
    config = yaml.safe_load(data["value"]["alertmanager.yaml"])
    receivers = {route["matchers"][0]: route["receiver"] for route in config["route"]["routes"]}
    assert receivers['severity="critical"'] == receivers['severity="warning"'] == "oncall"
    assert receivers['alertname="Watchdog"'] == "null"  # no dead-man's switch routed (prod's settings demand one)
    assert SLACK in config["receivers"]
    values = _values(mocks)
    assert values["alertmanager"]["alertmanagerSpec"]["useExistingSecret"] is True
    assert values["alertmanager"]["alertmanagerSpec"]["configSecret"] == charts.ALERTMANAGER_SECRET
    assert "hooks.slack.com" not in json.dumps(values)
    (kps,) = [c for c in mocks.of_type(CHART) if c.inputs["chart"] == "kube-prometheus-stack"]
    assert secret.urn in kps.depends_on


def test_the_alertmanager_config_names_each_receiver_it_routes_to() -> None:
    second = {"name": "pager", "pagerduty_configs": [{"routing_key": "k"}]}
    config = charts.alertmanager_config([SLACK, second])
    names = {r["name"] for r in config["receivers"]}
    routed = {config["route"]["receiver"], *(r["receiver"] for r in config["route"]["routes"])}
    assert routed <= names == {"null", "oncall", "pager"}


def test_receivers_credential_secrets_are_mounted_into_alertmanager(mocks: RecordingMocks) -> None:
    pager = {"name": "oncall", "pagerduty_configs": [{"routing_key_file": "/etc/alertmanager/secrets/alerting/pd"}]}
    build_platform(alert_receivers=(pager,))
    assert _values(mocks)["alertmanager"]["alertmanagerSpec"]["secrets"] == ["alerting"]


def test_without_receivers_every_alert_goes_to_null() -> None:
    config = charts.alertmanager_config([])
    assert config["route"]["receiver"] == "null"
    assert config["receivers"] == [{"name": "null"}]


def test_monitors_of_what_eks_hides_are_off(mocks: RecordingMocks) -> None:
    build_platform()
    values = _values(mocks)
    for component in ("kubeControllerManager", "kubeScheduler", "kubeEtcd", "kubeProxy"):
        assert values[component] == {"enabled": False}
    rules = values["defaultRules"]["rules"]
    assert all(rules[r] is False for r in ("etcd", "kubeControllerManager", "kubeSchedulerAlerting", "kubeProxy"))


def test_prometheus_keeps_its_data_on_an_encrypted_gp3_volume(mocks: RecordingMocks) -> None:
    build_platform(prometheus_storage_gib=80)
    spec = _values(mocks)["prometheus"]["prometheusSpec"]["storageSpec"]["volumeClaimTemplate"]["spec"]
    assert spec["resources"] == {"requests": {"storage": "80Gi"}}
    sc = mocks.named("tft-gp3")
    assert spec["storageClassName"] == sc.inputs["metadata"]["name"]
    assert sc.inputs["provisioner"] == "ebs.csi.aws.com"
    assert sc.inputs["parameters"] == {"type": "gp3", "encrypted": "true"}
    assert sc.inputs["volumeBindingMode"] == "WaitForFirstConsumer"  # the volume is made in the pod's zone


def test_the_ebs_driver_runs_with_its_own_role_and_comes_before_prometheus(mocks: RecordingMocks) -> None:
    build_platform()
    addon, role = mocks.named("tft-ebs-csi"), mocks.named("tft-ebs-csi-irsa")
    assert addon.inputs["addonName"] == "aws-ebs-csi-driver"
    assert addon.inputs["serviceAccountRoleArn"] == f"arn:aws:iam::123456789012:role/{role.name}"
    (statement,) = json.loads(role.inputs["assumeRolePolicy"])["Statement"]
    assert "system:serviceaccount:kube-system:ebs-csi-controller-sa" in statement["Condition"]["StringEquals"].values()
    (kps,) = [c for c in mocks.of_type(CHART) if c.inputs["chart"] == "kube-prometheus-stack"]
    assert {addon.urn, mocks.named("tft-gp3").urn} <= set(kps.depends_on)


def test_prods_prometheus_and_alertmanager_survive_a_zone(mocks: RecordingMocks) -> None:
    build_platform("prod")
    values = _values(mocks)
    for spec in (values["prometheus"]["prometheusSpec"], values["alertmanager"]["alertmanagerSpec"]):
        assert spec["replicas"] == 2
        (spread,) = spec["topologySpreadConstraints"]
        assert spread["topologyKey"] == "topology.kubernetes.io/zone"


def test_dev_keeps_one_prometheus(mocks: RecordingMocks) -> None:
    build_platform("dev")
    assert "replicas" not in _values(mocks)["prometheus"]["prometheusSpec"]


def _pod_resources(values: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Where kube-prometheus-stack (and its Grafana and kube-state-metrics charts) read each pod's resources."""
    return {
        "prometheus": values["prometheus"]["prometheusSpec"]["resources"],
        "alertmanager": values["alertmanager"]["alertmanagerSpec"]["resources"],
        "grafana": values["grafana"]["resources"],
        "grafana-sidecar": values["grafana"]["sidecar"]["resources"],
        "prometheus-operator": values["prometheusOperator"]["resources"],
        "kube-state-metrics": values["kube-state-metrics"]["resources"],
    }


@pytest.mark.parametrize("environment", ["dev", "prod"])
def test_every_monitoring_pod_asks_cpu_and_memory_with_a_memory_ceiling_and_no_cpu_limit(
    mocks: RecordingMocks, environment: str
) -> None:
    """Beside 40 GiB conversion Jobs on the same system nodes, a pod that asks nothing is placed as if it needed
    nothing and is the first the node's OOM killer takes."""
    build_platform(environment)
    for name, resources in _pod_resources(_values(mocks)).items():
        requests, limits = resources["requests"], resources["limits"]
        assert quantity_value(requests["cpu"]) > 0 and quantity_value(requests["memory"]) > 0, name
        assert quantity_value(limits["memory"]) >= quantity_value(requests["memory"]), name
        assert "cpu" not in limits, name
        assert resources == charts.MONITORING_RESOURCES[name].values()


def test_prometheus_asks_room_for_its_series() -> None:
    """~50-100k active series in prod at a few KiB each, plus queries and the WAL replay after a restart."""
    prometheus = charts.MONITORING_RESOURCES["prometheus"]
    assert quantity_value(prometheus.memory) >= 2 * 2**30
    assert quantity_value(prometheus.memory_limit) >= 2 * quantity_value(prometheus.memory)


def test_the_monitoring_pods_count_prods_replicas_and_grafanas_sidecars() -> None:
    pods = dict(charts.monitoring_pods(replicas=2))
    assert [name for name in pods if name.startswith(("prometheus-", "alertmanager-"))] == [
        "prometheus-0",
        "prometheus-1",
        "alertmanager-0",
        "alertmanager-1",
        "prometheus-operator",
    ]
    assert len(pods["grafana"]) == 1 + charts.GRAFANA_SIDECARS


def test_docs_state_each_monitoring_pods_requests_and_ceiling() -> None:
    text = " ".join((REPO_ROOT / "docs" / "aws.md").read_text().split())
    for name, resources in charts.MONITORING_RESOURCES.items():
        assert f"| {name} | {resources.cpu} | {resources.memory} | {resources.memory_limit} |" in text, name
