"""Grafana's admin login under ``platform: aws``: a password generated for the stack, in a Secret the
kube-prometheus-stack chart is pointed at, never the chart's default (``prom-operator``); asserted on the captured
inputs."""

from __future__ import annotations

from components.platform.aws import charts
from tests.components.platform.aws.helpers import build_platform
from tritonft.synth.engine import RecordingMocks
from tritonft.synth.manifests import is_secret

SECRET = "kubernetes:core/v1:Secret"
RANDOM_PASSWORD = "random:index/randomPassword:RandomPassword"


def _grafana_secret(mocks: RecordingMocks):
    (secret,) = [s for s in mocks.of_type(SECRET) if s.inputs["metadata"]["name"] == charts.GRAFANA_ADMIN_SECRET]
    return secret


def test_grafana_reads_its_admin_login_from_the_stacks_secret_not_the_charts_default(mocks: RecordingMocks) -> None:
    build_platform()
    (kps,) = [c for c in mocks.of_type("kubernetes:helm.sh/v4:Chart") if c.inputs["chart"] == "kube-prometheus-stack"]
    grafana = kps.inputs["values"]["grafana"]
    assert grafana["admin"] == {
        "existingSecret": charts.GRAFANA_ADMIN_SECRET,
        "userKey": "admin-user",
        "passwordKey": "admin-password",
    }
    assert "adminPassword" not in grafana
    assert _grafana_secret(mocks).urn in kps.depends_on


def test_the_password_is_generated_long_and_only_ever_a_secret(mocks: RecordingMocks) -> None:
    build_platform()
    (generated,) = mocks.of_type(RANDOM_PASSWORD)
    assert generated.inputs["length"] >= 32
    secret = _grafana_secret(mocks)
    assert secret.inputs["metadata"]["namespace"] == charts.KUBE_PROMETHEUS_STACK.namespace
    data = secret.inputs["stringData"]
    assert is_secret(data)
    password = data["value"]["admin-password"]
    assert password.startswith("mockkey") and len(password) == generated.inputs["length"], "the generated value"
    assert data["value"]["admin-password"] != "prom-operator"


def test_without_kube_prometheus_stack_no_grafana_login_is_made(mocks: RecordingMocks) -> None:
    from components.platform.aws.addons import AddonFlags

    build_platform(addons=AddonFlags(kube_prometheus_stack=False, prometheus_adapter=False))
    assert not mocks.of_type(RANDOM_PASSWORD)
    assert not [s for s in mocks.of_type(SECRET) if s.inputs["metadata"]["name"] == charts.GRAFANA_ADMIN_SECRET]
