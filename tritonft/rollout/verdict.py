"""Whether a Deployment's rollout can still finish, decided from what the API reports (plain API dicts, no calls).

The scheduler marks a pod it cannot place ``PodScheduled=False, reason=Unschedulable`` with its reason
(``0/5 nodes are available: 5 Insufficient nvidia.com/gpu. ...``). When the reason is a lack of GPUs, no GPUs are
being freed by a terminating pod, and nothing can add a GPU node, waiting cannot help: the rollout has failed now,
not at the end of the startup budget. A node autoscaler can add a node while the GPU node count is below its
maximum, unless it said it will not (cluster-autoscaler's ``NotTriggerScaleUp`` event on the pod). Whatever the
stack knows of the cluster, a pod is waited for once something said a node is coming for it: cluster-autoscaler's
``TriggeredScaleUp``, Karpenter's (and EKS Auto Mode's) ``Nominated`` (``Pod should schedule on:
nodeclaim/...``), or the scheduler's own nomination after preempting lower-priority pods
(``status.nominatedNodeName``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

GPU_RESOURCE = "nvidia.com/gpu"
GPU_SHORTAGE = f"Insufficient {GPU_RESOURCE}"
"""The scheduler's words for a node without enough free GPUs."""
SCALE_UP_REFUSED = "NotTriggerScaleUp"
SCALE_UP_TRIGGERED = "TriggeredScaleUp"
"""cluster-autoscaler's events on a pending pod: it will not / it did ask for a new node."""
NODE_NOMINATED = "Nominated"
"""Karpenter's event on a pending pod it launches (or found) a node for: ``Pod should schedule on: nodeclaim/x``."""
DEFAULT_GRACE_S = 60.0
"""How long a pod may wait for GPUs before the rollout is called failed: the scheduler retries on every pod and
node change, so a pod still unplaced after this with nothing freeing GPUs will stay so."""


@dataclass(frozen=True)
class NodeGrowth:
    """What can add GPU nodes: a node autoscaler up to ``nodes_max`` (``autoscaler`` False: nothing)."""

    autoscaler: bool
    nodes_max: int = 0

    def can_add(self, gpu_nodes: int) -> bool:
        return self.autoscaler and gpu_nodes < self.nodes_max

    def describe(self, gpu_nodes: int) -> str:
        if not self.autoscaler:
            return f"no node autoscaler manages the GPU nodes ({gpu_nodes} present)"
        return f"the node autoscaler is at its maximum ({gpu_nodes} of gpuNodesMax {self.nodes_max} GPU nodes)"


@dataclass(frozen=True)
class Unplaced:
    """A pod the scheduler could not place: since when and why."""

    pod: str
    since: datetime | None
    message: str


def _name(obj: Mapping[str, Any]) -> str:
    return str(obj["metadata"]["name"])


def gpus_requested(pod: Mapping[str, Any]) -> int:
    containers = pod.get("spec", {}).get("containers", [])
    return sum(int(c.get("resources", {}).get("requests", {}).get(GPU_RESOURCE, "0")) for c in containers)


def unplaced(pod: Mapping[str, Any]) -> Unplaced | None:
    """The pod's ``PodScheduled=False, reason=Unschedulable`` condition, if it has one."""
    if pod["metadata"].get("deletionTimestamp"):
        return None
    for c in pod.get("status", {}).get("conditions", []):
        if c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason") == "Unschedulable":
            since = c.get("lastTransitionTime")
            return Unplaced(_name(pod), _timestamp(since) if since else None, str(c.get("message", "")))
    return None


def _timestamp(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def _pod_events(events: Iterable[Mapping[str, Any]], pod: str) -> list[Mapping[str, Any]]:
    return [
        e for e in events if e.get("involvedObject", {}).get("kind") == "Pod" and e["involvedObject"]["name"] == pod
    ]


def stuck_for_gpus(
    pods: Sequence[Mapping[str, Any]],
    namespace_pods: Sequence[Mapping[str, Any]],
    events: Sequence[Mapping[str, Any]],
    *,
    growth: NodeGrowth,
    gpu_nodes: int,
    now: datetime,
    grace_s: float = DEFAULT_GRACE_S,
) -> str | None:
    """The failure message when one of ``pods`` (the Deployment's) can never get its GPUs; None = keep waiting.

    ``namespace_pods`` are checked for terminating GPU pods (a replace-one-at-a-time rollout frees GPUs for its
    next pod that way); ``events`` are the namespace's events (the node autoscaler's verdicts on the pods).
    """
    if any(p["metadata"].get("deletionTimestamp") and gpus_requested(p) for p in namespace_pods):
        return None  # GPUs are being freed: the scheduler retries when the pod is gone
    for pod in pods:
        found = unplaced(pod)
        if found is None or GPU_SHORTAGE not in found.message:
            continue
        if found.since is not None and (now - found.since).total_seconds() < grace_s:
            continue
        reasons = {str(e.get("reason")): str(e.get("message", "")) for e in _pod_events(events, found.pod)}
        if SCALE_UP_TRIGGERED in reasons or NODE_NOMINATED in reasons:
            continue  # a node is on its way
        if pod.get("status", {}).get("nominatedNodeName"):
            continue  # the scheduler preempted pods to free a node for it
        if growth.can_add(gpu_nodes) and SCALE_UP_REFUSED not in reasons:
            continue
        why = growth.describe(gpu_nodes)
        if SCALE_UP_REFUSED in reasons:
            why += f"; cluster-autoscaler: {reasons[SCALE_UP_REFUSED]}"
        said = found.message.strip().rstrip(".")
        return (
            f"Triton pod {found.pod} ({gpus_requested(pod)} GPU(s)) cannot be scheduled and nothing can add a GPU "
            f"node ({why}). The scheduler says: {said}. Free GPUs, add GPU nodes (gpuNodesMin/gpuNodesMax) or lower "
            "replicasMin/tensorParallel"
        )
    return None


def rolled_out(deployment: Mapping[str, Any], min_replicas: int = 0) -> bool:
    """The Deployment's controller has seen its spec and every wanted replica is updated and available; and it
    wants at least ``min_replicas`` (an autoscaled Deployment starts at 1 until its autoscaler raises it)."""
    spec, status = deployment.get("spec", {}), deployment.get("status", {})
    want = spec.get("replicas", 1)
    return bool(
        want >= min_replicas
        and status.get("observedGeneration", 0) >= deployment["metadata"].get("generation", 0)
        and status.get("updatedReplicas", 0) == want
        and status.get("availableReplicas", 0) == want
        and status.get("replicas", 0) == want
    )


def progress_failure(deployment: Mapping[str, Any]) -> str | None:
    """The controller's own verdict: ``Progressing=False`` (``ProgressDeadlineExceeded``) with its message."""
    for c in deployment.get("status", {}).get("conditions", []):
        if c.get("type") == "Progressing" and c.get("status") == "False":
            return f"{c.get('reason', 'Progressing=False')}: {c.get('message', '')}".strip()
    return None


# The rollout watch resource's diff (components/rollout_watch.py) compares these inputs; `tritonft diff` reads them.
COMPARED_INPUTS = (
    "namespace",
    "deployment",
    "spec_hash",
    "min_replicas",
    "autoscaler",
    "nodes_max",
    "deadline_s",
    "grace_s",
)

# The promotion gate's diff (components/serving/promotion_gate.py) compares these inputs; `tritonft diff` reads them.
PROMOTION_GATE_INPUTS = ("namespace", "version", "candidate_deployment", "canary", "routes", "max_replicas")
"""Inputs whose change re-runs the wait (the kubeconfig is not one: new credentials are not a rollout)."""
PROMOTION_HANDOVER_INPUTS = ("namespace", "version", "candidate_deployment")
"""Inputs whose change re-runs a promotion's handover (``components.serving.promotion_gate.PromotionHandover``)."""


CRASH_LOOP = "CrashLoopBackOff"
_LOAD_FAILED = re.compile(r"failed to load '([^']+)' version (\d+): (.*)")
TRACEBACK = "\\n\\nAt:"
"""Where a Python backend's error ends in Triton's log line and its traceback begins (newlines escaped)."""


def crash_looping(pods: Iterable[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """(pod, container) of every container in ``CrashLoopBackOff``: it started, ended and will be started again."""
    return [
        (_name(pod), str(c.get("name")))
        for pod in pods
        for c in pod.get("status", {}).get("containerStatuses") or []
        if ((c.get("state") or {}).get("waiting") or {}).get("reason") == CRASH_LOOP
    ]


def load_failure(log: str) -> str | None:
    """Triton's first ``failed to load '<model>' version <n>: <error>`` in a server's log, the error as the model's
    backend said it (vLLM's own words for a vLLM model; a Python backend's traceback cut off); None when the log has
    none. A Triton that ended because a model cannot load never starts by itself: the same files load the same way."""
    for line in log.splitlines():
        found = _LOAD_FAILED.search(line)
        if found:
            model, version, error = found.groups()
            said = error.split(TRACEBACK)[0].strip().rstrip('"').strip()
            return f"model '{model}' version {version} failed to load: {said}"
    return None
