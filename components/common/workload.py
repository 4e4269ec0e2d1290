"""The workload shapes the Triton service and the gateway share (pure): probes, the Deployment's rolling update,
the PodDisruptionBudget, NetworkPolicy peers, the HPA's behaviour and the scrape interval of their monitors."""

from __future__ import annotations

from typing import Any

SCRAPE_INTERVAL = "15s"


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
    """At most one replica down for voluntary disruptions (node drains), without ever blocking a drain."""
    return {"maxUnavailable": 1, "selector": {"matchLabels": dict(selector_labels)}}


def namespace_peer(namespace: str) -> dict[str, Any]:
    """A NetworkPolicy peer: every pod of ``namespace``."""
    return {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}}


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
