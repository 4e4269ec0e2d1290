"""Every add-on chart of the plans at a release whose own files (``components/platform/aws/chart_facts.py``) say it is
made for the cluster's Kubernetes minor, and every image the stack relies on elsewhere at the chart's tag: a pin bumped
without reading its chart, or a cluster minor a chart is not made for, fails here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from components.platform.aws import charts as pins
from components.platform.aws.chart_facts import CHART_FACTS, supports
from tests.components.platform.aws.test_eks_plan_checks import BUILT, charts
from tests.plans import StackPlans

REPO = Path(__file__).resolve().parents[4]
NOT_READ = {
    "ingress-nginx": "the Ingress edge's controller, not in a built stack's plan (edge: gateway)",
    "gateway-helm": "Envoy Gateway: its Gateway API release is checked against its go.mod (GATEWAY_API_VERSION)",
    "prometheus-adapter": "not yet read",
    "keda": "not yet read",
    "prometheus-blackbox-exporter": "not yet read (added with issue 51's platform signals)",
    "aws-for-fluent-bit": "not yet read (added with issue 51's log shipping)",
    "dcgm-exporter": "not yet read (added with issue 51's GPU signals; its pinned version is unconfirmed)",
    "cluster-autoscaler": "its own table, one release per minor (autoscaler.RELEASES, test_eks_plan_checks)",
}
"""Pinned charts without facts here, each with its reason."""


def all_pins() -> list[pins.ChartPin]:
    return [v for v in vars(pins).values() if isinstance(v, pins.ChartPin)]


def test_every_pinned_chart_has_its_facts_read_or_a_reason() -> None:
    for pin in all_pins():
        assert (pin.release, pin.version) in CHART_FACTS or pin.release in NOT_READ, (
            f"{pin.release} {pin.version}: read its Chart.yaml at that release into chart_facts.CHART_FACTS"
        )


@pytest.mark.parametrize("stack", BUILT)
def test_every_chart_of_the_plan_is_made_for_the_clusters_minor(stack_plan: StackPlans, stack: str) -> None:
    plan = stack_plan(stack)
    (cluster,) = [r for r in plan.resources if r.typ == "eks:index:Cluster"]
    minor = cluster.inputs["version"]
    read = 0
    for name, chart in charts(plan).items():
        release = name.rsplit("/", 1)[-1]
        facts = CHART_FACTS.get((release, chart.inputs["version"]))
        if facts is None:
            assert release in NOT_READ, f"{release} {chart.inputs['version']} has no facts"
            continue
        read += 1
        assert supports(facts, minor), (
            f"{release} {facts.version} is made for {facts.min_kubernetes}..{facts.max_kubernetes}"
        )
    assert read >= 4, "cert-manager, kube-prometheus-stack, the device plugin and external-dns at least"


def test_the_amtool_the_routing_tests_run_is_the_alertmanager_the_chart_runs() -> None:
    facts = CHART_FACTS[("kube-prometheus-stack", pins.KUBE_PROMETHEUS_STACK.version)]
    script = (REPO / "scripts/setup/amtool.sh").read_text()
    (version,) = re.findall(r"TRITONFT_ALERTMANAGER_VERSION:-(v[0-9.]+)", script)
    assert version == facts.images["prometheus/alertmanager"]


def test_the_plan_runs_the_charts_own_alertmanager(stack_plan: StackPlans) -> None:
    values = charts(stack_plan("prod"))["kube-prometheus-stack"].inputs["values"]
    assert "image" not in values["alertmanager"].get("alertmanagerSpec", {}), "the chart's tag, which amtool matches"


@pytest.mark.parametrize(("minor", "made_for"), [("1.32", False), ("1.33", True), ("1.36", True), ("1.37", False)])
def test_cert_managers_range_is_the_minors_its_tests_run_on(minor: str, made_for: bool) -> None:
    assert supports(CHART_FACTS[("cert-manager", pins.CERT_MANAGER.version)], minor) is made_for
