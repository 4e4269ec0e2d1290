"""Cluster add-ons installed from pinned Helm charts, each in its own namespace."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pulumi_random as random

from components.common import edge
from components.common.podsec import namespace_labels
from components.platform import signals
from components.platform.aws import charts
from components.platform.aws.charts import ChartPin
from components.platform.signals import EdgeProbe


@dataclass(frozen=True)
class AddonFlags:
    """Optional add-ons; each installs one pinned chart (see ``components/platform/aws/charts.py`` for versions)."""

    envoy_gateway: bool = False
    """Envoy Gateway (the Gateway API edge) and its GatewayClass; the proxies behind an internet-facing NLB."""
    ingress_nginx: bool = False
    """ingress-nginx behind an internet-facing NLB (the Ingress edge, for stacks that keep it)."""
    cert_manager: bool = False
    """cert-manager (TLS certificates for the ingress)."""
    kube_prometheus_stack: bool = True
    """Prometheus operator, Prometheus, Alertmanager, Grafana (Triton ServiceMonitor + rules + dashboard)."""
    prometheus_adapter: bool = True
    """Custom metrics API for HPA on Triton metrics; needs ``kube_prometheus_stack``."""
    keda: bool = False
    """KEDA (event-driven autoscaling, scale to zero); an alternative to prometheus-adapter."""
    metrics_server: bool = False
    """metrics-server (the resource metrics API): implied by the gateway's CPU HPA, not listed in ``addons``."""
    dcgm_exporter: bool = False
    """NVIDIA's dcgm-exporter on the GPU nodes (GPU Xid errors): implied by ``kube_prometheus_stack``."""
    rate_limit_redis: str | None = None
    """``host:port`` of the Redis Envoy Gateway's rate-limit service uses (the edge's global limit); None: none."""

    def problems(self) -> list[str]:
        if self.prometheus_adapter and not self.kube_prometheus_stack:
            return ["addons.prometheusAdapter: needs addons.kubePrometheusStack (it reads that Prometheus)"]
        return []


def install_chart(
    name: str,
    pin: ChartPin,
    values: pulumi.Input[dict[str, Any]],
    *,
    provider: k8s.Provider,
    parent: pulumi.Resource,
    depends_on: Sequence[pulumi.Resource],
    namespace: k8s.core.v1.Namespace | None = None,
) -> tuple[k8s.helm.v4.Chart, k8s.core.v1.Namespace]:
    """Install ``pin`` into its namespace (created here unless given, labelled with the chart's Pod Security
    Admission level) with ``values``; returns chart + namespace."""
    ns = namespace or chart_namespace(name, pin, provider=provider, parent=parent)
    chart = k8s.helm.v4.Chart(
        name,
        chart=pin.chart,
        version=pin.version,
        repository_opts=k8s.helm.v4.RepositoryOptsArgs(repo=pin.repo) if pin.repo else None,
        name=pin.release,
        namespace=ns.metadata.name,
        values=values,
        opts=pulumi.ResourceOptions(
            parent=parent,
            provider=provider,
            depends_on=[ns, *depends_on],
            custom_timeouts=pulumi.CustomTimeouts(create="20m", update="20m", delete="20m"),
        ),
    )
    return chart, ns


def chart_namespace(
    name: str, pin: ChartPin, *, provider: k8s.Provider, parent: pulumi.Resource
) -> k8s.core.v1.Namespace:
    """The chart's namespace, labelled with its Pod Security Admission level."""
    return k8s.core.v1.Namespace(
        f"{name}-ns",
        metadata={"name": pin.namespace, "labels": namespace_labels(pin.pod_security)},
        opts=pulumi.ResourceOptions(parent=parent, provider=provider),
    )


def grafana_admin_secret(
    name: str, namespace: k8s.core.v1.Namespace, *, provider: k8s.Provider, parent: pulumi.Resource
) -> k8s.core.v1.Secret:
    """Grafana's admin login: a password generated once for the stack (kept in the state as a secret; rotated by
    replacing the ``RandomPassword``), in :data:`charts.GRAFANA_ADMIN_SECRET`."""
    password = random.RandomPassword(
        f"{name}-grafana-admin-password",
        length=32,
        special=False,
        opts=pulumi.ResourceOptions(parent=parent),
    )
    generated: pulumi.Input[str] = password.result
    return k8s.core.v1.Secret(
        f"{name}-grafana-admin",
        metadata={
            "name": charts.GRAFANA_ADMIN_SECRET,
            "namespace": namespace.metadata.name,
            "labels": {"app.kubernetes.io/managed-by": "triton-ft"},
        },
        type="Opaque",
        string_data={
            charts.GRAFANA_USER_KEY: "admin",
            charts.GRAFANA_PASSWORD_KEY: pulumi.Output.secret(generated),
        },
        opts=pulumi.ResourceOptions(parent=parent, provider=provider, depends_on=[namespace]),
    )


@dataclass
class InstalledAddons:
    charts: list[k8s.helm.v4.Chart]
    names: frozenset[str]
    ingress: k8s.helm.v4.Chart | None
    crd_installers: list[pulumi.Resource]
    """The charts, and the GatewayClass: what custom resources (routes, Gateways, policies) wait for."""


def install_addons(
    name: str,
    flags: AddonFlags,
    *,
    ingress_class: str,
    system_node_selector: dict[str, str],
    provider: k8s.Provider,
    parent: pulumi.Resource,
    depends_on: Sequence[pulumi.Resource],
    prometheus_values: pulumi.Input[dict[str, Any]] | None = None,
    prometheus_depends_on: Sequence[pulumi.Resource] = (),
    alertmanager_config: pulumi.Input[str] | None = None,
    edge_probes: Sequence[EdgeProbe] = (),
    gpu_node_selector: dict[str, str] | None = None,
    stack_namespace: str = "triton",
) -> InstalledAddons:
    """Install the enabled add-ons. Charts that others build on (Prometheus CRDs) come first.

    ``prometheus_values``: kube-prometheus-stack's values (default: :func:`charts.kube_prometheus_stack_values`);
    ``prometheus_depends_on``: what its volumes need first (the EBS CSI driver and its StorageClass);
    ``alertmanager_config``: Alertmanager's ``alertmanager.yaml``, written to the Secret
    :data:`charts.ALERTMANAGER_SECRET` the values point Alertmanager at; ``edge_probes``: the public hosts the
    blackbox exporter probes (with kube-prometheus-stack); ``gpu_node_selector``: where dcgm-exporter runs;
    ``stack_namespace``: the namespace whose Jobs and Deployments the platform's alerts watch.

    With kube-prometheus-stack, every other add-on's signal is scraped (cert-manager's ServiceMonitor, a PodMonitor
    on Envoy Gateway's proxies) and :func:`signals.platform_rule_spec` alerts on them."""
    installed: list[tuple[ChartPin, k8s.helm.v4.Chart]] = []
    monitoring_ns: k8s.core.v1.Namespace | None = None
    kps: k8s.helm.v4.Chart | None = None
    if flags.kube_prometheus_stack:
        pin = charts.KUBE_PROMETHEUS_STACK
        kps_name = f"{name}-kube-prometheus-stack"
        monitoring_ns = chart_namespace(kps_name, pin, provider=provider, parent=parent)
        config: list[pulumi.Resource] = [
            grafana_admin_secret(kps_name, monitoring_ns, provider=provider, parent=parent)
        ]
        if alertmanager_config is not None:
            config.append(
                k8s.core.v1.Secret(
                    f"{name}-alertmanager-config",
                    metadata={"name": charts.ALERTMANAGER_SECRET, "namespace": monitoring_ns.metadata.name},
                    string_data={"alertmanager.yaml": pulumi.Output.secret(alertmanager_config)},
                    opts=pulumi.ResourceOptions(parent=parent, provider=provider),
                )
            )
        kps, _ = install_chart(
            kps_name,
            pin,
            charts.kube_prometheus_stack_values() if prometheus_values is None else prometheus_values,
            provider=provider,
            parent=parent,
            depends_on=[*depends_on, *prometheus_depends_on, *config],
            namespace=monitoring_ns,
        )
        installed.append((charts.KUBE_PROMETHEUS_STACK, kps))
    after_prometheus = [*depends_on, *([kps] if kps else [])]
    if flags.prometheus_adapter:
        adapter, _ = install_chart(
            f"{name}-prometheus-adapter",
            charts.PROMETHEUS_ADAPTER,
            charts.prometheus_adapter_values(),
            provider=provider,
            parent=parent,
            depends_on=after_prometheus,
            namespace=monitoring_ns,
        )
        installed.append((charts.PROMETHEUS_ADAPTER, adapter))
    gateway_api: list[pulumi.Resource] = []
    if flags.envoy_gateway:
        # Like the ingress' NLB below: the proxies' LoadBalancer Service goes before the nodes on `destroy`.
        eg, _ = install_chart(
            f"{name}-envoy-gateway",
            charts.ENVOY_GATEWAY,
            charts.envoy_gateway_values(flags.rate_limit_redis),
            provider=provider,
            parent=parent,
            depends_on=after_prometheus,
        )
        installed.append((charts.ENVOY_GATEWAY, eg))
        if kps is not None:
            k8s.apiextensions.CustomResource(
                f"{name}-envoy-podmonitor",
                api_version="monitoring.coreos.com/v1",
                kind="PodMonitor",
                metadata={
                    "name": "envoy-proxies",
                    "namespace": charts.ENVOY_GATEWAY.namespace,
                    "labels": {"app.kubernetes.io/managed-by": "triton-ft", "app.kubernetes.io/component": "edge"},
                },
                spec=signals.envoy_pod_monitor_spec(charts.ENVOY_GATEWAY.namespace),
                opts=pulumi.ResourceOptions(parent=parent, provider=provider, depends_on=[kps, eg]),
            )
        gateway_class = k8s.apiextensions.CustomResource(
            f"{name}-gateway-class",
            api_version=edge.GATEWAY_API,
            kind="GatewayClass",
            metadata={"name": edge.GATEWAY_CLASS, "labels": {"app.kubernetes.io/managed-by": "triton-ft"}},
            spec=edge.gateway_class_spec(),
            opts=pulumi.ResourceOptions(parent=parent, provider=provider, depends_on=[eg]),
        )
        gateway_api = [eg, gateway_class]
    if flags.cert_manager:
        # cert-manager looks for the Gateway API CRDs when it starts: Envoy Gateway's chart installs them first.
        cm, _ = install_chart(
            f"{name}-cert-manager",
            charts.CERT_MANAGER,
            charts.cert_manager_values(gateway_api=flags.envoy_gateway, service_monitor=kps is not None),
            provider=provider,
            parent=parent,
            # Its ServiceMonitor needs the Prometheus operator's CRDs first.
            depends_on=[*after_prometheus, *gateway_api],
        )
        installed.append((charts.CERT_MANAGER, cm))
    if flags.keda:
        keda, _ = install_chart(
            f"{name}-keda", charts.KEDA, charts.keda_values(), provider=provider, parent=parent, depends_on=depends_on
        )
        installed.append((charts.KEDA, keda))
    if flags.metrics_server:
        metrics, _ = install_chart(
            f"{name}-metrics-server",
            charts.METRICS_SERVER,
            charts.metrics_server_values(system_node_selector),
            provider=provider,
            parent=parent,
            depends_on=depends_on,
        )
        installed.append((charts.METRICS_SERVER, metrics))
    if kps is not None and monitoring_ns is not None:
        probes = list(edge_probes)
        if probes:
            blackbox, _ = install_chart(
                f"{name}-blackbox-exporter",
                charts.BLACKBOX_EXPORTER,
                signals.blackbox_exporter_values(probes, system_node_selector),
                provider=provider,
                parent=parent,
                depends_on=after_prometheus,
                namespace=monitoring_ns,
            )
            installed.append((charts.BLACKBOX_EXPORTER, blackbox))
        gpus = flags.dcgm_exporter and gpu_node_selector is not None
        if gpus and gpu_node_selector is not None:
            dcgm, _ = install_chart(
                f"{name}-dcgm-exporter",
                charts.DCGM_EXPORTER,
                charts.dcgm_exporter_values(gpu_node_selector),
                provider=provider,
                parent=parent,
                depends_on=after_prometheus,
            )
            installed.append((charts.DCGM_EXPORTER, dcgm))
        k8s.apiextensions.CustomResource(
            f"{name}-platform-rules",
            api_version="monitoring.coreos.com/v1",
            kind="PrometheusRule",
            metadata={
                "name": "triton-ft-platform",
                "namespace": monitoring_ns.metadata.name,
                "labels": {"app.kubernetes.io/managed-by": "triton-ft", "app.kubernetes.io/component": "platform"},
            },
            spec=signals.platform_rule_spec(
                stack_namespace,
                cert_manager=flags.cert_manager,
                envoy=flags.envoy_gateway,
                blackbox=bool(probes),
                gpus=gpus,
            ),
            opts=pulumi.ResourceOptions(parent=parent, provider=provider, depends_on=[kps]),
        )
    ingress: k8s.helm.v4.Chart | None = None
    if flags.ingress_nginx:
        # The NLB behind this chart's LoadBalancer Service lives in the VPC's public subnets. Depending on the
        # node groups (which depend on the cluster and network) makes `destroy` delete the Service, and wait for
        # AWS to remove the NLB, before any node, the cluster or the VPC goes.
        ingress, _ = install_chart(
            f"{name}-ingress-nginx",
            charts.INGRESS_NGINX,
            charts.ingress_nginx_values(ingress_class, service_monitor=flags.kube_prometheus_stack),
            provider=provider,
            parent=parent,
            depends_on=after_prometheus,
        )
        installed.append((charts.INGRESS_NGINX, ingress))
    return InstalledAddons(
        charts=[chart for _, chart in installed],
        names=frozenset(pin.addon for pin, _ in installed),
        ingress=ingress,
        crd_installers=[*(chart for _, chart in installed), *gateway_api[1:]],
    )
