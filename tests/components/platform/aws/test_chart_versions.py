"""Every add-on chart of the plans at a release whose own files (``components/settings/chart_facts.py``) say it is
made for the cluster's Kubernetes minor, and every image the stack relies on elsewhere at the chart's tag: a pin bumped
without reading its chart, or a cluster minor a chart is not made for, fails here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from components.platform.aws import charts as pins
from components.settings.chart_facts import ADDON_CHARTS, CHART_FACTS, PINNED, PLATFORM_CHARTS, supports
from components.settings.eks import DEFAULT_KUBERNETES_VERSION
from components.settings.schema import ADDONS
from tests.components.platform.aws.test_eks_plan_checks import BUILT, charts
from tests.plans import StackPlans

REPO = Path(__file__).resolve().parents[4]
NOT_READ = {
    "ingress-nginx": "the Ingress edge's controller, not in a built stack's plan (edge: gateway)",
    "gateway-helm": "Envoy Gateway: its Gateway API release is checked against its go.mod (GATEWAY_API_VERSION)",
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


def test_every_read_chart_is_made_for_the_default_minor() -> None:
    """A stack that states no ``kubernetesVersion`` installs any of them (KEDA 2.16, tested on 1.29-1.31, was not)."""
    for facts in PINNED.values():
        assert supports(facts, DEFAULT_KUBERNETES_VERSION), (
            f"{facts.chart} {facts.version} is made for {facts.min_kubernetes}..{facts.max_kubernetes}"
        )


def test_the_settings_judge_each_chart_at_the_release_the_platform_pins() -> None:
    pinned = {pin.release: pin.version for pin in all_pins() if pin.release not in NOT_READ}
    assert {chart: facts.version for chart, facts in PINNED.items()} == pinned


def test_every_read_chart_is_judged_with_the_addon_that_brings_it_or_on_every_aws_stack() -> None:
    """So that the settings' rule `charts-made-for-the-minor` sees each chart the platform may install."""
    brought = [chart for own in ADDON_CHARTS.values() for chart in own]
    assert sorted([*brought, *PLATFORM_CHARTS]) == sorted(PINNED)
    assert set(ADDON_CHARTS) <= set(ADDONS)
    for addon, installed in ADDON_CHARTS.items():
        assert installed[0] == addon, f"{addon}'s own chart (its release is named as the add-on) comes first"


@pytest.mark.parametrize(("minor", "made_for"), [("1.32", False), ("1.33", True), ("1.35", True), ("1.36", False)])
def test_kedas_range_is_its_compatibility_tables(minor: str, made_for: bool) -> None:
    assert supports(CHART_FACTS[("keda", pins.KEDA.version)], minor) is made_for
