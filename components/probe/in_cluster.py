"""``InClusterJudge``: a dynamic resource that judges a candidate version from inside the cluster during ``pulumi up``.

It runs the judge Job (``components.serving.judge_job``: ``tritonft judge``, the probe, against the candidate's own
Service) and reads its verdict as Kubernetes keeps it: the Job ``Complete`` (its pod exited 0: every check passed) or
``Failed`` (exit 1, a crash, or its deadline), the failed checks in its pod's termination message. A failed verdict
raises, which fails the ``up`` before the user-facing Services switch, with the checks and what the failed candidate
leaves (``failure_hint``).

A passed judge deletes its Job (the verdict is in its outputs). A failed judgement leaves the Job (and its pod's log,
the whole report) beside the candidate to look at; it is owned by the candidate's Deployment and goes with it (a
revert, a fix judged as a new version, ``destroy``). A re-run of the same version's judge replaces the previous Job.

Why a Job rather than the probe where ``pulumi up`` runs: no Triton of a generator, and no candidate, has a route at
the edge (``docs/security/reach.md``); the Job's pods are admitted by their label to their model's Triton on its HTTP
port, and to nothing else. Import-safe: Pulumi pickles the provider by reference, so this module must not move while
stacks use it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, ResourceProvider, UpdateResult

from components.probe import ProbeFailedError
from components.rollout_watch import _kube
from tritonft.probe.in_cluster import JUDGE_INPUTS

DEFAULT_POLL_S = 2.0
REPLACE_WAIT_S = 120.0
"""How long a judge waits for a previous run's Job of its name to be deleted before it creates its own."""
VERDICT_GRACE_S = 60.0
"""How long past its Job's ``activeDeadlineSeconds`` a judge waits for the Job's verdict (the controller's marking)."""


@dataclass(frozen=True)
class JudgeOutcome:
    """What the judge Job left: whether it completed (every check passed) and its pod's termination message."""

    passed: bool
    message: str


def owned_by(job: Mapping[str, Any], deployment: Mapping[str, Any]) -> dict[str, Any]:
    """``job`` owned by the candidate's Deployment: garbage-collected with it, and a foreground deletion of the
    Deployment (the Kubernetes provider's) ends only once the Job and its pod are gone."""
    meta = deployment["metadata"]
    owner = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": meta["name"],
        "uid": meta["uid"],
        "blockOwnerDeletion": True,
    }
    return {**job, "metadata": {**job["metadata"], "ownerReferences": [owner]}}


def job_outcome(kube: Any, namespace: str, name: str) -> JudgeOutcome | None:
    """The Job's verdict once it finished (None while it runs): ``Complete`` passed, ``Failed`` failed; the message
    is its pod's termination message (or the Job's own reason: a deadline, a pod that never started)."""
    from tritonft.kube import condition_true

    job = kube.get("batch/v1", "Job", name, namespace)
    if condition_true(job, "Complete"):
        return JudgeOutcome(True, _pod_message(kube, namespace, name))
    if condition_true(job, "Failed"):
        message = _pod_message(kube, namespace, name)
        if not message:
            failed = [c for c in job.get("status", {}).get("conditions", []) if c.get("type") == "Failed"]
            message = "; ".join(f"{c.get('reason')}: {c.get('message')}" for c in failed) or "the Job failed"
        return JudgeOutcome(False, message)
    return None


def _pod_message(kube: Any, namespace: str, job: str) -> str:
    for pod in kube.items("v1", "Pod", namespace, f"job-name={job}"):
        for status in pod.get("status", {}).get("containerStatuses") or []:
            terminated = (status.get("state") or {}).get("terminated") or {}
            if terminated.get("message"):
                return str(terminated["message"]).strip()
    return ""


def _outcome(kube: Any, namespace: str, name: str, deadline_s: float, poll_s: float) -> JudgeOutcome:
    """Wait for the Job's verdict (the network step: tests on a simulated cluster, whose pods run no container,
    give the candidate's answers here)."""
    deadline = time.monotonic() + deadline_s
    while True:
        found = job_outcome(kube, namespace, name)
        if found is not None:
            return found
        if time.monotonic() > deadline:
            return JudgeOutcome(False, f"the judge Job {namespace}/{name} gave no verdict within {deadline_s:.0f} s")
        time.sleep(poll_s)


def _replace_job(kube: Any, job: Mapping[str, Any], poll_s: float) -> None:
    """Delete a previous run's Job of the same name (its pods first), then create this one."""
    from tritonft.kube import ApiError, wait_for

    meta = job["metadata"]
    name, namespace = meta["name"], meta["namespace"]
    try:
        kube.request(
            "DELETE", kube.path("batch/v1", "Job", namespace, name), params={"propagationPolicy": "Foreground"}
        )
    except ApiError as exc:
        if exc.status != 404:
            raise

    def gone() -> bool:
        try:
            kube.get("batch/v1", "Job", name, namespace)
        except ApiError as exc:
            if exc.status == 404:
                return True
            raise
        return False

    wait_for(f"the previous judge Job {namespace}/{name} to be gone", gone, REPLACE_WAIT_S, poll_s)
    kube.apply(job)


def _delete_job(kube: Any, namespace: str, name: str) -> None:
    kube.request("DELETE", kube.path("batch/v1", "Job", namespace, name), params={"propagationPolicy": "Background"})


def judge(props: Mapping[str, Any]) -> dict[str, Any]:
    """Run the judge Job of ``props`` and return the outputs; raise :class:`ProbeFailedError` on a failed verdict."""
    kube = _kube(props.get("kubeconfig"), props.get("context"))
    namespace = str(props["namespace"])
    poll_s = float(props.get("poll_s", DEFAULT_POLL_S))
    job = {**props["job"], "metadata": {**props["job"]["metadata"], "namespace": namespace}}
    deployment = kube.get("apps/v1", "Deployment", str(props["candidate_deployment"]), namespace)
    name = str(job["metadata"]["name"])
    _replace_job(kube, owned_by(job, deployment), poll_s)
    outcome = _outcome(kube, namespace, name, float(job["spec"]["activeDeadlineSeconds"]) + VERDICT_GRACE_S, poll_s)
    if not outcome.passed:
        hint = f"\n{props['failure_hint']}" if props.get("failure_hint") else ""
        raise ProbeFailedError(
            f"judge of {props['candidate_service']} (Job {namespace}/{name}) failed:\n{outcome.message}{hint}"
        )
    _delete_job(kube, namespace, name)  # passed: the verdict is in the outputs (a failed Job stays, see above)
    public = {k: v for k, v in props.items() if k != "kubeconfig"}
    return {**public, "ok": True, "verdict": outcome.message}


class InClusterJudgeProvider(ResourceProvider):
    """create/update run the judge Job; delete leaves the Job to its owner (the candidate's Deployment)."""

    serialize_as_secret_always = False

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        changed = [k for k in JUDGE_INPUTS if olds.get(k) != news.get(k)]
        return DiffResult(changes=bool(changed), replaces=[], stables=[], delete_before_replace=False)

    def create(self, props: dict[str, Any]) -> CreateResult:
        return CreateResult(id_=f"{props['namespace']}/{props['job']['metadata']['name']}", outs=judge(props))

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(outs=judge(news))

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        """The Job is owned by the candidate's Deployment and is deleted with it."""


@dataclass(frozen=True)
class InClusterJudgeArgs:
    """The judge Job of one candidate and where it runs."""

    namespace: pulumi.Input[str]
    job: pulumi.Input[Mapping[str, Any]]
    """The Job's manifest (``components.serving.judge_job.judge_job_manifest``)."""
    candidate_service: str
    candidate_deployment: str
    """The candidate's Deployment: the Job's owner."""
    failure_hint: str | None = None
    """Said after the failed checks (what the failed candidate leaves, and how to look at it)."""
    rolled: pulumi.Input[int] | None = None
    """A version judged in place: the rollout it judges (its rollout watch's ``generation``), so that another roll
    of the same version (a revert to it) is judged again; None for a candidate (a new version is a new judge)."""
    kubeconfig: pulumi.Input[str] | None = None
    """Path or content, as given to the stack's Kubernetes provider (None: ``$KUBECONFIG``)."""
    context: str | None = None


class InClusterJudge(pulumi.dynamic.Resource, module="tritonft", name="InClusterJudge"):
    """Succeeds when the candidate passed its judge Job; fails ``pulumi up`` with the failed checks otherwise."""

    ok: pulumi.Output[bool]
    verdict: pulumi.Output[str]
    """The judge pod's termination message (``passed: <model> ok``)."""

    def __init__(self, name: str, args: InClusterJudgeArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        props: dict[str, Any] = {
            "namespace": args.namespace,
            "job": args.job,
            "candidate_service": args.candidate_service,
            "candidate_deployment": args.candidate_deployment,
            "context": args.context,
            "ok": None,
            "verdict": None,
            **({"failure_hint": args.failure_hint} if args.failure_hint else {}),
            **({"rolled": args.rolled} if args.rolled is not None else {}),
        }
        if args.kubeconfig is not None:
            props["kubeconfig"] = pulumi.Output.secret(args.kubeconfig)
            extra = pulumi.ResourceOptions(additional_secret_outputs=["kubeconfig"])
            opts = pulumi.ResourceOptions.merge(opts, extra) if opts else extra
        super().__init__(InClusterJudgeProvider(), name, props, opts)
