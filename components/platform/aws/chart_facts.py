"""What each pinned add-on chart says about itself, read from the chart's own sources at the pinned release: the app
it runs, the images the stack relies on, and the Kubernetes minors it is made for. Pure data; the plan checks
(``tests/components/platform/aws/test_chart_versions.py``) hold every pin, every image and the cluster's minor to it.

Read from the projects' repositories at their state of 2026-08-19..22 (GitHub snapshots):

* cert-manager ``v1.21.1`` (tag of 2026-07-29): ``deploy/charts/cert-manager/Chart.yaml`` ``kubeVersion: >= 1.22.0-0``
  (version and appVersion are the tag); its end-to-end tests run on Kubernetes 1.33-1.36 (``make/cluster.sh``, the
  kind images it accepts). v1.16 (the previous pin) left cert-manager's support in 2025.
* kube-prometheus-stack ``88.5.3`` (prometheus-community/helm-charts tag of 2026-08-21): ``Chart.yaml`` appVersion
  ``v0.93.1`` (prometheus-operator), ``kubeVersion: >=1.25.0-0``; ``values.yaml`` runs Alertmanager ``v0.34.0``.
* external-dns chart ``1.21.1`` (tag ``external-dns-helm-chart-1.21.1``, 2026-04-30): appVersion ``0.21.0``, no
  ``kubeVersion``; the app's TXT registry names its records ``<type>-<host>`` (``registry/mapper/mapper.go``).
* nvidia-device-plugin ``0.20.0`` (NVIDIA/k8s-device-plugin tag of 2026-08-19): appVersion ``0.20.0``,
  ``kubeVersion: >= 1.10.0-0``.
* metrics-server chart ``3.13.1`` (tag ``metrics-server-helm-chart-3.13.1``, 2026-06-08): appVersion ``0.8.1``; the
  app's README compatibility matrix: 0.8.x serves ``metrics.k8s.io/v1beta1`` on Kubernetes 1.31+.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ChartFacts:
    """One chart release as its own files describe it."""

    chart: str
    version: str
    app_version: str
    min_kubernetes: str | None
    """The lowest Kubernetes minor it is made for (``kubeVersion`` or the app's own compatibility statement); None =
    its files state none."""
    max_kubernetes: str | None = None
    """The highest minor its project tests or states; None = no upper bound stated."""
    images: dict[str, str] = field(default_factory=dict)
    """Image name -> tag the chart runs that the stack relies on elsewhere (e.g. Alertmanager's, for amtool)."""


CHART_FACTS: dict[tuple[str, str], ChartFacts] = {
    (f.chart, f.version): f
    for f in (
        ChartFacts("cert-manager", "v1.21.1", "v1.21.1", "1.33", "1.36"),
        ChartFacts(
            "kube-prometheus-stack",
            "88.5.3",
            "v0.93.1",
            "1.25",
            images={"prometheus/alertmanager": "v0.34.0"},
        ),
        ChartFacts("external-dns", "1.21.1", "0.21.0", None),
        ChartFacts("nvidia-device-plugin", "0.20.0", "0.20.0", "1.10"),
        ChartFacts("metrics-server", "3.13.1", "0.8.1", "1.31"),
    )
}
"""Per (chart, version). cert-manager's bounds are the minors its end-to-end tests run on (its chart allows 1.22 and
up)."""


def minor_tuple(minor: str) -> tuple[int, int]:
    major, rest = minor.split(".", 1)
    return int(major), int(rest.split(".", 1)[0])


def supports(facts: ChartFacts, minor: str) -> bool:
    """Whether ``facts``' chart is made for Kubernetes ``minor``."""
    m = minor_tuple(minor)
    if facts.min_kubernetes is not None and m < minor_tuple(facts.min_kubernetes):
        return False
    return facts.max_kubernetes is None or m <= minor_tuple(facts.max_kubernetes)
