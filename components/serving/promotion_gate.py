"""``PromotionGate``: the dynamic resource between a candidate's judgement and the switch of the user-facing Services.

Created once per serving version (its Pulumi name carries the version), after the probe judged the candidate and
before the Services select it (they depend on the gate). Its create:

1. finds the stable version: the pods the user-facing Service selects now (none: a first deploy, or a re-run after
   the switch: nothing to do);
2. scales the candidate's Deployment to :func:`components.serving.canary.replicas_before_switch` (the stable's
   ready pods, bounded by ``replicasMax``) and waits until that many are ready, or fails ``up`` with a timeout that
   names both counts (the stable keeps serving);
3. with ``canary`` on, runs the weighted phase: the model's routes get the :attr:`Phase.CANARY` weights, the phase
   lasts its duration, Prometheus gives each version's figures, the routes go back to the :attr:`Phase.STABLE`
   backends whatever happens (also on an error or an interruption the provider sees), then the verdict either
   lets the switch follow or fails ``up`` with :func:`components.serving.canary.failure_message`.

The routes carry ``pulumi.com/patchForce`` and the version (``components.serving.service``): when a later ``up``
changes the version (a fix, a revert), the program's apply of the routes wins over what the gate wrote, even after an
``up`` killed mid-phase. Nothing remote belongs to the gate: delete is a no-op.

Import-safe (classes and functions only). Pulumi pickles the provider by reference
(``components.serving.promotion_gate.PromotionGateProvider``): never rename or move this module while stacks use it.
"""

from __future__ import annotations

import dataclasses
import json
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, ResourceProvider, UpdateResult

from components.common.triton import GRPC_PORT, HTTP_PORT
from components.serving.canary import (
    Phase,
    VersionSample,
    canary_verdict,
    failure_message,
    replicas_before_switch,
    route_backends,
    sample_from,
    sample_queries,
)
from components.serving.promotion import VERSION_LABEL
from components.settings.model import CanarySettings
from tritonft.rollout.verdict import PROMOTION_GATE_INPUTS

PROMETHEUS_PROXY = "/api/v1/namespaces/monitoring/services/kube-prometheus-stack-prometheus:9090/proxy"
"""kube-prometheus-stack's Prometheus through the Kubernetes API's service proxy (no exposure needed)."""
ROUTE_PORTS = {"HTTPRoute": HTTP_PORT, "GRPCRoute": GRPC_PORT}
GATEWAY_API = "gateway.networking.k8s.io/v1"
POLL_S = 2.0

Query = Callable[[str], float | None]
"""A PromQL instant query -> the single value of its answer (None when the vector is empty)."""


class PromotionGateError(Exception):
    """The candidate may not take the traffic: too few ready replicas in time, or a failed weighted phase."""


# -- Prometheus -----------------------------------------------------------------------------------------------------


def _single_value(answer: Mapping[str, Any], expr: str) -> float | None:
    if answer.get("status") != "success":
        raise PromotionGateError(f"Prometheus refused {expr!r}: {answer.get('error', answer)}")
    result = answer["data"]["result"]
    if not result:
        return None
    if len(result) > 1:
        raise PromotionGateError(f"{expr!r} gave {len(result)} series, expected one")
    return float(result[0]["value"][1])


def prometheus_query(url: str, at: float | None = None, timeout_s: float = 30) -> Query:
    """Instant queries against Prometheus' HTTP API at ``url`` (evaluated at ``at``, default now)."""

    def query(expr: str) -> float | None:
        params = {"query": expr, **({"time": f"{at:.3f}"} if at is not None else {})}
        with urllib.request.urlopen(
            f"{url.rstrip('/')}/api/v1/query?{urllib.parse.urlencode(params)}", timeout=timeout_s
        ) as r:
            return _single_value(json.loads(r.read()), expr)

    return query


def proxied_query(kube: Any) -> Query:
    """Instant queries to kube-prometheus-stack's Prometheus through the API server (:data:`PROMETHEUS_PROXY`)."""

    def query(expr: str) -> float | None:
        answer = kube.request("GET", f"{PROMETHEUS_PROXY}/api/v1/query", params={"query": expr})
        return _single_value(answer if isinstance(answer, dict) else json.loads(answer), expr)

    return query


def measure(query: Query, namespace: str, job: str, model: str, window_s: int) -> VersionSample:
    """One version's figures over the last ``window_s`` seconds (:func:`components.serving.canary.sample_queries`)."""
    return sample_from({k: query(expr) for k, expr in sample_queries(namespace, job, model, window_s).items()})


# -- Kubernetes -----------------------------------------------------------------------------------------------------


def _selector_text(selector: Mapping[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(selector.items()))


def _ready(pod: Mapping[str, Any]) -> bool:
    if pod.get("metadata", {}).get("deletionTimestamp"):
        return False
    conditions = pod.get("status", {}).get("conditions", [])
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def stable_selector(kube: Any, namespace: str, service: str) -> dict[str, str] | None:
    """What the user-facing Service selects now; None when it does not exist yet (a first deploy)."""
    from tritonft.kube import ApiError

    try:
        found = kube.get("v1", "Service", service, namespace)
    except ApiError as exc:
        if exc.status == 404:
            return None
        raise
    return dict(found.get("spec", {}).get("selector") or {})


def ready_pods(kube: Any, namespace: str, selector: Mapping[str, str]) -> int:
    return sum(1 for p in kube.items("v1", "Pod", namespace, _selector_text(selector)) if _ready(p))


def scale_candidate(kube: Any, namespace: str, deployment: str, replicas: int, deadline_s: float) -> int:
    """Raise the candidate Deployment to ``replicas`` (never lower it) and wait until that many are ready."""
    path = kube.path("apps/v1", "Deployment", namespace, deployment)
    current = kube.get("apps/v1", "Deployment", deployment, namespace)
    if int(current.get("spec", {}).get("replicas") or 1) < replicas:
        body = {"spec": {"replicas": replicas}}
        kube.request("PATCH", path, body=body, content_type="application/merge-patch+json")
    deadline = time.monotonic() + deadline_s
    while True:
        status = kube.get("apps/v1", "Deployment", deployment, namespace).get("status", {})
        ready = int(status.get("readyReplicas") or 0)
        if ready >= replicas:
            return ready
        if time.monotonic() > deadline:
            raise PromotionGateError(
                f"{deployment}: {ready} of {replicas} replicas ready after {deadline_s:.0f} s; the switch waits "
                f"for as many ready pods as the stable version serves (bounded by replicasMax) so one pod never "
                f"takes all the traffic. The stable version keeps serving; see `kubectl -n {namespace} describe "
                f"deployment {deployment}` (no room for the pods? lower replicasMax or add nodes), then run "
                "`pulumi up` again"
            )
        time.sleep(POLL_S)


def set_route_backends(kube: Any, namespace: str, kind: str, name: str, backends: list[dict[str, Any]]) -> None:
    """Every rule of the route sends its requests to ``backends`` (a merge patch of ``spec.rules``)."""
    route = kube.get(GATEWAY_API, kind, name, namespace)
    rules = [{**rule, "backendRefs": backends} for rule in route["spec"]["rules"]]
    kube.request(
        "PATCH",
        kube.path(GATEWAY_API, kind, namespace, name),
        body={"spec": {"rules": rules}},
        content_type="application/merge-patch+json",
    )


def route_exists(kube: Any, namespace: str, kind: str, name: str) -> bool:
    from tritonft.kube import ApiError

    try:
        kube.get(GATEWAY_API, kind, name, namespace)
    except ApiError as exc:
        if exc.status == 404:
            return False
        raise
    return True


def backend_refs(phase: Phase, kind: str, *, stable: str, candidate: str, weight_percent: int) -> list[dict[str, Any]]:
    port = ROUTE_PORTS[kind]
    return [
        {"kind": "Service", "name": b.service, "port": port, "weight": b.weight}
        for b in route_backends(phase, stable=stable, candidate=candidate, weight_percent=weight_percent)
    ]


# -- the gate -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GateConfig:
    namespace: str
    model: str
    """The Triton model clients call (the series' ``model`` label)."""
    version: str
    stable_service: str
    candidate_service: str
    candidate_deployment: str
    routes: tuple[tuple[str, str], ...]
    """(kind, name) of the model's routes on the Gateway API edge."""
    min_replicas: int
    max_replicas: int
    replicas_deadline_s: float
    canary: CanarySettings | None

    @staticmethod
    def of(props: Mapping[str, Any]) -> GateConfig:
        canary = props.get("canary")
        return GateConfig(
            namespace=str(props["namespace"]),
            model=str(props["model"]),
            version=str(props["version"]),
            stable_service=str(props["stable_service"]),
            candidate_service=str(props["candidate_service"]),
            candidate_deployment=str(props["candidate_deployment"]),
            routes=tuple((str(k), str(n)) for k, n in props.get("routes") or []),
            min_replicas=int(props["min_replicas"]),
            max_replicas=int(props["max_replicas"]),
            replicas_deadline_s=float(props["replicas_deadline_s"]),
            canary=_canary_settings(canary) if canary else None,
        )


def _canary_settings(raw: Mapping[str, Any]) -> CanarySettings:
    """The settings back from the provider's inputs (Pulumi hands numbers over as floats)."""
    url = raw.get("prometheus_url")
    return CanarySettings(
        enabled=bool(raw.get("enabled")),
        weight_percent=int(raw["weight_percent"]),
        duration_s=int(raw["duration_s"]),
        max_error_ratio_increase_percent=int(raw["max_error_ratio_increase_percent"]),
        max_latency_increase_percent=int(raw["max_latency_increase_percent"]),
        min_requests=int(raw["min_requests"]),
        prometheus_url=str(url) if url else None,
    )


def weighted_phase(
    kube: Any, config: GateConfig, policy: CanarySettings, query: Query, sleep: Callable[[float], None] = time.sleep
) -> dict[str, Any]:
    """The phase itself: weights on, wait, measure both versions, weights off (always), verdict."""

    def route_to(phase: Phase) -> None:
        for kind, name in config.routes:
            refs = backend_refs(
                phase,
                kind,
                stable=config.stable_service,
                candidate=config.candidate_service,
                weight_percent=policy.weight_percent,
            )
            set_route_backends(kube, config.namespace, kind, name, refs)

    missing = [f"{kind}/{name}" for kind, name in config.routes if not route_exists(kube, config.namespace, kind, name)]
    if missing:  # the model is exposed on this edge for the first time in this update: no traffic to split yet
        return {"skipped": f"no weighted phase: {', '.join(missing)} not on the cluster yet (new in this update)"}
    try:
        route_to(Phase.CANARY)
        sleep(policy.duration_s)
        candidate = measure(query, config.namespace, config.candidate_service, config.model, policy.duration_s)
        stable = measure(query, config.namespace, config.stable_service, config.model, policy.duration_s)
    finally:
        route_to(Phase.STABLE)
    verdict = canary_verdict(candidate, stable, policy)
    if not verdict.passed:
        raise PromotionGateError(
            failure_message(config.model, config.version, verdict, policy.weight_percent, policy.duration_s)
        )
    return {
        "verdict": verdict.summary(),
        "candidate": dataclasses.asdict(candidate),
        "stable": dataclasses.asdict(stable),
    }


def run_gate(
    kube: Any, config: GateConfig, query: Query | None = None, sleep: Callable[[float], None] = time.sleep
) -> dict[str, Any]:
    """Replicas before the switch, then the weighted phase when configured; what it did, for the outputs.
    ``query``: how Prometheus is asked (default: ``canary.prometheus_url``, else through the API server)."""
    selector = stable_selector(kube, config.namespace, config.stable_service)
    if selector is None or selector.get(VERSION_LABEL) == config.version:
        return {"stable_version": None, "replicas": None, "phase": None}
    stable_ready = ready_pods(kube, config.namespace, selector)
    target = replicas_before_switch(stable_ready, min_replicas=config.min_replicas, max_replicas=config.max_replicas)
    scale_candidate(kube, config.namespace, config.candidate_deployment, target, config.replicas_deadline_s)
    outcome: dict[str, Any] = {
        "stable_version": selector.get(VERSION_LABEL, ""),
        "replicas": {"stable_ready": stable_ready, "candidate_ready": target},
        "phase": None,
    }
    if config.canary is not None and config.canary.enabled and config.routes and stable_ready > 0:
        policy = config.canary
        ask = query or (prometheus_query(policy.prometheus_url) if policy.prometheus_url else proxied_query(kube))
        outcome["phase"] = weighted_phase(kube, config, policy, ask, sleep)
    return outcome


def _run(props: dict[str, Any]) -> dict[str, Any]:
    from components.rollout_watch import _kube

    kube = _kube(props.get("kubeconfig"), props.get("context"))
    outs = {k: v for k, v in props.items() if k != "kubeconfig"}
    return {**outs, **run_gate(kube, GateConfig.of(props))}


class PromotionGateProvider(ResourceProvider):
    """create runs the gate (once per version: the resource is keyed by it); nothing remote, delete is a no-op."""

    serialize_as_secret_always = False

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        changed = [k for k in PROMOTION_GATE_INPUTS if olds.get(k) != news.get(k)]
        return DiffResult(changes=bool(changed), replaces=[], stables=[], delete_before_replace=False)

    def create(self, props: dict[str, Any]) -> CreateResult:
        return CreateResult(id_=f"{props['namespace']}/{props['candidate_deployment']}", outs=_run(props))

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(outs=_run(news))

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        """The gate leaves nothing behind (the routes are back on the stable Service when it ends)."""


@dataclass(frozen=True)
class PromotionGateArgs:
    namespace: pulumi.Input[str]
    model: str
    version: str
    stable_service: str
    candidate_service: str
    candidate_deployment: str
    routes: tuple[tuple[str, str], ...]
    min_replicas: int
    max_replicas: int
    replicas_deadline_s: float
    canary: CanarySettings | None = None
    kubeconfig: pulumi.Input[str] | None = None
    context: str | None = None


class PromotionGate(pulumi.dynamic.Resource, module="tritonft", name="PromotionGate"):
    """Succeeds when the candidate may take the traffic; fails ``up`` with the reason when it may not."""

    stable_version: pulumi.Output[str | None]
    replicas: pulumi.Output[dict[str, int] | None]
    phase: pulumi.Output[dict[str, Any] | None]
    """The weighted phase's verdict and both versions' figures (None when no phase ran)."""

    def __init__(self, name: str, args: PromotionGateArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        props: dict[str, Any] = {
            "namespace": args.namespace,
            "model": args.model,
            "version": args.version,
            "stable_service": args.stable_service,
            "candidate_service": args.candidate_service,
            "candidate_deployment": args.candidate_deployment,
            "routes": [list(r) for r in args.routes],
            "min_replicas": args.min_replicas,
            "max_replicas": args.max_replicas,
            "replicas_deadline_s": args.replicas_deadline_s,
            "canary": dataclasses.asdict(args.canary) if args.canary is not None else None,
            "context": args.context,
            "stable_version": None,
            "replicas": None,
            "phase": None,
        }
        if args.kubeconfig is not None:
            props["kubeconfig"] = pulumi.Output.secret(args.kubeconfig)
            extra = pulumi.ResourceOptions(additional_secret_outputs=["kubeconfig"])
            opts = pulumi.ResourceOptions.merge(opts, extra) if opts else extra
        super().__init__(PromotionGateProvider(), name, props, opts)
