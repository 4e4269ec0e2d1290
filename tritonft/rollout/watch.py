"""Wait for a Deployment to roll out, failing as soon as the API shows it cannot (see :mod:`.verdict`).

This is the wait ``pulumi up`` does for each Triton Deployment (``components.rollout_watch``): it ends when every
replica is updated and available, fails with the controller's message on ``ProgressDeadlineExceeded``, fails with
the scheduler's reason once a pod can never get its GPUs, with the model's backend's own words once a crash-looping
Triton's last log says a model could not load (vLLM's error for a vLLM model), and otherwise fails at ``deadline_s``
listing the pods.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from tritonft.kube import ApiError, Kube
from tritonft.rollout.verdict import (
    DEFAULT_GRACE_S,
    NodeGrowth,
    crash_looping,
    load_failure,
    progress_failure,
    rolled_out,
    stuck_for_gpus,
    unplaced,
)

DEFAULT_POLL_S = 5.0


class RolloutFailedError(Exception):
    """The rollout cannot finish (or did not within its deadline); the message says why."""


@dataclass(frozen=True)
class WatchConfig:
    namespace: str
    deployment: str
    growth: NodeGrowth
    deadline_s: float
    min_replicas: int = 0
    """Replicas the Deployment must reach (the autoscaler's minimum: it raises the count after the first apply)."""
    grace_s: float = DEFAULT_GRACE_S
    poll_s: float = DEFAULT_POLL_S


def selector_of(deployment: Mapping[str, Any]) -> str:
    labels = deployment["spec"]["selector"].get("matchLabels", {})
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def gpu_node_count(kube: Kube, deployment: Mapping[str, Any]) -> int:
    """Nodes the Deployment's pods may land on (its node selector) that have allocatable GPUs."""
    node_selector = deployment["spec"]["template"]["spec"].get("nodeSelector", {})
    selector = ",".join(f"{k}={v}" for k, v in sorted(node_selector.items()))
    nodes = kube.items("v1", "Node", selector=selector)
    return sum(1 for n in nodes if int(n.get("status", {}).get("allocatable", {}).get("nvidia.com/gpu", "0")) > 0)


def pod_summary(pods: list[Any]) -> str:
    parts = []
    for pod in pods:
        found = unplaced(pod)
        state = f"unschedulable: {found.message}" if found else pod.get("status", {}).get("phase", "?")
        parts.append(f"{pod['metadata']['name']} ({state})")
    return "; ".join(parts) or "no pods"


def cannot_load(kube: Kube, namespace: str, pods: list[Any]) -> str | None:
    """Why a crash-looping Triton pod ended, when its last run's log says a model could not load
    (:func:`tritonft.rollout.verdict.load_failure`); None otherwise (a crash for another reason is waited out)."""
    for pod, container in crash_looping(pods):
        try:
            log = kube.request(
                "GET",
                f"/api/v1/namespaces/{namespace}/pods/{pod}/log",
                params={"container": container, "previous": "true"},
            )
        except (ApiError, OSError):
            continue  # the previous run's log is gone (node replaced): keep waiting, the deadline still holds
        said = load_failure(log) if isinstance(log, str) else None
        if said:
            return f"pod {pod}: {said}"
    return None


def watch_rollout(kube: Kube, config: WatchConfig) -> dict[str, Any]:
    """Block until the Deployment has rolled out; returns its final status. Raises :class:`RolloutFailedError`."""
    ns, name = config.namespace, config.deployment
    deadline = time.monotonic() + config.deadline_s
    while True:
        deployment = kube.get("apps/v1", "Deployment", name, ns)
        if rolled_out(deployment, config.min_replicas):
            status: dict[str, Any] = deployment["status"]
            return status
        failed = progress_failure(deployment)
        if failed:
            raise RolloutFailedError(f"Deployment {ns}/{name} failed to roll out: {failed}")
        pods = kube.items("v1", "Pod", ns, selector_of(deployment))
        crashed = cannot_load(kube, ns, pods)
        if crashed:
            raise RolloutFailedError(f"Deployment {ns}/{name} cannot start: {crashed}")
        if any(unplaced(p) for p in pods):
            message = stuck_for_gpus(
                pods,
                kube.items("v1", "Pod", ns),
                kube.items("v1", "Event", ns),
                growth=config.growth,
                gpu_nodes=gpu_node_count(kube, deployment),
                now=datetime.now(UTC),
                grace_s=config.grace_s,
            )
            if message:
                raise RolloutFailedError(f"Deployment {ns}/{name} cannot roll out: {message}")
        if time.monotonic() > deadline:
            raise RolloutFailedError(
                f"Deployment {ns}/{name} did not roll out within {config.deadline_s:.0f} s: {pod_summary(pods)}"
            )
        time.sleep(config.poll_s)
