"""How long ``pulumi up`` of a synthesized plan may take at most: the longest chain of waits along its
dependencies.

Each resource may hold ``up`` for its ``customTimeouts.create`` (the cluster, node groups, charts, conversion Jobs),
for the Kubernetes provider's own await of a kind it waits for when neither
``customTimeouts`` nor ``pulumi.com/skipAwait`` says otherwise (:data:`PROVIDER_AWAIT_MINUTES`: a Deployment's
rollout, a Service's endpoints, 10 minutes each) or, for the rollout watch and the probe, its ``deadline_s`` (an
in-cluster judge: its Job's deadline and its own waits around it); a resource starts when everything it depends on is
done (depending on a component waits for all of its children). The bound is what a CI job running ``up`` must
allow: a runner killed before it leaves the stack locked (``docs/day2.md``: ``pulumi cancel``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any

_DURATION = re.compile(r"^(?:(?P<h>\d+)h)?(?:(?P<m>\d+)m)?(?:(?P<s>\d+)s)?$")


def minutes(duration: str) -> float:
    """A Pulumi custom timeout (``"40m"``, ``"1h30m"``, ``"90s"``) in minutes."""
    match = _DURATION.match(duration.strip())
    if not match or not duration.strip():
        raise ValueError(f"not a Pulumi duration: {duration!r}")
    return int(match["h"] or 0) * 60 + int(match["m"] or 0) + int(match["s"] or 0) / 60


JUDGE_JOB_OVERHEAD_S = 120 + 60
"""What an in-cluster judge (``components.probe.in_cluster``) waits beyond its Job's ``activeDeadlineSeconds``: up to
120 s for a previous run's Job to be deleted, and 60 s past the deadline for the Job's verdict."""


PROVIDER_AWAIT_MINUTES: dict[str, float] = {
    "kubernetes:apps/v1:Deployment": 10,
    "kubernetes:apps/v1:StatefulSet": 10,
    "kubernetes:batch/v1:Job": 10,
    "kubernetes:core/v1:Pod": 10,
    "kubernetes:core/v1:Service": 10,
    "kubernetes:networking.k8s.io/v1:Ingress": 10,
}
"""What the Kubernetes provider waits for a kind it awaits, by default (pulumi-kubernetes ``provider/pkg/await``:
``DefaultDeploymentTimeoutMins``, ``DefaultStatefulSetTimeoutMins``, ``DefaultJobTimeoutMins``,
``DefaultPodTimeoutMins``, ``DefaultServiceTimeoutMins``, ``DefaultIngressTimeoutMins``, all 10; each kind's API page:
"If the Deployment has not reached a Ready state after 10 minutes, it will time out"). A Service waits for endpoints
that target pods, unless it is headless or an ExternalName (``service.go`` ``shouldWaitForPods``)."""
SKIP_AWAIT = "pulumi.com/skipAwait"


def provider_await_minutes(resource: Mapping[str, Any]) -> float:
    """How long the Kubernetes provider awaits ``resource`` on its own: its kind's default, 0 for a kind it does
    not await, an object annotated ``pulumi.com/skipAwait: "true"``, or a Service that waits for no pod."""
    default = PROVIDER_AWAIT_MINUTES.get(str(resource.get("type", "")), 0.0)
    inputs = resource.get("inputs") or {}
    annotations = (inputs.get("metadata") or {}).get("annotations") or {}
    if not default or str(annotations.get(SKIP_AWAIT, "")).lower() == "true":
        return 0.0
    spec = inputs.get("spec") or {}
    if resource.get("type") == "kubernetes:core/v1:Service" and (
        spec.get("clusterIP") == "None" or spec.get("type") == "ExternalName"
    ):
        return 0.0
    return default


def wait_minutes(resource: Mapping[str, Any]) -> float:
    """The longest one resource can hold ``up`` on its own."""
    timeouts = (resource.get("options") or {}).get("customTimeouts") or {}
    if "create" in timeouts:
        return minutes(str(timeouts["create"]))
    if str(resource.get("type", "")).startswith("kubernetes:"):
        return provider_await_minutes(resource)
    if not str(resource.get("type", "")).startswith("pulumi-python:dynamic/"):
        return 0.0
    inputs = resource.get("inputs") or {}
    if inputs.get("deadline_s") is not None:
        return float(inputs["deadline_s"]) / 60
    job_deadline = ((inputs.get("job") or {}).get("spec") or {}).get("activeDeadlineSeconds")
    if job_deadline is not None:  # an in-cluster judge: its Job's deadline, and its own waits around it
        return (float(job_deadline) + JUDGE_JOB_OVERHEAD_S) / 60
    return 0.0


def up_budget_minutes(resources: Sequence[Mapping[str, Any]]) -> float:
    """The longest chain of waits through the plan's dependencies, in minutes."""
    by_urn = {str(r["urn"]): r for r in resources}
    children: dict[str, list[str]] = {}
    for r in resources:
        if r.get("parent"):
            children.setdefault(str(r["parent"]), []).append(str(r["urn"]))

    def descendants(urn: str) -> list[str]:
        found = [urn]
        for child in children.get(urn, []):
            found += descendants(child)
        return found

    def ancestors(urn: str) -> set[str]:
        found: set[str] = set()
        parent = by_urn[urn].get("parent")
        while parent and str(parent) in by_urn and str(parent) not in found:
            found.add(str(parent))
            parent = by_urn[str(parent)].get("parent")
        return found

    @cache
    def finish(urn: str) -> float:
        res = by_urn[urn]
        mine = ancestors(urn) | {urn}
        deps = {
            d
            for dep in (res.get("options") or {}).get("dependsOn") or ()
            if str(dep) in by_urn and str(dep) not in mine
            for d in descendants(str(dep))
        }
        deps -= mine
        return wait_minutes(res) + max((finish(d) for d in deps), default=0.0)

    return max((finish(u) for u in by_urn), default=0.0)
