"""Autoscaling on Triton's queue-time / compute-time ratio: HPA ``autoscaling/v2`` or a KEDA ScaledObject (pure).

The signal is the ratio NVIDIA's autoscaling tutorial and DoEKS (PR #790) converged on, "hardware and model
independent": ``rate(queue_us) / clamp_min(rate(compute_infer_us), 1)``, summed over models *per pod* (the
ensemble left out: its compute time holds its steps' queue time; averaging per-model series under-reports by the
number of models, server#8979). Prometheus records it
(:mod:`components.monitoring`); prometheus-adapter exposes it to the HPA as a Pods metric
(:func:`adapter_rule`). The ``behavior`` is tuned for GPU pods whose cold start is minutes: scale up at once,
scale down one pod at a time after a window longer than a cold start (the DoEKS chart declares a behavior but
drops it; deploy-anchors.md §2.2.6).
"""

from __future__ import annotations

from typing import Any

RATIO_RECORD = "triton:queue_compute:ratio"
"""Recording rule name (the NVIDIA tutorial's)."""
RATIO_METRIC = "triton_queue_compute_ratio"
"""The same series as the custom-metrics API serves it to the HPA (no colons in API paths)."""


def milli(value: float) -> str:
    """A Kubernetes quantity in milli-units: 1.0 -> ``1000m``."""
    return f"{round(value * 1000)}m"


def hpa_behavior(scale_down_window_seconds: int, scale_down_period_seconds: int = 300) -> dict[str, Any]:
    """Fast up (no window; +100 % or +2 pods a minute, whichever is more), slow down (1 pod per
    ``scale_down_period_seconds`` after the window). Scale-down waits because a removed replica costs a full cold
    start to get back."""
    return {
        "scaleUp": {
            "stabilizationWindowSeconds": 0,
            "selectPolicy": "Max",
            "policies": [
                {"type": "Percent", "value": 100, "periodSeconds": 60},
                {"type": "Pods", "value": 2, "periodSeconds": 60},
            ],
        },
        "scaleDown": {
            "stabilizationWindowSeconds": scale_down_window_seconds,
            "selectPolicy": "Min",
            "policies": [{"type": "Pods", "value": 1, "periodSeconds": scale_down_period_seconds}],
        },
    }


def hpa_spec(
    deployment: str, min_replicas: int, max_replicas: int, ratio_target: float, scale_down_window_seconds: int
) -> dict[str, Any]:
    """HPA on the per-pod queue/compute ratio, ``AverageValue`` target (1.0 = as long queued as computed)."""
    return {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": deployment},
        "minReplicas": min_replicas,
        "maxReplicas": max_replicas,
        "metrics": [
            {
                "type": "Pods",
                "pods": {
                    "metric": {"name": RATIO_METRIC},
                    "target": {"type": "AverageValue", "averageValue": milli(ratio_target)},
                },
            }
        ],
        "behavior": hpa_behavior(scale_down_window_seconds),
    }


def adapter_rule() -> dict[str, Any]:
    """The prometheus-adapter ``rules.custom`` entry that serves :data:`RATIO_RECORD` as :data:`RATIO_METRIC`.

    It belongs in the adapter's Helm values (the adapter reads its own ConfigMap); the service exports it so the
    stack can pass it to the adapter chart.
    """
    return {
        "seriesQuery": f'{RATIO_RECORD}{{namespace!="",pod!=""}}',
        "resources": {"overrides": {"namespace": {"resource": "namespace"}, "pod": {"resource": "pod"}}},
        "name": {"matches": f"^{RATIO_RECORD}$", "as": RATIO_METRIC},
        "metricsQuery": "avg(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)",
    }


def ingress_request_rate_query(namespace: str, ingresses: tuple[str, ...]) -> str:
    """Requests/s arriving at the ingress for this service: the only demand signal that exists at zero replicas."""
    names = "|".join(ingresses)
    return f'sum(rate(nginx_ingress_controller_requests{{exported_namespace="{namespace}",ingress=~"{names}"}}[2m]))'


def ratio_query(namespace: str, job: str) -> str:
    """Average queue/compute ratio over the service's pods."""
    return f'avg({RATIO_RECORD}{{namespace="{namespace}",job="{job}"}})'


def scaled_object_spec(
    *,
    deployment: str,
    namespace: str,
    job: str,
    prometheus_url: str,
    ingresses: tuple[str, ...],
    min_replicas: int,
    max_replicas: int,
    ratio_target: float,
    requests_per_replica: float,
    scale_down_window_seconds: int,
) -> dict[str, Any]:
    """KEDA ScaledObject: the same ratio (as a ``Value`` target) plus the ingress request rate.

    The request-rate trigger wakes a service scaled to zero (``activationThreshold`` 0: any request) and adds a
    replica per ``requests_per_replica``; the ratio trigger scales a running service like the HPA does.
    ``cooldownPeriod`` (idle time before going to zero) equals the scale-down window.
    """
    triggers: list[dict[str, Any]] = [
        {
            "type": "prometheus",
            "metricType": "Value",
            "metadata": {
                "serverAddress": prometheus_url,
                "query": ratio_query(namespace, job),
                "threshold": f"{ratio_target:g}",
            },
        }
    ]
    if ingresses:
        triggers.append(
            {
                "type": "prometheus",
                "metricType": "AverageValue",
                "metadata": {
                    "serverAddress": prometheus_url,
                    "query": ingress_request_rate_query(namespace, ingresses),
                    "threshold": f"{requests_per_replica:g}",
                    "activationThreshold": "0",
                },
            }
        )
    return {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": deployment},
        "minReplicaCount": min_replicas,
        "maxReplicaCount": max_replicas,
        "pollingInterval": 15,
        "cooldownPeriod": scale_down_window_seconds,
        "advanced": {
            "horizontalPodAutoscalerConfig": {
                "name": f"{deployment}-keda",
                "behavior": hpa_behavior(scale_down_window_seconds),
            }
        },
        "triggers": triggers,
    }
