"""What each pinned add-on chart says about itself, read from the chart's own sources at the pinned release: the app
it runs, the images the stack relies on, and the Kubernetes minors it is made for. Pure data; the settings refuse a
``kubernetesVersion`` a chart the stack installs is not made for (rule ``charts-made-for-the-minor``), and the plan
checks (``tests/components/platform/aws/test_chart_versions.py``) hold every pin of
``components/platform/aws/charts.py``, every image and the cluster's minor to it. It lives with the settings (the
lowest layer) so that both the rule and the platform read the same facts.

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

Read 2026-11-29 from the snapshots named (``git show <tag>:<path>``); for each, the key paths the stack's values set
were found in the chart's ``values.yaml`` or read by its templates:

* prometheus-adapter ``4.11.0`` (prometheus-community/helm-charts tag ``prometheus-adapter-4.11.0``, ``cfa7307``,
  2024-08-10; snapshot of 2026-08-22): ``Chart.yaml`` appVersion ``v0.12.0``, no ``kubeVersion``; its README's
  prerequisite "Kubernetes 1.14+". The app (kubernetes-sigs/prometheus-adapter ``v0.12.0``, 2024-05-16, its last
  release; the repository's last commit is of 2025-04-01) is built on ``k8s.io/*`` v0.30.0 and states no upper
  bound. Every newer chart (to ``5.3.0``, 2026-02-19) runs the same app. Values: ``prometheus.url``,
  ``prometheus.port``, ``rules.default``, ``rules.custom``.
* keda ``2.20.2`` (kedacore/charts tag ``v2.20.2``, ``cbb9bb8``, 2026-07-31): ``keda/Chart.yaml`` appVersion
  ``2.20.2``, ``kubeVersion: >=v1.23.0-0``; KEDA's compatibility table (kedacore/keda-docs ``a55c5d3``, 2026-08-20,
  ``content/docs/2.20/operate/cluster.md``, "Kubernetes Compatibility"): v2.20 is tested on v1.33 - v1.35, v2.16 on
  v1.29 - v1.31. The previous pin, ``2.16.0`` (tag of 2024-11-07), is not made for the stacks' 1.35. Values:
  ``prometheus.operator.enabled``; the ScaledObject fields the stack writes are in KEDA v2.20.2's CRD
  (``config/crd/bases/keda.sh_scaledobjects.yaml``) and its Prometheus scaler's metadata
  (``pkg/scalers/prometheus_scaler.go``).
* prometheus-blackbox-exporter ``9.0.1`` (tag ``prometheus-blackbox-exporter-9.0.1``, ``848f830``, 2024-10-08):
  appVersion ``v0.25.0``, ``kubeVersion: >=1.21.0-0``. Values: ``nodeSelector``, ``config.modules``,
  ``serviceMonitor.enabled``, ``serviceMonitor.defaults.{interval,scrapeTimeout}``, ``serviceMonitor.targets``
  (``name``, ``url``, ``module``, ``additionalRelabeling``: ``templates/servicemonitor.yaml``).
* aws-for-fluent-bit ``0.2.0`` (aws/eks-charts ``master``, ``2942cdc``, 2026-02-03; snapshot of 2026-08-03): appVersion
  ``3.2.1``, image tag ``3.2.1``, no ``kubeVersion``, no Kubernetes version stated in its README. The previous pin,
  ``0.2.1``, is not released: the chart repository's index (``gh-pages`` ``index.yaml``, ``c7f9ea5``, 2026-08-03)
  lists ``0.2.0`` as the newest, and 0.2.1 exists only in an open pull request (#1305, ``9d218bf``, podLabels).
  Values: ``input.path``, ``cloudWatchLogs.*``, ``{firehose,kinesis,elasticsearch}.enabled``, ``serviceAccount.*``,
  ``tolerations``; ``priorityClassName`` is read by ``templates/daemonset.yaml``.
* dcgm-exporter ``4.1.1`` (NVIDIA/dcgm-exporter tag ``4.2.3-4.1.1``, ``c0d04b7``, 2025-05-15; published in
  ``gh-pages`` ``helm-charts/index.yaml``, ``ecd340d``, on 2025-05-15): ``deployment/Chart.yaml`` appVersion ``4.1.1``,
  ``kubeVersion: >= 1.19.0-0``; image ``nvcr.io/nvidia/k8s/dcgm-exporter:4.2.3-4.1.1-ubuntu22.04``. Values:
  ``nodeSelector``, ``tolerations``, ``serviceMonitor.{enabled,interval}``. (The newest chart is ``4.8.2``,
  2026-05-05.)
"""

from __future__ import annotations

from collections.abc import Iterable
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
    bounds_from: str = ""
    """Where the bounds come from when not the chart's ``kubeVersion`` (shown in the settings' refusal)."""


PINNED: dict[str, ChartFacts] = {
    f.chart: f
    for f in (
        ChartFacts("cert-manager", "v1.21.1", "v1.21.1", "1.33", "1.36", bounds_from="its end-to-end tests"),
        ChartFacts(
            "kube-prometheus-stack",
            "88.5.3",
            "v0.93.1",
            "1.25",
            images={"prometheus/alertmanager": "v0.34.0"},
        ),
        ChartFacts("external-dns", "1.21.1", "0.21.0", None),
        ChartFacts("nvidia-device-plugin", "0.20.0", "0.20.0", "1.10"),
        ChartFacts("metrics-server", "3.13.1", "0.8.1", "1.31", bounds_from="its compatibility matrix"),
        ChartFacts("prometheus-adapter", "4.11.0", "v0.12.0", "1.14", bounds_from="its README"),
        ChartFacts("keda", "2.20.2", "2.20.2", "1.33", "1.35", bounds_from="KEDA's compatibility table"),
        ChartFacts("prometheus-blackbox-exporter", "9.0.1", "v0.25.0", "1.21"),
        ChartFacts("aws-for-fluent-bit", "0.2.0", "3.2.1", None),
        ChartFacts("dcgm-exporter", "4.1.1", "4.1.1", "1.19"),
    )
}
"""Per chart: the release ``components/platform/aws/charts.py`` pins, as read. cert-manager's bounds are the minors its
end-to-end tests run on (its chart allows 1.22 and up); KEDA's, the minors its compatibility table names for the
release (its chart allows 1.23 and up)."""
CHART_FACTS: dict[tuple[str, str], ChartFacts] = {(f.chart, f.version): f for f in PINNED.values()}
"""Per (chart, version)."""

ADDON_CHARTS: dict[str, tuple[str, ...]] = {
    "cert-manager": ("cert-manager",),
    "kube-prometheus-stack": ("kube-prometheus-stack", "dcgm-exporter", "prometheus-blackbox-exporter"),
    "prometheus-adapter": ("prometheus-adapter",),
    "keda": ("keda",),
}
"""Per add-on of ``addons``: the read charts it installs, its own and those it brings (dcgm-exporter on the GPU nodes;
the blackbox exporter for the edge's hosts). ``envoy-gateway`` and ``ingress-nginx`` state no Kubernetes bounds here
(Envoy Gateway is held to its Gateway API release instead)."""
PLATFORM_CHARTS: tuple[str, ...] = ("nvidia-device-plugin", "metrics-server", "external-dns", "aws-for-fluent-bit")
"""Charts an ``aws`` stack installs besides its add-ons (the device plugin always; metrics-server, external-dns and
Fluent Bit when a feature of the stack needs them): judged on every ``aws`` stack."""


@dataclass(frozen=True)
class AutoscalerRelease:
    """cluster-autoscaler for one Kubernetes minor: the chart whose ``appVersion`` is of that minor (its RBAC is
    what that release reads: CA 1.35 turns DRA on and waits for ``resource.k8s.io`` informers, which only charts
    from 9.54.0 allow) and the image, the newest patch of the same minor."""

    chart: str
    app_version: str
    """The chart's ``appVersion`` (its Chart.yaml)."""
    image: str


AUTOSCALER_RELEASES: dict[str, AutoscalerRelease] = {
    "1.32": AutoscalerRelease("9.46.6", "1.32.0", "v1.32.5"),
    "1.33": AutoscalerRelease("9.51.0", "1.33.0", "v1.33.5"),
    "1.34": AutoscalerRelease("9.53.0", "1.34.2", "v1.34.4"),
    "1.35": AutoscalerRelease("9.59.0", "1.35.0", "v1.35.1"),
}
"""Per Kubernetes minor, cluster-autoscaler's chart and image (its compatibility rule: CA's minor is the cluster's),
installed by ``components/platform/aws/autoscaler.py`` whenever a node group may grow. Charts: the newest
``cluster-autoscaler-chart-*`` tag of kubernetes/autoscaler whose Chart.yaml ``appVersion`` is of that minor (read
from the repository's history at 2026-08-22: 9.46.6 -> 1.32.0, 9.51.0 -> 1.33.0, 9.53.0 -> 1.34.2, 9.59.0 -> 1.35.0;
no chart of app 1.36 yet). Images: the newest patch promoted to registry.k8s.io (kubernetes/k8s.io#8815 for 1.32.5;
#9676, 2026-07-02, for 1.33.5, 1.34.4, 1.35.1 and v1.36.0, which has no chart yet, so the settings refuse 1.36 with
node groups that may grow until one is released: rule ``charts-made-for-the-minor``)."""


def autoscaler_release(kubernetes_version: str) -> AutoscalerRelease | None:
    """The cluster-autoscaler release for a Kubernetes ``major.minor`` (a patch is ignored); None when none is
    pinned."""
    return AUTOSCALER_RELEASES.get(".".join(kubernetes_version.split(".")[:2]))


def minors_span(minors: Iterable[str]) -> str:
    """The lowest and highest of ``minors``, in words: ``1.32 to 1.35``."""
    ordered = sorted(minors, key=minor_tuple)
    return f"{ordered[0]} to {ordered[-1]}"


def autoscaler_minors_text() -> str:
    """The minors a cluster-autoscaler is pinned for, in words: ``1.32 to 1.35``."""
    return minors_span(AUTOSCALER_RELEASES)


def minor_tuple(minor: str) -> tuple[int, int]:
    major, rest = minor.split(".", 1)
    return int(major), int(rest.split(".", 1)[0])


def supports(facts: ChartFacts, minor: str) -> bool:
    """Whether ``facts``' chart is made for Kubernetes ``minor``."""
    m = minor_tuple(minor)
    if facts.min_kubernetes is not None and m < minor_tuple(facts.min_kubernetes):
        return False
    return facts.max_kubernetes is None or m <= minor_tuple(facts.max_kubernetes)


def minors_text(facts: ChartFacts) -> str:
    """The minors ``facts``' chart is made for, in words: ``1.33 to 1.36``, ``1.25 and later``."""
    lo, hi = facts.min_kubernetes, facts.max_kubernetes
    if lo and hi:
        return f"{lo} to {hi}"
    if lo:
        return f"{lo} and later"
    return f"up to {hi}" if hi else "any minor"


def installed_charts(addons: Iterable[str]) -> list[tuple[str | None, ChartFacts]]:
    """The read charts an ``aws`` stack with ``addons`` may install, each with the add-on that brings it (None: the
    platform's own), in :data:`ADDON_CHARTS` then :data:`PLATFORM_CHARTS` order."""
    listed = set(addons)
    found = [(addon, PINNED[c]) for addon, charts in ADDON_CHARTS.items() if addon in listed for c in charts]
    return found + [(None, PINNED[c]) for c in PLATFORM_CHARTS]
