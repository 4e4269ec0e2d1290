"""Pinned Helm charts and the values this project gives them (pure data; ``addons.py`` installs them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from components.common.target import GPU_RESOURCE
from components.common.triton import adapter_rule


@dataclass(frozen=True)
class ChartPin:
    """One Helm chart at an exact version, from its upstream repository (or an OCI reference, ``repo`` empty)."""

    chart: str
    version: str
    repo: str
    namespace: str
    addon: str
    """The name this add-on has in ``ClusterTarget.addons``."""

    @property
    def release(self) -> str:
        """The Helm release name: the chart's last path segment (an OCI reference names a registry path)."""
        return self.chart.rsplit("/", 1)[-1]


NVIDIA_DEVICE_PLUGIN = ChartPin(
    "nvidia-device-plugin", "0.17.1", "https://nvidia.github.io/k8s-device-plugin", "nvidia-device-plugin", "nvidia"
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
    "external-dns", "1.19.0", "https://kubernetes-sigs.github.io/external-dns/", "external-dns", "external-dns"
)
"""Route53 records for the edge's hosts (``components/platform/aws/dns.py``); app v0.19.0 reads Gateway API v1
routes."""
CERT_MANAGER = ChartPin("cert-manager", "v1.16.2", "https://charts.jetstack.io", "cert-manager", "cert-manager")
KUBE_PROMETHEUS_STACK = ChartPin(
    "kube-prometheus-stack",
    "66.2.1",
    "https://prometheus-community.github.io/helm-charts",
    "monitoring",
    "prometheus-operator",
)
PROMETHEUS_ADAPTER = ChartPin(
    "prometheus-adapter",
    "4.11.0",
    "https://prometheus-community.github.io/helm-charts",
    "monitoring",
    "prometheus-adapter",
)
CLUSTER_AUTOSCALER = ChartPin(
    "cluster-autoscaler",
    "9.48.0",
    "https://kubernetes.github.io/autoscaler",
    "cluster-autoscaler",
    "cluster-autoscaler",
)
"""Node autoscaler of ``platform: aws`` (``components/platform/aws/autoscaler.py``); image tag pinned per
Kubernetes minor."""
KEDA = ChartPin("keda", "2.16.0", "https://kedacore.github.io/charts", "keda", "keda")
METRICS_SERVER = ChartPin(
    "metrics-server", "3.12.1", "https://kubernetes-sigs.github.io/metrics-server/", "metrics-server", "metrics-server"
)
"""The resource metrics API (``metrics.k8s.io``) the gateway's CPU HPA reads; EKS does not run one by itself."""

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


def cert_manager_values(gateway_api: bool = False) -> dict[str, Any]:
    """cert-manager with its CRDs; with ``gateway_api`` also its Gateway API support (a certificate per HTTPS
    listener of an annotated Gateway, HTTP-01 challenges answered through an HTTPRoute), which needs the Gateway
    API CRDs installed before it starts."""
    values: dict[str, Any] = {"crds": {"enabled": True, "keep": True}}
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


def envoy_gateway_values() -> dict[str, Any]:
    """The chart's defaults: the controller in its namespace; the proxies' shape is the stack's ``EnvoyProxy``."""
    return {}


def kube_prometheus_stack_values() -> dict[str, Any]:
    """Prometheus that picks up every ServiceMonitor/PodMonitor/PrometheusRule in the cluster, not only its own."""
    return {
        "fullnameOverride": PROMETHEUS_FULLNAME,
        "prometheus": {
            "prometheusSpec": {
                "serviceMonitorSelectorNilUsesHelmValues": False,
                "podMonitorSelectorNilUsesHelmValues": False,
                "ruleSelectorNilUsesHelmValues": False,
                "retention": "15d",
            }
        },
        "alertmanager": {"enabled": True},
    }


def prometheus_adapter_values() -> dict[str, Any]:
    """prometheus-adapter serving the custom metrics API from kube-prometheus-stack's Prometheus.

    Besides the chart's default rules, Triton's counters are exposed per pod as 1-minute rates
    (``nv_inference_queue_duration_us_rate`` ...) and its pending-request gauge as is, so an HPA can scale on them.
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
                # The queue:compute ratio the TritonService HPA scales on (recorded by its PrometheusRule).
                adapter_rule(),
                {
                    "seriesQuery": '{__name__="nv_inference_pending_request_count",namespace!="",pod!=""}',
                    "resources": per_pod,
                    "name": {"matches": "^(.*)$", "as": "${1}"},
                    "metricsQuery": "avg(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)",
                },
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


def keda_values() -> dict[str, Any]:
    return {"prometheus": {"operator": {"enabled": False}}}
