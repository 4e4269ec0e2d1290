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

from components.common.triton import (
    RATIO_METRIC,
    RATIO_RECORD,
    WAITING_METRIC,
    WAITING_RECORD,
)
from components.common.workload import hpa_behavior
from tritonft.spec import ModelSpec


def milli(value: float) -> str:
    """A Kubernetes quantity in milli-units: 1.0 -> ``1000m``."""
    return f"{round(value * 1000)}m"


def hpa_spec(
    deployment: str, min_replicas: int, max_replicas: int, ratio_target: float, scale_down_window_seconds: int
) -> dict[str, Any]:
    """HPA on the per-pod queue/compute ratio, ``AverageValue`` target (1.0 = as long queued as computed)."""
    return signal_hpa_spec(
        queue_ratio_signal(ratio_target), deployment, min_replicas, max_replicas, scale_down_window_seconds
    )


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
    signal: ScalingSignal | None = None,
) -> dict[str, Any]:
    """KEDA ScaledObject: the same ratio (as a ``Value`` target) plus the request rate (:func:`demand_query`: the
    model's ingresses and the OpenAI gateway's requests for it).

    The request-rate trigger wakes a service scaled to zero (``activationThreshold`` 0: any request) and adds a
    replica per ``requests_per_replica``; the ratio trigger scales a running service like the HPA does.
    ``cooldownPeriod`` (idle time before going to zero) equals the scale-down window. ``signal`` replaces the
    ratio trigger (a vLLM model's: :func:`scaling_signal`).
    """
    signal = signal or queue_ratio_signal(ratio_target)
    triggers: list[dict[str, Any]] = [
        {
            "type": "prometheus",
            "metricType": "Value",
            "metadata": {
                "serverAddress": prometheus_url,
                "query": signal.keda_query(namespace, job),
                "threshold": f"{signal.target:g}",
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


# --- What a service scales on, keyed on its model --------------------------------------------------------------------


DEFAULT_TTFT_P95_TARGET_S = 1.0
"""A vLLM model's default time-to-first-token p95 target per pod, seconds (an interactive chat's budget)."""
DEFAULT_WAITING_TARGET = 2.0
"""A vLLM model's default requests waiting inside vLLM per pod: a queue that short is drained within a step or two
of a full batch, so time to first token stays near one prefill."""


@dataclass(frozen=True)
class ScalingSignal:
    """What a Triton service scales on: a per-pod series its PrometheusRule records (``record``), served to the HPA
    by prometheus-adapter as ``metric``, and the value one pod should average (``target``, in the series' unit)."""

    record: str
    metric: str
    target: float

    def keda_query(self, namespace: str, job: str) -> str:
        """The series averaged over the service's pods (KEDA's ``Value`` trigger divides it by the target)."""
        return f'avg({self.record}{{namespace="{namespace}",job="{job}"}})'

    def hpa_metric(self) -> dict[str, Any]:
        return {
            "type": "Pods",
            "pods": {
                "metric": {"name": self.metric},
                "target": {"type": "AverageValue", "averageValue": milli(self.target)},
            },
        }


def queue_ratio_signal(ratio_target: float) -> ScalingSignal:
    """Triton's queue/compute ratio (FasterTransformer and ONNX Runtime models: Triton queues their requests)."""
    return ScalingSignal(RATIO_RECORD, RATIO_METRIC, ratio_target)


def waiting_signal(waiting_target: float) -> ScalingSignal:
    """Each pod's requests waiting inside vLLM (``vllm:num_requests_waiting``) against ``waiting_target``: the queue
    itself, read at every scrape. Time to first token lags it (recorded only once a first token arrives), mistakes a
    long prompt for load and saturates at its top bucket, so it is the SLO's alert, not the scaling signal. The HPA
    adds replicas in proportion; an idle pod reads 0."""
    if waiting_target <= 0:
        raise ValueError(f"waiting_target must be positive (got {waiting_target})")
    return ScalingSignal(WAITING_RECORD, WAITING_METRIC, waiting_target)


def scaling_signal(spec: ModelSpec, *, ratio_target: float, waiting_target: float) -> ScalingSignal:
    """The signal the service serving ``spec`` scales on: the queue inside vLLM for a vLLM model
    (``spec.family.is_vllm``), else Triton's queue/compute ratio."""
    return waiting_signal(waiting_target) if spec.family.is_vllm else queue_ratio_signal(ratio_target)


def signal_hpa_spec(
    signal: ScalingSignal, deployment: str, min_replicas: int, max_replicas: int, scale_down_window_seconds: int
) -> dict[str, Any]:
    """:func:`hpa_spec` on any :class:`ScalingSignal`."""
    return {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": deployment},
        "minReplicas": min_replicas,
        "maxReplicas": max_replicas,
        "metrics": [signal.hpa_metric()],
        "behavior": hpa_behavior(scale_down_window_seconds),
    }
