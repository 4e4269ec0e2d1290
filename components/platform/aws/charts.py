"""Pinned Helm charts and the values this project gives them (pure data; ``addons.py`` installs them)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from components.common.podsec import PodSecurityLevel
from components.common.target import GPU_RESOURCE
from components.common.triton import adapter_rule, waiting_adapter_rule
from components.settings.alerting import alert_routing


@dataclass(frozen=True)
class ChartPin:
    """One Helm chart at an exact version, from its upstream repository (or an OCI reference, ``repo`` empty)."""

    chart: str
    version: str
    repo: str
    namespace: str
    addon: str
    """The name this add-on has in ``ClusterTarget.addons``."""
    pod_security: PodSecurityLevel = "baseline"
    """Pod Security Admission level enforced on the chart's namespace (warn and audit stay at ``restricted``):
    ``privileged`` only where the chart's pods need the host (hostPath, host network or PID)."""

    @property
    def release(self) -> str:
        """The Helm release name: the chart's last path segment (an OCI reference names a registry path)."""
        return self.chart.rsplit("/", 1)[-1]


NVIDIA_DEVICE_PLUGIN = ChartPin(
    "nvidia-device-plugin",
    "0.20.0",
    "https://nvidia.github.io/k8s-device-plugin",
    "nvidia-device-plugin",
    "nvidia",
    pod_security="privileged",  # the plugin mounts the kubelet's device-plugins directory (hostPath)
)
INGRESS_NGINX = ChartPin(
    "ingress-nginx", "4.11.3", "https://kubernetes.github.io/ingress-nginx", "ingress-nginx", "ingress-nginx"
)
ENVOY_GATEWAY = ChartPin(
    "oci://docker.io/envoyproxy/gateway-helm", "v1.9.1", "", "envoy-gateway-system", "envoy-gateway"
)
"""The Gateway API implementation of the stack's edge (``components/common/edge.py``): its chart installs the Gateway
API CRDs it is built against (``sigs.k8s.io/gateway-api`` v1.6.1, standard channel) and its own (SecurityPolicy,
BackendTrafficPolicy, EnvoyProxy ...); the proxies run in this namespace too."""
GATEWAY_API_VERSION = "v1.6.1"
"""The Gateway API release Envoy Gateway v1.9.1 is built against (its go.mod): the CRDs the tests load."""
EXTERNAL_DNS = ChartPin(
    "external-dns", "1.21.1", "https://kubernetes-sigs.github.io/external-dns/", "external-dns", "external-dns"
)
"""Route53 records for the edge's hosts (``components/platform/aws/dns.py``); app v0.21.0 reads Gateway API v1
routes."""
CERT_MANAGER = ChartPin("cert-manager", "v1.21.1", "https://charts.jetstack.io", "cert-manager", "cert-manager")
KUBE_PROMETHEUS_STACK = ChartPin(
    "kube-prometheus-stack",
    "88.5.3",
    "https://prometheus-community.github.io/helm-charts",
    "monitoring",
    "prometheus-operator",
    pod_security="privileged",  # its node-exporter runs on the host's network and PID namespaces, with hostPath
)
PROMETHEUS_ADAPTER = ChartPin(
    "prometheus-adapter",
    "4.11.0",
    "https://prometheus-community.github.io/helm-charts",
    "monitoring",
    "prometheus-adapter",
)
"""The custom metrics API the HPAs read (app v0.12.0, the adapter's last release: every newer chart runs it too)."""
CLUSTER_AUTOSCALER = ChartPin(
    "cluster-autoscaler",
    "9.59.0",
    "https://kubernetes.github.io/autoscaler",
    "cluster-autoscaler",
    "cluster-autoscaler",
)
"""Node autoscaler of ``platform: aws`` (``components/platform/aws/autoscaler.py``): the chart of the default
Kubernetes minor (1.35, app 1.35.0); ``autoscaler.chart_pin`` picks the chart and image of the cluster's minor."""
KEDA = ChartPin("keda", "2.20.2", "https://kedacore.github.io/charts", "keda", "keda")
"""KEDA v2.20.2, tested on Kubernetes 1.33-1.35 (KEDA's compatibility table; 2.16.0, the previous pin, on 1.29-1.31
only): the settings refuse it on another minor (``components/settings/chart_facts.py``)."""
METRICS_SERVER = ChartPin(
    "metrics-server", "3.13.1", "https://kubernetes-sigs.github.io/metrics-server/", "metrics-server", "metrics-server"
)
"""The resource metrics API (``metrics.k8s.io``) the gateway's CPU HPA reads; EKS does not run one by itself."""
BLACKBOX_EXPORTER = ChartPin(
    "prometheus-blackbox-exporter",
    "9.0.1",
    "https://prometheus-community.github.io/helm-charts",
    "monitoring",
    "blackbox-exporter",
)
"""Probes each public host of the stack from outside the pods (app v0.25.0; ``components/platform/signals.py``):
implied by kube-prometheus-stack on a stack with an edge, not listed in ``addons``."""
AWS_FOR_FLUENT_BIT = ChartPin(
    "aws-for-fluent-bit",
    "0.2.0",
    "https://aws.github.io/eks-charts",
    "logging",
    "aws-for-fluent-bit",
    pod_security="privileged",  # tails the kubelet's log files on the node (hostPath /var/log)
)
"""Ships the stack's and the edge's container logs to CloudWatch Logs (app 3.2.1; ``components/platform/aws/logs.py``):
in ``staging`` and ``prod``, not listed in ``addons``. 0.2.0 is the newest release of the chart repository (0.2.1, the
previous pin, was never released: ``components/settings/chart_facts.py``)."""
DCGM_EXPORTER = ChartPin(
    "dcgm-exporter",
    "4.1.1",
    "https://nvidia.github.io/dcgm-exporter/helm-charts",
    "dcgm-exporter",
    "dcgm-exporter",
    pod_security="privileged",  # reads the kubelet's pod-resources socket (hostPath) and profiles with SYS_ADMIN
)
"""NVIDIA's GPU telemetry (Xid errors, ECC, temperatures) on every GPU node, scraped by its chart's ServiceMonitor:
implied by kube-prometheus-stack on ``platform: aws`` (every such stack has GPU nodes), not listed in ``addons``."""

PROMETHEUS_FULLNAME = "kube-prometheus-stack"
"""``fullnameOverride`` of kube-prometheus-stack, so the Prometheus Service name is predictable."""


def prometheus_url(pin: ChartPin = KUBE_PROMETHEUS_STACK) -> str:
    """In-cluster URL of the Prometheus that kube-prometheus-stack runs (used by prometheus-adapter and KEDA)."""
    return f"http://{PROMETHEUS_FULLNAME}-prometheus.{pin.namespace}.svc:9090"


def device_plugin_values(node_selector: dict[str, str]) -> dict[str, Any]:
    """Run the device plugin on GPU nodes that need it, and only there.

    The chart's default affinity wants Node Feature Discovery labels EKS nodes do not have; it is replaced by a
    required affinity on ``node_selector`` (lists replace in Helm merges). A plugin on CPU nodes crash-loops
    (eksctl#8858); a plugin without the GPU toleration never reaches tainted nodes (eksctl#5277).
    """
    return {
        "nodeSelector": dict(node_selector),
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": k, "operator": "In", "values": [v]} for k, v in sorted(node_selector.items())
                            ]
                        }
                    ]
                }
            }
        },
        "tolerations": [
            {"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"},
            {"key": "CriticalAddonsOnly", "operator": "Exists"},
        ],
        "priorityClassName": "system-node-critical",
        "failOnInitError": True,
    }


def ingress_nginx_values(ingress_class: str, service_monitor: bool) -> dict[str, Any]:
    """ingress-nginx behind an internet-facing NLB (in-tree AWS cloud provider, no extra controller needed)."""
    return {
        "controller": {
            "ingressClass": ingress_class,
            "ingressClassResource": {"name": ingress_class, "enabled": True, "default": False},
            "replicaCount": 2,
            "service": {
                "type": "LoadBalancer",
                "externalTrafficPolicy": "Local",
                "annotations": dict(NLB_ANNOTATIONS),
            },
            # gRPC streams and large generation requests: defaults (60 s, 1 MiB) are too tight for LLM inference.
            "config": {"proxy-body-size": "64m", "proxy-read-timeout": "600", "proxy-send-timeout": "600"},
            "metrics": {"enabled": True, "serviceMonitor": {"enabled": service_monitor}},
        }
    }


def cert_manager_values(gateway_api: bool = False, *, service_monitor: bool = False) -> dict[str, Any]:
    """cert-manager with its CRDs; with ``gateway_api`` also its Gateway API support (a certificate per HTTPS
    listener of an annotated Gateway, HTTP-01 challenges answered through an HTTPRoute), which needs the Gateway
    API CRDs installed before it starts; with ``service_monitor`` its metrics (certificates' expiry and readiness)
    scraped by the Prometheus operator through the chart's ServiceMonitor."""
    values: dict[str, Any] = {"crds": {"enabled": True, "keep": True}}
    if service_monitor:
        values["prometheus"] = {"enabled": True, "servicemonitor": {"enabled": True}}
    if gateway_api:
        values["config"] = {
            "apiVersion": "controller.config.cert-manager.io/v1alpha1",
            "kind": "ControllerConfiguration",
            "enableGatewayAPI": True,
        }
    return values


NLB_ANNOTATIONS = {
    "service.beta.kubernetes.io/aws-load-balancer-type": "nlb",
    "service.beta.kubernetes.io/aws-load-balancer-scheme": "internet-facing",
    "service.beta.kubernetes.io/aws-load-balancer-cross-zone-load-balancing-enabled": "true",
}
"""An internet-facing NLB in front of the edge's proxies (in-tree AWS cloud provider, no extra controller)."""


def envoy_gateway_values(rate_limit_redis: str | None = None) -> dict[str, Any]:
    """The chart's defaults (the controller in its namespace; the proxies' shape is the stack's ``EnvoyProxy``), with
    Lua extension policies on: the edge's key-expiry check is one (``components.common.edge.key_expiry_lua``), and
    Envoy Gateway v1.9 turns them off by default, answering 500 on every route such a policy targets. With
    ``rate_limit_redis`` (``host:port``), Envoy Gateway also runs its rate-limit service on that Redis, which the
    edge's global limit needs (``rateLimitRedis``). Helm merges ``config.envoyGateway`` into the chart's own."""
    envoy_gateway: dict[str, Any] = {"extensionApis": {"enableLua": True}}
    if rate_limit_redis:
        envoy_gateway["rateLimit"] = {"backend": {"type": "Redis", "redis": {"url": rate_limit_redis}}}
    return {"config": {"envoyGateway": envoy_gateway}}


EKS_UNSCRAPABLE = ("kubeControllerManager", "kubeScheduler", "kubeEtcd", "kubeProxy")
"""The chart's monitors of control-plane components EKS runs out of reach (controller-manager, scheduler, etcd) and
of kube-proxy (its metrics bind to 127.0.0.1 on EKS): scraped, their targets are down forever and the chart's
``...Down`` alerts fire for good."""
EKS_UNSCRAPABLE_RULES = (
    "etcd",
    "kubeControllerManager",
    "kubeSchedulerAlerting",
    "kubeSchedulerRecording",
    "kubeProxy",
)
"""The chart's default rule groups about those components (``defaultRules.rules``)."""
NULL_RECEIVER = "null"


def alertmanager_config(
    receivers: Sequence[Mapping[str, Any]], routing: Mapping[str, str | None] | None = None
) -> dict[str, Any]:
    """Alerts by severity (:func:`components.settings.alerting.alert_routing`): ``critical`` pages (repeated
    hourly), ``warning`` goes to the ticket receiver, ``info`` nowhere; the always-firing ``Watchdog`` goes to the
    dead-man's switch every minute (it pages when the heartbeat stops); ``InfoInhibitor`` nowhere. A route without a
    receiver ends at ``null``. An alert without a severity goes where warnings go."""
    named = [dict(r) for r in receivers]
    to = alert_routing(named, None) | {k: v for k, v in (routing or {}).items() if v}

    def receiver(route: str) -> str:
        return to.get(route) or NULL_RECEIVER

    return {
        "route": {
            "receiver": receiver("warning"),
            "group_by": ["alertname", "namespace"],
            "group_wait": "30s",
            "group_interval": "5m",
            "repeat_interval": "4h",
            "routes": [
                {
                    "receiver": receiver("watchdog"),
                    "matchers": ['alertname="Watchdog"'],
                    "group_wait": "0s",
                    "group_interval": "1m",
                    "repeat_interval": "1m",
                },
                {"receiver": NULL_RECEIVER, "matchers": ['alertname="InfoInhibitor"']},
                {"receiver": receiver("critical"), "matchers": ['severity="critical"'], "repeat_interval": "1h"},
                {"receiver": receiver("warning"), "matchers": ['severity="warning"']},
                {"receiver": NULL_RECEIVER, "matchers": ['severity=~"info|none"']},
            ],
        },
        "receivers": [{"name": NULL_RECEIVER}, *named],
        "inhibit_rules": [
            {
                "source_matchers": ["severity=critical"],
                "target_matchers": ["severity=~warning|info"],
                "equal": ["namespace", "alertname"],
            }
        ],
    }


@dataclass(frozen=True)
class PodResources:
    """What one pod of an add-on asks: CPU and memory requested (what the scheduler reserves on its node), and a
    memory limit (the pod is restarted past it instead of the node's OOM killer choosing among its neighbours). No
    CPU limit: a throttled Prometheus evaluates rules late and serves the HPAs stale metrics, and the requests
    already share the CPU by weight."""

    cpu: str
    memory: str
    memory_limit: str

    def values(self) -> dict[str, Any]:
        return {"requests": {"cpu": self.cpu, "memory": self.memory}, "limits": {"memory": self.memory_limit}}


MONITORING_RESOURCES: Mapping[str, PodResources] = {
    "prometheus": PodResources("500m", "2Gi", "4Gi"),
    "alertmanager": PodResources("50m", "128Mi", "256Mi"),
    "grafana": PodResources("100m", "256Mi", "512Mi"),
    "grafana-sidecar": PodResources("50m", "64Mi", "128Mi"),
    "prometheus-operator": PodResources("100m", "128Mi", "256Mi"),
    "kube-state-metrics": PodResources("50m", "192Mi", "384Mi"),
}
"""kube-prometheus-stack's pods on the system nodes, sized for a stack's scrape (docs/aws.md, "Monitoring on EKS"):
Prometheus's head holds ~50-100k active series in prod (a dozen nodes' node-exporter, kubelet and cAdvisor series,
the API server's histograms, kube-state-metrics, DCGM, Triton's, vLLM's and Envoy's per pod) at a few KiB each, plus
its queries and WAL replay: 2 GiB asked, 4 GiB its ceiling; the others are small and steady. The chart asks nothing
by default: beside a 40 GiB conversion Job on the same r6i.2xlarge, a request-less Prometheus is the first pod the
node's OOM killer reaches for and is placed as if it needed nothing."""


GRAFANA_SIDECARS = 2
"""The Grafana pod's sidecars the chart turns on (dashboards and datasources), each asking ``grafana-sidecar``."""


def monitoring_pods(replicas: int = 1) -> list[tuple[str, tuple[PodResources, ...]]]:
    """The pods kube-prometheus-stack runs on the system nodes, each with what its containers ask (``replicas``:
    Prometheus's and Alertmanager's, 2 in prod). Its node-exporter DaemonSet is in the nodes' DaemonSet allowance
    (``components.settings.capacity.DAEMONSET_MEMORY_MIB``)."""
    r = MONITORING_RESOURCES
    return [
        *[(f"prometheus-{i}", (r["prometheus"],)) for i in range(replicas)],
        *[(f"alertmanager-{i}", (r["alertmanager"],)) for i in range(replicas)],
        ("grafana", (r["grafana"], *[r["grafana-sidecar"]] * GRAFANA_SIDECARS)),
        ("prometheus-operator", (r["prometheus-operator"],)),
        ("kube-state-metrics", (r["kube-state-metrics"],)),
    ]


ALERTMANAGER_SECRET = "alertmanager-triton-ft"
"""The Secret holding Alertmanager's configuration (key ``alertmanager.yaml``): receivers carry webhook URLs and
keys, so they live in a Secret the stack writes, not in the chart's values (which the plan shows)."""


GRAFANA_ADMIN_SECRET = "grafana-admin"
"""The Secret (in the monitoring namespace) Grafana's admin login comes from: ``admin-user`` and ``admin-password``,
a password generated for the stack (the chart's default would be ``prom-operator``)."""
GRAFANA_USER_KEY = "admin-user"
GRAFANA_PASSWORD_KEY = "admin-password"


def kube_prometheus_stack_values(
    storage_class: str | None = None,
    prometheus_storage_gib: int = 50,
    *,
    alertmanager_secret: str | None = None,
    grafana_admin_secret: str = GRAFANA_ADMIN_SECRET,
    alertmanager_secrets: Sequence[str] = (),
    replicas: int = 1,
) -> dict[str, Any]:
    """Prometheus that picks up every ServiceMonitor/PodMonitor/PrometheusRule in the cluster, not only its own;
    Grafana's admin login from ``grafana_admin_secret`` (never the chart's default password).

    On EKS: the monitors and rules of components EKS does not let anyone scrape are off; with ``storage_class``
    (an EBS class) Prometheus keeps its 15 days and Alertmanager its silences across reschedules; with
    ``alertmanager_secret`` Alertmanager reads its configuration (:func:`alertmanager_config`) from that Secret;
    ``alertmanager_secrets`` are mounted into Alertmanager under ``/etc/alertmanager/secrets/<name>/`` (the
    receivers' credential files). ``replicas`` > 1 (prod): that many Prometheus and Alertmanager pods (Alertmanager's
    replicas gossip and notify once; each Prometheus scrapes everything, Alertmanager deduplicates their alerts),
    spread over the zones (``ScheduleAnyway``: a zone short of system nodes delays no pod), so one zone lost keeps
    the HPAs' custom metrics and the paging.
    """
    resources = MONITORING_RESOURCES
    alertmanager_spec: dict[str, Any] = {"resources": resources["alertmanager"].values()}
    values: dict[str, Any] = {
        "grafana": {
            "admin": {
                "existingSecret": grafana_admin_secret,
                "userKey": GRAFANA_USER_KEY,
                "passwordKey": GRAFANA_PASSWORD_KEY,
            },
            "resources": resources["grafana"].values(),
            "sidecar": {"resources": resources["grafana-sidecar"].values()},
        },
        "prometheusOperator": {"resources": resources["prometheus-operator"].values()},
        "kube-state-metrics": {"resources": resources["kube-state-metrics"].values()},
        "fullnameOverride": PROMETHEUS_FULLNAME,
        "prometheus": {
            "prometheusSpec": {
                "serviceMonitorSelectorNilUsesHelmValues": False,
                "podMonitorSelectorNilUsesHelmValues": False,
                "ruleSelectorNilUsesHelmValues": False,
                "retention": "15d",
                "resources": resources["prometheus"].values(),
            }
        },
        "alertmanager": {"enabled": True},
        **{component: {"enabled": False} for component in EKS_UNSCRAPABLE},
        "defaultRules": {"rules": {rule: False for rule in EKS_UNSCRAPABLE_RULES}},
    }
    if storage_class:
        values["prometheus"]["prometheusSpec"]["storageSpec"] = _claim(storage_class, prometheus_storage_gib)
        alertmanager_spec["storage"] = _claim(storage_class, 2)
    if alertmanager_secret:
        alertmanager_spec |= {"useExistingSecret": True, "configSecret": alertmanager_secret}
    if alertmanager_secrets:
        alertmanager_spec["secrets"] = list(alertmanager_secrets)
    if replicas > 1:
        values["prometheus"]["prometheusSpec"] |= {"replicas": replicas, **_zone_spread("prometheus")}
        alertmanager_spec |= {"replicas": replicas, **_zone_spread("alertmanager")}
    values["alertmanager"]["alertmanagerSpec"] = alertmanager_spec
    return values


def _zone_spread(app: str) -> dict[str, Any]:
    return {
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": {"app.kubernetes.io/name": app}},
            }
        ]
    }


def _claim(storage_class: str, gib: int) -> dict[str, Any]:
    return {
        "volumeClaimTemplate": {
            "spec": {
                "storageClassName": storage_class,
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": f"{gib}Gi"}},
            }
        }
    }


def prometheus_adapter_values() -> dict[str, Any]:
    """prometheus-adapter serving the custom metrics API from kube-prometheus-stack's Prometheus.

    Besides the chart's default rules, Triton's counters are exposed per pod as 1-minute rates
    (``nv_inference_queue_duration_us_rate`` ...: divided by 10^6, the mean number of queued requests, which
    tritonserver 2.33.0 exports no gauge of), so an HPA can scale on them.
    """
    per_pod = {"overrides": {"namespace": {"resource": "namespace"}, "pod": {"resource": "pod"}}}
    return {
        "prometheus": {"url": prometheus_url().rsplit(":", 1)[0], "port": 9090},
        "rules": {
            "default": True,
            "custom": [
                {
                    "seriesQuery": (
                        '{__name__=~"nv_inference_(request_success|count|queue_duration_us|compute_infer_duration_us)"'
                        ',namespace!="",pod!=""}'
                    ),
                    "resources": per_pod,
                    "name": {"matches": "^(.*)$", "as": "${1}_rate"},
                    "metricsQuery": "sum(rate(<<.Series>>{<<.LabelMatchers>>}[1m])) by (<<.GroupBy>>)",
                },
                # The queue:compute ratio the TritonService HPA scales on (recorded by its PrometheusRule). No
                # pending-request gauge: tritonserver 2.33.0 (the FT image's) has no
                # nv_inference_pending_request_count; nv_inference_queue_duration_us_rate / 1e6 is the mean queue.
                adapter_rule(),
                # A vLLM model's signal: its pods' requests waiting inside vLLM (recorded by its PrometheusRule).
                waiting_adapter_rule(),
            ],
        },
    }


def metrics_server_values(node_selector: dict[str, str]) -> dict[str, Any]:
    """On the system (CPU) nodes, two replicas so a node drain never leaves the HPAs blind."""
    return {
        "nodeSelector": dict(node_selector),
        "replicas": 2,
        "podDisruptionBudget": {"enabled": True, "minAvailable": 1},
    }


def dcgm_exporter_values(gpu_node_selector: dict[str, str]) -> dict[str, Any]:
    """dcgm-exporter on the GPU nodes only (their selector, the GPU taint tolerated), with its ServiceMonitor."""
    return {
        "nodeSelector": dict(gpu_node_selector),
        "tolerations": [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}],
        "serviceMonitor": {"enabled": True, "interval": "15s"},
    }


def keda_values() -> dict[str, Any]:
    return {"prometheus": {"operator": {"enabled": False}}}
