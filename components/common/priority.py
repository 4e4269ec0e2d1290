"""The stack's PriorityClasses: serving pods (Triton, the gateway) above the tools Jobs (download/convert/render),
both below every ``system-*`` class (pure decisions; :func:`priority_classes` creates the two objects).

Why: on full GPU nodes the scheduler places a pending pod by preempting lower-priority ones. Without classes every
pod has priority 0, so a Triton replica the autoscaler adds (or a rollout's new pod) waits behind a Job for as long
as the Job runs. With them, a serving pod preempts a batch pod when nothing else frees room, and a batch pod never
preempts anything (``preemptionPolicy: Never``): it waits for room, ahead of other priority-0 pods in the queue.
``system-cluster-critical`` (2000000000) and ``system-node-critical`` (2000001000) stay above both, and a
user-defined class may not exceed 1000000000 anyway.

PriorityClasses are cluster-scoped, so their names carry the stack's workload namespace (one stack per namespace:
two stacks on one cluster, such as review stacks, never share or fight over a class).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.common.layout import dns_label
from components.common.target import ClusterTarget, PriorityClassNames

SERVING_PRIORITY = 1_000_000
BATCH_PRIORITY = 1_000
USER_PRIORITY_MAX = 1_000_000_000
"""The API server refuses a user-defined class above this (``system-*`` classes live above it)."""
SYSTEM_CLUSTER_CRITICAL = 2_000_000_000

__all__ = ["PriorityClassNames", "priority_class_names", "priority_class_specs", "priority_classes"]


def priority_class_names(namespace: str) -> PriorityClassNames:
    """The two classes of the stack whose workloads live in ``namespace``."""
    return PriorityClassNames(serving=dns_label(f"{namespace}-serving"), batch=dns_label(f"{namespace}-batch"))


def priority_class_specs(names: PriorityClassNames) -> list[dict[str, Any]]:
    """The PriorityClass objects (name, value, preemption policy, description): serving preempts lower classes,
    batch never preempts."""
    return [
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": names.serving, "labels": {"app.kubernetes.io/part-of": "triton-ft"}},
            "value": SERVING_PRIORITY,
            "preemptionPolicy": "PreemptLowerPriority",
            "globalDefault": False,
            "description": "triton-ft serving pods (Triton, gateway): may preempt this stack's batch Jobs",
        },
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": names.batch, "labels": {"app.kubernetes.io/part-of": "triton-ft"}},
            "value": BATCH_PRIORITY,
            "preemptionPolicy": "Never",
            "globalDefault": False,
            "description": "triton-ft tools Jobs (download, convert, render): never preempt, yield to serving",
        },
    ]


def priority_classes(name: str, target: ClusterTarget, namespace: str) -> ClusterTarget:
    """Create the stack's two PriorityClasses on ``target``'s cluster and return the target the stages use: its
    ``priority`` names them, and its ``namespace`` output resolves only once both exist, so every pod of every stage
    (each placed in that namespace) is created after the classes it names (the API server refuses a pod whose
    class does not exist)."""
    names = priority_class_names(namespace)
    made = [
        k8s.scheduling.v1.PriorityClass(
            f"{name}-priority-{spec['metadata']['name'].rsplit('-', 1)[-1]}",
            metadata=spec["metadata"],
            value=spec["value"],
            preemption_policy=spec["preemptionPolicy"],
            global_default=spec["globalDefault"],
            description=spec["description"],
            opts=pulumi.ResourceOptions(provider=target.provider),
        )
        for spec in priority_class_specs(names)
    ]
    after = pulumi.Output.all(target.namespace, *(c.metadata for c in made)).apply(lambda values: str(values[0]))
    return dataclasses.replace(target, namespace=after, priority=names)
