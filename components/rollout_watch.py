"""``RolloutWatch``: a dynamic resource that waits for a Triton Deployment to roll out during ``pulumi up``.

The Deployment itself is applied without the Kubernetes provider's await (``pulumi.com/skipAwait``): that await
only gives up at its timeout (a whole startup budget, 15 min and more), even when the scheduler has said from the
first second that the pods will never get their GPUs. This resource waits instead with
:func:`tritonft.rollout.watch.watch_rollout`: done when every replica is updated and available; failed with the
scheduler's reason about a minute after a pod is found unschedulable for lack of GPUs when nothing can add a GPU
node (:func:`tritonft.rollout.verdict.stuck_for_gpus`); failed with the controller's message on
``ProgressDeadlineExceeded``; failed at the startup budget otherwise.

It re-runs whenever the Deployment spec the program applies changes (``spec_hash``, a digest of that spec). It
is not keyed on the live ``metadata.generation``: an autoscaler's scale bumps that too, so every ``refresh`` after
a scale would re-run every watch. Import-safe: Pulumi pickles the provider by reference, so this module must not
move while stacks use it.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, ResourceProvider, UpdateResult

from tritonft.rollout.verdict import COMPARED_INPUTS, DEFAULT_GRACE_S, NodeGrowth


def spec_hash(spec: Any) -> str:
    """The digest the watch is keyed on: the Deployment spec as the program applies it (canonical JSON)."""
    import hashlib
    import json

    return hashlib.sha256(json.dumps(spec, sort_keys=True, separators=(",", ":"), default=str).encode()).hexdigest()


def _kube(kubeconfig: str | None, context: str | None) -> Any:
    """A client from a kubeconfig path or content (what the stack's Kubernetes provider was given)."""
    from tritonft.kube import from_kubeconfig

    if kubeconfig and "\n" not in kubeconfig and not kubeconfig.lstrip().startswith("{"):
        return from_kubeconfig(kubeconfig, context)
    if not kubeconfig:
        return from_kubeconfig(None, context)
    with tempfile.TemporaryDirectory(prefix="tritonft-kubeconfig-") as tmp:
        path = os.path.join(tmp, "config")
        with open(path, "w", encoding="utf-8") as f:
            f.write(kubeconfig)
        return from_kubeconfig(path, context)


def wait(props: dict[str, Any]) -> dict[str, Any]:
    """The wait itself (what create and update run): the Deployment's final status counts, and what each pod's
    GEMM tuning step reported (``tuned``, ``cached`` or ``fallback`` to FT's defaults, by pod).

    ``poll_s`` (seconds between two reads of the Deployment) is not an input of :class:`RolloutWatch`: the program
    keeps the watch's default; tests on a simulated cluster, where a rollout takes a fraction of a second, pass a
    shorter one (the decisions are the same)."""
    from tritonft.engines.fastertransformer.gemm import tuning_summary
    from tritonft.rollout.watch import DEFAULT_POLL_S, WatchConfig, selector_of, watch_rollout

    config = WatchConfig(
        namespace=str(props["namespace"]),
        deployment=str(props["deployment"]),
        growth=NodeGrowth(bool(props["autoscaler"]), int(props["nodes_max"])),
        deadline_s=float(props["deadline_s"]),
        min_replicas=int(props.get("min_replicas") or 0),
        grace_s=float(props.get("grace_s", DEFAULT_GRACE_S)),
        poll_s=float(props.get("poll_s", DEFAULT_POLL_S)),
    )
    kube = _kube(props.get("kubeconfig"), props.get("context"))
    status = watch_rollout(kube, config)
    deployment = kube.get("apps/v1", "Deployment", config.deployment, config.namespace)
    pods = kube.items("v1", "Pod", config.namespace, selector_of(deployment))
    outs = {k: v for k, v in props.items() if k != "kubeconfig"}
    return {
        **outs,
        "ready_replicas": int(status.get("readyReplicas", 0)),
        "generation": int(deployment["metadata"].get("generation", 0)),
        "gemm_tuning": tuning_summary(pods),
        "startup": startup_report(kube, config.namespace, config.deployment),
    }


def startup_report(kube: Any, namespace: str, deployment: str) -> dict[str, dict[str, Any]]:
    """Each ready pod's start-up budget (:mod:`tritonft.rollout.startup`: seconds per stage, Triton's model loads),
    by pod."""
    from tritonft.errors import UserError
    from tritonft.kube import ApiError
    from tritonft.rollout.command import deployment_startups

    try:
        return {s.pod: s.as_output() for s in deployment_startups(kube, namespace, deployment)}
    except (ApiError, OSError, UserError):  # a report, never a reason to fail a rollout that succeeded
        return {}


class RolloutWatchProvider(ResourceProvider):
    """create/update wait for the rollout; nothing exists remotely, so delete is a no-op."""

    serialize_as_secret_always = False

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        changed = [k for k in COMPARED_INPUTS if olds.get(k) != news.get(k)]
        return DiffResult(changes=bool(changed), replaces=[], stables=[], delete_before_replace=False)

    def create(self, props: dict[str, Any]) -> CreateResult:
        return CreateResult(id_=f"{props['namespace']}/{props['deployment']}", outs=wait(props))

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(outs=wait(news))

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        """Waiting leaves nothing behind."""


@dataclass(frozen=True)
class RolloutWatchArgs:
    """Which Deployment to wait for, with what credentials, and what can add GPU nodes."""

    namespace: pulumi.Input[str]
    deployment: pulumi.Input[str]
    spec_hash: pulumi.Input[str]
    """A digest of the Deployment spec the program applies (:func:`spec_hash`): a new value re-runs the wait."""
    deadline_s: float
    """The startup budget plus a node scale-up: the longest a healthy rollout takes."""
    growth: NodeGrowth
    min_replicas: int = 0
    """The autoscaler's minimum (or the fixed count): the wait ends only once the Deployment has that many."""
    kubeconfig: pulumi.Input[str] | None = None
    """Path or content, as given to the stack's Kubernetes provider (None: ``$KUBECONFIG``)."""
    context: str | None = None
    grace_s: float = DEFAULT_GRACE_S


class RolloutWatch(pulumi.dynamic.Resource, module="tritonft", name="RolloutWatch"):
    """Succeeds when the Deployment has rolled out; fails ``pulumi up`` with the reason when it cannot."""

    ready_replicas: pulumi.Output[int]
    """Replicas ready when the rollout finished."""
    generation: pulumi.Output[int]
    """The Deployment's ``metadata.generation`` when the rollout finished: a new value each time the watch saw a new
    rollout (a new version, a revert to an older one), which re-runs the judge of a version that rolled in place."""
    gemm_tuning: pulumi.Output[dict[str, str]]
    """Pod -> what its GEMM tuning step did (``tuned: ...``, ``cached: ...``, ``fallback: ...``)."""
    startup: pulumi.Output[dict[str, dict[str, Any]]]
    """Pod -> its start-up budget: seconds per stage (scheduled, init, started, ready, total), the details the API
    gives (node_provisioned, image_pull, gemm_tuning) and Triton's own load time per model."""

    def __init__(self, name: str, args: RolloutWatchArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        props: dict[str, Any] = {
            "namespace": args.namespace,
            "deployment": args.deployment,
            "spec_hash": args.spec_hash,
            "min_replicas": args.min_replicas,
            "autoscaler": args.growth.autoscaler,
            "nodes_max": args.growth.nodes_max,
            "deadline_s": args.deadline_s,
            "grace_s": args.grace_s,
            "context": args.context,
            "ready_replicas": None,
            "generation": None,
            "gemm_tuning": None,
            "startup": None,
        }
        if args.kubeconfig is not None:
            props["kubeconfig"] = pulumi.Output.secret(args.kubeconfig)
            extra = pulumi.ResourceOptions(additional_secret_outputs=["kubeconfig"])
            opts = pulumi.ResourceOptions.merge(opts, extra) if opts else extra
        super().__init__(RolloutWatchProvider(), name, props, opts)
