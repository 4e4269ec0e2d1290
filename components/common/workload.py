"""The workload shapes the Triton service and the gateway share (pure): probes, the Deployment's rolling update,
the PodDisruptionBudget, NetworkPolicy peers, the HPA's behaviour and the scrape interval of their monitors."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

SCRAPE_INTERVAL = "15s"

SERVICE_DNS_TTL_S = 5
"""CoreDNS' ``kubernetes`` plugin's default record TTL: how long a resolver may still answer a removed pod."""
ENDPOINTS_LAG_S = 5
"""From a pod's deletion to its removal reaching CoreDNS and the edge's proxies (EndpointSlice controller, watches,
an Envoy/ingress controller's config push): seconds on a healthy control plane; 5 s of margin."""


@dataclass(frozen=True)
class Drain:
    """How a pod leaves without failing a request (:func:`drain`)."""

    pre_stop_seconds: int
    """The ``preStop`` hook's sleep: the pod keeps serving, off every client's list, until its last request ends."""
    termination_grace_seconds: int
    """``terminationGracePeriodSeconds``: the hook, then the process' own exit after SIGTERM."""

    def lifecycle(self) -> dict[str, Any]:
        """The container's ``lifecycle``: ``preStop`` runs ``sleep`` (the images' coreutils; an exec hook works on
        every Kubernetes version, the ``sleep`` action needs 1.30)."""
        return {"preStop": {"exec": {"command": ["sleep", str(self.pre_stop_seconds)]}}}


def _check_drain(propagation_s: float, longest_request_s: float, exit_s: float) -> None:
    if propagation_s < 0 or longest_request_s <= 0 or exit_s < 0:
        raise ValueError(
            f"drain: propagation ({propagation_s}) and exit ({exit_s}) must be >= 0, the longest request "
            f"({longest_request_s}) > 0 seconds"
        )


def drain(propagation_s: float, longest_request_s: float, exit_s: float = 0) -> Drain:
    """The drain of a pod whose removal from its Service reaches every client within ``propagation_s`` and whose
    longest request lasts ``longest_request_s``; the process needs ``exit_s`` after SIGTERM.

    Kubernetes removes a deleted pod from the endpoints and runs its ``preStop`` hook at the same time; SIGTERM comes
    after the hook. So the hook sleeps until no client can still pick the pod (``propagation_s``) and the last
    request it picked has ended (``longest_request_s``): SIGTERM then finds the server idle. Whole seconds, rounded
    up; the grace period adds ``exit_s`` and 5 s of slack (the kubelet kills the container at its end).
    """
    _check_drain(propagation_s, longest_request_s, exit_s)
    pre_stop = math.ceil(propagation_s + longest_request_s)
    return Drain(pre_stop, pre_stop + math.ceil(exit_s) + 5)


def drain_in_process(propagation_s: float, longest_request_s: float, exit_s: float = 0) -> Drain:
    """The drain of a pod whose server finishes its requests itself after SIGTERM (it stops accepting, lets every
    request under way end, then exits): the ``preStop`` hook sleeps only until no client can still pick the pod
    (``propagation_s``), and the grace period covers that, the longest request (``longest_request_s``) and the exit
    (``exit_s``) with 5 s of slack. A pod with nothing under way leaves right after the hook, not after the longest
    request a client could have sent."""
    _check_drain(propagation_s, longest_request_s, exit_s)
    return Drain(math.ceil(propagation_s), math.ceil(propagation_s + longest_request_s) + math.ceil(exit_s) + 5)


def http_probe(path: str, period: int, failures: int, timeout: int = 5) -> dict[str, Any]:
    """An HTTP GET probe on the container port named ``http``."""
    return {
        "httpGet": {"path": path, "port": "http"},
        "periodSeconds": period,
        "failureThreshold": failures,
        "timeoutSeconds": timeout,
    }


def deployment_spec(
    selector_labels: dict[str, str],
    pod_labels: dict[str, str],
    pod_spec: dict[str, Any],
    progress_deadline_seconds: int,
    replicas: int | None,
    *,
    strategy: dict[str, Any],
) -> dict[str, Any]:
    """A rolling update with ``strategy`` (:func:`components.settings.capacity.rollout_for` decides surge or replace).

    ``replicas`` is None when an autoscaler owns the replica count, so a ``pulumi up`` never resets it.
    """
    spec: dict[str, Any] = {
        "selector": {"matchLabels": dict(selector_labels)},
        "progressDeadlineSeconds": progress_deadline_seconds,
        "revisionHistoryLimit": 3,
        "strategy": strategy,
        "template": {"metadata": {"labels": dict(pod_labels)}, "spec": pod_spec},
    }
    if replicas is not None:
        spec["replicas"] = replicas
    return spec


def pdb_spec(selector_labels: dict[str, str]) -> dict[str, Any]:
    """At most one replica down for voluntary disruptions (node drains), without ever blocking a drain.

    ``unhealthyPodEvictionPolicy: AlwaysAllow``: a pod that is not ready (crash-looping, or still loading its model)
    serves nothing, so evicting it costs nothing; under the default (``IfHealthyBudget``) such pods count against
    the budget and a node drain can hang on a broken replica."""
    return {
        "maxUnavailable": 1,
        "selector": {"matchLabels": dict(selector_labels)},
        "unhealthyPodEvictionPolicy": "AlwaysAllow",
    }


def namespace_peer(namespace: str) -> dict[str, Any]:
    """A NetworkPolicy peer: every pod of ``namespace``."""
    return {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}}


PROMETHEUS_PODS = {"app.kubernetes.io/name": "prometheus"}
"""Labels of Prometheus's own pods (the prometheus-operator sets them on every Prometheus it runs): not Grafana,
Alertmanager or anything else of the monitoring namespace."""
ENVOY_PROXY_PODS = {"app.kubernetes.io/component": "proxy", "app.kubernetes.io/managed-by": "envoy-gateway"}
"""Labels Envoy Gateway sets on the Envoy proxies of every Gateway it runs (not on its controller)."""
INGRESS_NGINX_PODS = {"app.kubernetes.io/name": "ingress-nginx", "app.kubernetes.io/component": "controller"}
"""Labels of ingress-nginx's controller pods (its chart's)."""


def pods_peer(namespace: str, pod_labels: dict[str, str]) -> dict[str, Any]:
    """A NetworkPolicy peer: the pods of ``namespace`` that carry ``pod_labels`` (never a whole namespace)."""
    return {**namespace_peer(namespace), "podSelector": {"matchLabels": dict(pod_labels)}}


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
