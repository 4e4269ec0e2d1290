"""Autoscaling on Triton's queue-time / compute-time ratio: HPA ``autoscaling/v2`` or a KEDA ScaledObject (pure).

The signal is the ratio NVIDIA's autoscaling tutorial and DoEKS (PR #790) converged on, "hardware and model
independent": ``rate(queue_us) / clamp_min(rate(compute_infer_us), 1)``, summed over models *per pod* (the
ensemble left out: its compute time holds its steps' queue time; averaging per-model series under-reports by the
number of models, server#8979). Prometheus records it
(:mod:`components.serving.monitoring`); prometheus-adapter exposes it to the HPA as a Pods metric
(:func:`adapter_rule`). The ``behavior`` is tuned for GPU pods whose cold start is minutes: scale up at once,
scale down one pod at a time after a window longer than a cold start (the DoEKS chart declares a behavior but
drops it; deploy-anchors.md §2.2.6).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from components.common.triton import RATIO_METRIC, RATIO_RECORD
from components.common.workload import hpa_behavior


def milli(value: float) -> str:
    """A Kubernetes quantity in milli-units: 1.0 -> ``1000m``."""
    return f"{round(value * 1000)}m"


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


GATEWAY_DEMAND = "tritonft_gateway_model_requests_total"
"""The OpenAI gateway's requests per served model (``tritonft.gateway.metrics``; every model's series from 0)."""


@dataclass(frozen=True)
class GatewayDemand:
    """Where the stack's OpenAI gateway counts the requests for one model: its Prometheus job (the gateway's
    Service name) and the model's name in the API (its spec name)."""

    job: str
    model: str


RATE_WINDOW_S = 120
"""Window of the request-rate queries (``[120s]``): long enough for a few 15 s scrapes of a trickle of requests."""


def _rate(series: str) -> str:
    return f"(sum(rate({series}[{RATE_WINDOW_S}s])) or vector(0))"


def _born_in_window(series: str) -> str:
    """Requests counted by series that appeared within the window, spread over it. ``rate()`` sees only increments
    between samples, and nginx creates a series (per status, method, path) with the request that it counts, at 1:
    the first request for a sleeping model (its first 503) is such a series, invisible to ``rate()``."""
    window = f"{RATE_WINDOW_S}s"
    return f"(sum(min_over_time({series}[{window}]) unless {series} offset {window}) / {RATE_WINDOW_S} or vector(0))"


def ingress_request_rate_query(namespace: str, ingresses: tuple[str, ...]) -> str:
    """Requests/s arriving at the ingress for this service, counting the first request of a new series."""
    names = "|".join(ingresses)
    series = f'nginx_ingress_controller_requests{{exported_namespace="{namespace}",ingress=~"{names}"}}'
    return f"{_rate(series)} + {_born_in_window(series)}"


def gateway_request_rate_query(namespace: str, gateway: GatewayDemand) -> str:
    """Requests/s the OpenAI gateway receives for this model, whatever it answered (while the model has no replica
    the gateway answers 503, and those requests are the demand that must wake it). The gateway exposes every
    served model's series from 0, so ``rate()`` alone sees the first request."""
    return _rate(f'{GATEWAY_DEMAND}{{namespace="{namespace}",job="{gateway.job}",model="{gateway.model}"}}')


def demand_query(namespace: str, ingresses: tuple[str, ...], gateway: GatewayDemand | None) -> str | None:
    """Requests/s for this model from every way in (its ingresses, the gateway): the only demand signal that exists
    at zero replicas. None when it has no way in. Every part is a number even before its series exist."""
    parts = ([ingress_request_rate_query(namespace, ingresses)] if ingresses else []) + (
        [gateway_request_rate_query(namespace, gateway)] if gateway is not None else []
    )
    return " + ".join(parts) if parts else None


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
    gateway: GatewayDemand | None = None,
    min_replicas: int,
    max_replicas: int,
    ratio_target: float,
    requests_per_replica: float,
    scale_down_window_seconds: int,
) -> dict[str, Any]:
    """KEDA ScaledObject: the same ratio (as a ``Value`` target) plus the request rate (:func:`demand_query`: the
    model's ingresses and the OpenAI gateway's requests for it).

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
    demand = demand_query(namespace, ingresses, gateway)
    if demand is not None:
        triggers.append(
            {
                "type": "prometheus",
                "metricType": "AverageValue",
                "metadata": {
                    "serverAddress": prometheus_url,
                    "query": demand,
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
