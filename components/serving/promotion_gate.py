"""``PromotionGate``: the dynamic resource between a candidate's judgement and the switch of the user-facing Services.

Created once per serving version (its Pulumi name carries the version), after the probe judged the candidate and
before the Services select it (they depend on the gate). Its create:

1. finds the stable version: the pods the user-facing Service selects now (none: a first deploy, or a re-run after
   the switch: nothing to do);
2. with ``canary`` on, runs the weighted phase: the model's routes get the :attr:`Phase.CANARY` weights, the phase
   lasts its duration, Prometheus gives each version's figures, the routes go back to the :attr:`Phase.STABLE`
   backends whatever happens (also on an error or an interruption the provider sees), then the verdict either
   lets the switch follow or fails ``up`` with :func:`components.serving.canary.failure_message`;
3. when the candidate has fewer ready pods than :func:`components.serving.canary.replicas_before_switch` (the
   stable's ready pods, bounded by ``replicasMax``), *pins* the stable's ready pods in the user-facing Services:
   an EndpointSlice per Service (:data:`PIN_MANAGER`, which the EndpointSlice controller leaves alone) listing
   them, owned by the stable Deployment, so they keep serving beside the candidate once the Services switch.

``PromotionHandover`` runs after the switch (and after the autoscaler moved to the new version): it grows the
candidate one pod at a time while the stable shrinks (:func:`components.serving.canary.handover_step`; the pods
that leave are unpinned first), never holding more than one pod beyond the target: the surge pod the capacity rules
count, not a second fleet. The slices go with the stable Deployment (the garbage collector), which ``up`` deletes
last, or a revert deletes; a handover cut short is carried on by the next ``up`` of the same change.

The routes carry ``pulumi.com/patchForce`` and the version (``components.serving.service``): when a later ``up``
changes the version (a fix, a revert), the program's apply of the routes wins over what the gate wrote, even after an
``up`` killed mid-phase. Nothing remote belongs to the gate: delete is a no-op.

Import-safe (classes and functions only). Pulumi pickles the provider by reference
(``components.serving.promotion_gate.PromotionGateProvider``): never rename or move this module while stacks use it.
"""

from __future__ import annotations

import abc
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
    handover_step,
    replicas_before_switch,
    route_backends,
    sample_from,
    sample_queries,
)
from components.serving.promotion import VERSION_LABEL, versioned_name
from components.serving.server_spec import pods_service_name
from components.settings.model import CanarySettings
from tritonft.rollout.verdict import PROMOTION_GATE_INPUTS, PROMOTION_HANDOVER_INPUTS

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


def _replicas(kube: Any, namespace: str, deployment: str) -> tuple[int, int]:
    """(spec.replicas, status.readyReplicas) of a Deployment."""
    found = kube.get("apps/v1", "Deployment", deployment, namespace)
    spec = found.get("spec", {}).get("replicas")
    return int(1 if spec is None else spec), int(found.get("status", {}).get("readyReplicas") or 0)


def _scale(kube: Any, namespace: str, deployment: str, replicas: int) -> None:
    kube.request(
        "PATCH",
        kube.path("apps/v1", "Deployment", namespace, deployment),
        body={"spec": {"replicas": replicas}},
        content_type="application/merge-patch+json",
    )


# -- pinning the stable's pods in the user-facing Services --------------------------------------------------------

PIN_MANAGER = "promotion-gate.triton-ft.io"
"""``endpointslice.kubernetes.io/managed-by`` of the EndpointSlices the gate writes: the EndpointSlice controller
leaves them alone, kube-proxy, CoreDNS and the edge read them as the Service's endpoints."""
TARGET_ANNOTATION = "triton-ft.io/handover-target"
"""On a pinned EndpointSlice: the ready pods the candidate must reach before the stable's last pod may go."""
DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
SERVICE_NAME_LABEL = "kubernetes.io/service-name"


def pinned_slice_name(service: str, stable_version: str) -> str:
    return f"{service}-pinned-{stable_version or 'stable'}"


def _pods_of(kube: Any, namespace: str, deployment: Mapping[str, Any]) -> list[dict[str, Any]]:
    selector = deployment.get("spec", {}).get("selector", {}).get("matchLabels") or {}
    pods = kube.items("v1", "Pod", namespace, _selector_text(selector))
    return [p for p in pods if not p.get("metadata", {}).get("deletionTimestamp")]


def _slice_ports(service: Mapping[str, Any], pod: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The Service's ports as an EndpointSlice lists them: the target port resolved on the pod (named or numbered)."""
    named = {
        str(p["name"]): int(p["containerPort"])
        for c in pod.get("spec", {}).get("containers", [])
        for p in c.get("ports") or []
        if p.get("name")
    }
    ports = []
    for port in service.get("spec", {}).get("ports") or []:
        target = port.get("targetPort", port["port"])
        number = named.get(target) if isinstance(target, str) else int(target)
        if number is None:
            continue
        entry = {"name": port.get("name", ""), "port": number, "protocol": port.get("protocol", "TCP")}
        if port.get("appProtocol"):
            entry["appProtocol"] = port["appProtocol"]
        ports.append(entry)
    return ports


def pin_stable(
    kube: Any,
    namespace: str,
    services: tuple[str, ...],
    *,
    stable_deployment: str,
    stable_version: str,
    target: int,
    leaving: frozenset[str] = frozenset(),
) -> int:
    """Write, for each user-facing Service, an EndpointSlice listing the stable version's ready pods (but those
    ``leaving``), owned by the stable Deployment: once the Services select the candidate, these pods keep serving
    beside it, and the garbage collector removes the slices with the stable Deployment (deleted at the end of the
    ``up``, or by a revert's). Returns how many pods are pinned."""
    deployment = kube.get("apps/v1", "Deployment", stable_deployment, namespace)
    pods = sorted(
        (p for p in _pods_of(kube, namespace, deployment) if _ready(p) and p.get("status", {}).get("podIP")),
        key=lambda p: str(p["metadata"]["name"]),
    )
    pods = [p for p in pods if p["metadata"]["name"] not in leaving]
    owner = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": stable_deployment,
        "uid": deployment["metadata"]["uid"],
    }
    for name in services:
        service = kube.get("v1", "Service", name, namespace)
        kube.apply(
            {
                "apiVersion": "discovery.k8s.io/v1",
                "kind": "EndpointSlice",
                "metadata": {
                    "name": pinned_slice_name(name, stable_version),
                    "namespace": namespace,
                    "labels": {SERVICE_NAME_LABEL: name, "endpointslice.kubernetes.io/managed-by": PIN_MANAGER},
                    "annotations": {TARGET_ANNOTATION: str(target)},
                    "ownerReferences": [owner],
                },
                "addressType": "IPv4",
                "ports": _slice_ports(service, pods[0]) if pods else [],
                "endpoints": [
                    {
                        "addresses": [p["status"]["podIP"]],
                        "conditions": {"ready": True, "serving": True, "terminating": False},
                        "targetRef": {
                            "kind": "Pod",
                            "name": p["metadata"]["name"],
                            "namespace": namespace,
                            "uid": p["metadata"]["uid"],
                        },
                        **({"nodeName": p["spec"]["nodeName"]} if p.get("spec", {}).get("nodeName") else {}),
                    }
                    for p in pods
                ],
            }
        )
    return len(pods)


def pinned_slices(kube: Any, namespace: str, service: str) -> list[dict[str, Any]]:
    selector = f"{SERVICE_NAME_LABEL}={service},endpointslice.kubernetes.io/managed-by={PIN_MANAGER}"
    return [
        s
        for s in kube.items("discovery.k8s.io/v1", "EndpointSlice", namespace, selector)
        if not s["metadata"].get("deletionTimestamp")
    ]


def user_facing_services(stable_service: str) -> tuple[str, ...]:
    """The Services users reach a model through: the edge's (ClusterIP) and the gateway's (headless)."""
    return (stable_service, pods_service_name(stable_service))


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
    stable_version = selector.get(VERSION_LABEL, "")
    stable_ready = ready_pods(kube, config.namespace, selector)
    target = replicas_before_switch(stable_ready, min_replicas=config.min_replicas, max_replicas=config.max_replicas)
    outcome: dict[str, Any] = {
        "stable_version": stable_version,
        "replicas": {"stable_ready": stable_ready, "target": target},
        "phase": None,
    }
    if config.canary is not None and config.canary.enabled and config.routes and stable_ready > 0:
        policy = config.canary
        ask = query or (prometheus_query(policy.prometheus_url) if policy.prometheus_url else proxied_query(kube))
        outcome["phase"] = weighted_phase(kube, config, policy, ask, sleep)
    _, candidate_ready = _replicas(kube, config.namespace, config.candidate_deployment)
    if candidate_ready < target:
        # The switch follows: the stable's pods keep serving beside the candidate until the handover replaced them.
        stable_deployment = versioned_name(config.stable_service, stable_version) if stable_version else None
        pinned = pin_stable(
            kube,
            config.namespace,
            user_facing_services(config.stable_service),
            stable_deployment=stable_deployment or config.stable_service,
            stable_version=stable_version,
            target=target,
        )
        outcome["replicas"]["pinned"] = pinned
    return outcome


def run_handover(kube: Any, config: GateConfig, *, step_deadline_s: float) -> dict[str, Any]:
    """After the switch: grow the candidate to the handover's target one pod at a time while the stable's pinned pods
    leave (:func:`components.serving.canary.handover_step`); nothing to do without pinned pods (a first deploy, a
    fixed replica count, a candidate that had the stable's count already, or a handover already done)."""
    ns = config.namespace
    services = user_facing_services(config.stable_service)
    pins = [s for s in pinned_slices(kube, ns, services[0]) if s["metadata"].get("ownerReferences")]
    owners = {s["metadata"]["ownerReferences"][0]["name"]: s for s in pins}
    owners.pop(config.candidate_deployment, None)
    if not owners:  # no stable to hand over from: the new version serves alone once its autoscaler's minimum is ready
        deadline = time.monotonic() + step_deadline_s
        while _replicas(kube, ns, config.candidate_deployment)[1] < config.min_replicas:
            if time.monotonic() > deadline:
                raise PromotionGateError(
                    f"{config.candidate_deployment}: {_replicas(kube, ns, config.candidate_deployment)[1]} of "
                    f"replicasMin {config.min_replicas} replicas ready after {step_deadline_s:.0f} s; see `kubectl -n "
                    f"{ns} describe deployment {config.candidate_deployment}`, then run `pulumi up` again"
                )
            time.sleep(POLL_S)
        return {"handover": None}
    (stable_deployment, pinned), *_ = sorted(owners.items())
    stable_version = str(pinned["metadata"]["name"]).rsplit("-", 1)[1]
    target = int(pinned["metadata"].get("annotations", {}).get(TARGET_ANNOTATION) or 1)
    steps = 0
    while True:
        candidate_replicas, candidate_ready = _replicas(kube, ns, config.candidate_deployment)
        stable_replicas, _ = _replicas(kube, ns, stable_deployment)
        if candidate_ready >= target:
            return {
                "handover": {
                    "stable_deployment": stable_deployment,
                    "target": target,
                    "candidate_ready": candidate_ready,
                    "stable_left": stable_replicas,
                    "steps": steps,
                }
            }
        step = handover_step(
            target,
            candidate_replicas=candidate_replicas,
            candidate_ready=candidate_ready,
            stable_replicas=stable_replicas,
        )
        changed = step.stable < stable_replicas or step.candidate > candidate_replicas
        if step.stable < stable_replicas:
            _shrink_stable(
                kube,
                ns,
                services,
                stable_deployment=stable_deployment,
                stable_version=stable_version,
                target=target,
                replicas=step.stable,
            )
        if step.candidate > candidate_replicas:
            _scale(kube, ns, config.candidate_deployment, step.candidate)
        deadline = time.monotonic() + step_deadline_s
        # The step is done when the new pod is ready and an endpoint of every user-facing Service (what kube-proxy,
        # CoreDNS and the edge read): only then may the next stable pod leave.
        while _listed_ready(kube, ns, services, config.candidate_deployment) < min(step.candidate, candidate_ready + 1):
            if time.monotonic() > deadline:
                ready = _listed_ready(kube, ns, services, config.candidate_deployment)
                raise PromotionGateError(
                    f"{config.candidate_deployment}: {ready} of {step.candidate} replicas ready (and endpoints) after "
                    f"{step_deadline_s:.0f} s of the handover from {stable_deployment} (which keeps serving with "
                    f"{step.stable} pinned pod(s) beside it, for {target} in all); see `kubectl -n {ns} describe "
                    f"deployment {config.candidate_deployment}`, then run `pulumi up` again (the handover carries "
                    "on), or revert the change"
                )
            time.sleep(POLL_S)
        if not changed:  # the Deployment's status lags the endpoints the last step waited for: read it again
            time.sleep(POLL_S)
        steps += changed


def _listed_ready(kube: Any, namespace: str, services: tuple[str, ...], deployment: str) -> int:
    """The Deployment's ready pods that every one of ``services`` lists as a ready endpoint."""
    pods = {
        p["metadata"]["name"]
        for p in _pods_of(kube, namespace, kube.get("apps/v1", "Deployment", deployment, namespace))
        if _ready(p)
    }
    for service in services:
        slices = kube.items("discovery.k8s.io/v1", "EndpointSlice", namespace, f"{SERVICE_NAME_LABEL}={service}")
        pods &= {
            str(e["targetRef"]["name"])
            for s in slices
            for e in s.get("endpoints") or []
            if (e.get("conditions") or {}).get("ready") and e.get("targetRef")
        }
    return len(pods)


def _shrink_stable(
    kube: Any,
    namespace: str,
    services: tuple[str, ...],
    *,
    stable_deployment: str,
    stable_version: str,
    target: int,
    replicas: int,
) -> None:
    """Take the stable Deployment down to ``replicas``: the pods that leave are unpinned first (no new request
    reaches them; their drain serves what they hold), marked as the ReplicaSet's first to delete, then scaled."""
    deployment = kube.get("apps/v1", "Deployment", stable_deployment, namespace)
    pods = sorted(_pods_of(kube, namespace, deployment), key=lambda p: (_ready(p), str(p["metadata"]["name"])))
    leaving = [p["metadata"]["name"] for p in pods[: max(0, len(pods) - replicas)]]
    pin_stable(
        kube,
        namespace,
        services,
        stable_deployment=stable_deployment,
        stable_version=stable_version,
        target=target,
        leaving=frozenset(leaving),
    )
    for name in leaving:
        kube.request(
            "PATCH",
            kube.path("v1", "Pod", namespace, name),
            body={"metadata": {"annotations": {DELETION_COST: "-1000"}}},
            content_type="application/merge-patch+json",
        )
    _scale(kube, namespace, stable_deployment, replicas)


class PromotionStepProvider(ResourceProvider, abc.ABC):
    """A step of a judged promotion, run once per serving version (its resource is keyed by the version): ``create``,
    and ``update`` when one of :attr:`inputs` changed, runs :meth:`step` against the cluster and returns the inputs
    with what the step did. The gate and the handover differ only by these two (:class:`PromotionGateProvider`,
    :class:`PromotionHandoverProvider`: Pulumi pickles a provider by its class, which stacks' states name, so each
    keeps its own class and name)."""

    serialize_as_secret_always = False
    inputs: tuple[str, ...] = ()
    """The inputs whose change runs the step again (``tritonft diff`` reads the same: ``tritonft.rollout.verdict``)."""

    @abc.abstractmethod
    def step(self, kube: Any, props: dict[str, Any]) -> dict[str, Any]:
        """What the step did: its outputs beside the inputs."""

    def _outs(self, props: dict[str, Any]) -> dict[str, Any]:
        from components.rollout_watch import _kube

        kube = _kube(props.get("kubeconfig"), props.get("context"))
        outs = {k: v for k, v in props.items() if k != "kubeconfig"}
        return {**outs, **self.step(kube, props)}

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        changed = [k for k in self.inputs if olds.get(k) != news.get(k)]
        return DiffResult(changes=bool(changed), replaces=[], stables=[], delete_before_replace=False)

    def create(self, props: dict[str, Any]) -> CreateResult:
        return CreateResult(id_=f"{props['namespace']}/{props['candidate_deployment']}", outs=self._outs(props))

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(outs=self._outs(news))

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        """Nothing remote belongs to a step: the routes are back on the stable Service when a gate ends, and the
        pinned EndpointSlices belong to the stable Deployment."""


class PromotionGateProvider(PromotionStepProvider):
    """The gate (:func:`run_gate`)."""

    inputs = PROMOTION_GATE_INPUTS

    def step(self, kube: Any, props: dict[str, Any]) -> dict[str, Any]:
        return run_gate(kube, GateConfig.of(props))


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


# -- the handover after the switch ----------------------------------------------------------------------------------


class PromotionHandoverProvider(PromotionStepProvider):
    """The handover (:func:`run_handover`), each step bounded by ``replicas_deadline_s``."""

    inputs = PROMOTION_HANDOVER_INPUTS

    def step(self, kube: Any, props: dict[str, Any]) -> dict[str, Any]:
        config = GateConfig.of({**props, "routes": [], "canary": None})
        return run_handover(kube, config, step_deadline_s=float(props["replicas_deadline_s"]))


class PromotionHandover(pulumi.dynamic.Resource, module="tritonft", name="PromotionHandover"):
    """After the user-facing Services switched to a new version: grows it to the stable's ready count one pod at a
    time while the stable's pinned pods leave; fails ``up`` naming both counts when a step cannot complete."""

    handover: pulumi.Output[dict[str, Any] | None]

    def __init__(self, name: str, args: PromotionGateArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        props: dict[str, Any] = {
            "namespace": args.namespace,
            "model": args.model,
            "version": args.version,
            "stable_service": args.stable_service,
            "candidate_service": args.candidate_service,
            "candidate_deployment": args.candidate_deployment,
            "min_replicas": args.min_replicas,
            "max_replicas": args.max_replicas,
            "replicas_deadline_s": args.replicas_deadline_s,
            "context": args.context,
            "handover": None,
        }
        if args.kubeconfig is not None:
            props["kubeconfig"] = pulumi.Output.secret(args.kubeconfig)
            extra = pulumi.ResourceOptions(additional_secret_outputs=["kubeconfig"])
            opts = pulumi.ResourceOptions.merge(opts, extra) if opts else extra
        super().__init__(PromotionHandoverProvider(), name, props, opts)
