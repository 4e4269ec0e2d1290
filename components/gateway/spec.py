"""The OpenAI-compatible gateway's Deployment, Service, NetworkPolicy, autoscaler and ServiceMonitor (pure, no Pulumi).

The pod runs ``python -m tritonft gateway``, the command a shell runs, with one ``--triton-url MODEL=HOST:PORT`` per
model (a stack runs one Triton Deployment per model, generator or encoder alike): a generator is served under
``/v1/completions`` (and chat) from its spec, mounted from a ConfigMap (``--spec``); an embedding model under
``/v1/embeddings`` (``--embedding-model NAME:MAX_BATCH``, never as a completion model); a classifier is not served
under ``/v1`` at all (OpenAI's API has no classification route: it is called on its KServe V2 endpoint). It runs on
CPU nodes, next to nothing it does not need: its NetworkPolicy admits the ingress controller (the API) and
Prometheus (``/metrics``) on its one port and lets it reach only DNS and the Triton pods' gRPC port.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from enum import StrEnum
from typing import Any

from components.common.layout import selector
from components.common.netpol import dns_egress
from components.common.podsec import container_security_context, pod_security_context
from components.common.triton import GRPC_PORT
from components.common.workload import (
    ENDPOINTS_LAG_S,
    PROMETHEUS_PODS,
    SCRAPE_INTERVAL,
    Drain,
    drain_in_process,
    hpa_behavior,
    http_probe,
    pods_peer,
)
from components.settings.alerting import with_runbooks
from tritonft.gateway.config import request_deadline_s
from tritonft.spec import EncoderTask, ModelSpec

GATEWAY_PORT = 8080
SPEC_MOUNT = "/etc/tritonft/models"
CHECKPOINT_MOUNT = "/etc/tritonft/checkpoints"
"""Where the gateway mounts each vLLM model's downloaded checkpoint (read-only, ``<CHECKPOINT_MOUNT>/<model>``): its
``tokenizer_config.json`` holds the chat template chat is rendered with."""
TOKENIZER_CONFIG = "tokenizer_config.json"
SPECS_ANNOTATION = "triton-ft.io/specs-sha256"
"""On the pod template: a changed model spec rolls the gateway (it reads the specs once, at start)."""
LIVE_PATH = "/health/live"
READY_PATH = "/health/ready"
METRICS_PATH = "/metrics"
CPU_TARGET_PERCENT = 70
"""HPA target: average CPU use per pod, in percent of its request."""
SCALE_DOWN_WINDOW_SECONDS = 300
"""A gateway pod starts in seconds, so scale-down waits the Kubernetes default, not the Triton pods' cold start."""


GATEWAY_EXIT_S = 5
"""uvicorn's exit after SIGTERM once idle (it closes its idle keep-alive connections)."""


def gateway_drain(longest_request_seconds: int) -> Drain:
    """The gateway pod's drain: its ``preStop`` sleeps until the edge's proxies have dropped it (they watch the
    Service's endpoints: no DNS in between); then SIGTERM, and uvicorn stops accepting, lets every request under way
    end (streams included) and exits. The grace period covers its longest request (the longest of its models'
    deadlines, :func:`longest_deadline_seconds`: 880 s for prod's Llama), so a rollout or a scale-in of the gateway
    cuts no completion, and a gateway pod with nothing under way leaves seconds after its removal."""
    return drain_in_process(ENDPOINTS_LAG_S, longest_request_seconds, GATEWAY_EXIT_S)


def model_deadline_seconds(model: ModelSpec, base_seconds: int) -> int:
    """The gateway's deadline for a request to ``model`` when it runs with ``--deadline base_seconds``, in whole
    seconds rounded up (:func:`tritonft.gateway.config.request_deadline_s`: a vLLM model's adds its longest answer):
    what its Triton pods' drain waits for, and what every proxy in front of the gateway must allow."""
    return math.ceil(request_deadline_s(model, float(base_seconds)))


def longest_deadline_seconds(models: Sequence[ModelSpec], base_seconds: int) -> int:
    """The longest deadline of a request the gateway serving ``models`` may hold (``base_seconds`` without any)."""
    return max((model_deadline_seconds(m, base_seconds) for m in models), default=base_seconds)


class Route(StrEnum):
    """Where the gateway serves a model."""

    COMPLETIONS = "completions"
    """``/v1/completions`` (and ``/v1/chat/completions`` for the GPT families): a generator, from its spec."""
    EMBEDDINGS = "embeddings"
    """``/v1/embeddings``: an encoder with ``task: embed``."""


def gateway_route(model: ModelSpec) -> Route | None:
    """The gateway's route for ``model``; None for a classifier (no OpenAI route: its KServe V2 endpoint serves it)."""
    if model.encoder is None:
        return Route.COMPLETIONS
    return Route.EMBEDDINGS if model.encoder.task is EncoderTask.EMBED else None


def gateway_selector(name: str) -> dict[str, str]:
    """Labels that select the gateway's pods (Triton's NetworkPolicy admits exactly these)."""
    return selector("gateway", name)


@dataclass(frozen=True)
class Backend:
    """A served model and the in-cluster gRPC address of the Triton that serves it."""

    model: ModelSpec
    grpc_address: str
    """``<service>.<namespace>.svc:8001``."""
    pods: dict[str, str]
    """Selector labels of that Triton's pods (the gateway's egress goes to them only)."""
    scales_to_zero: bool = False
    """That Triton may have no replica (KEDA): the gateway stays ready without it and answers 503 + Retry-After."""
    checkpoint_subpath: str | None = None
    """A vLLM model's downloaded checkpoint on the model store, relative to its root (``hf/<model>/<revision>``):
    mounted read-only so the gateway reads the model's ``tokenizer_config.json`` (chat). None for the others."""


@dataclass(frozen=True)
class GatewayPod:
    """Everything the gateway pod needs besides the backends."""

    image: Any
    """The tools image (``tritonft`` installed), pinned by digest."""
    config_map: str
    """ConfigMap holding ``<model>.json`` for each served model."""
    cpu: str
    """CPU request and limit (Kubernetes quantity)."""
    memory: str
    """Memory request and limit (Kubernetes quantity)."""
    deadline_seconds: int
    """``--deadline``: the base of every model's deadline (:func:`model_deadline_seconds`)."""
    node_selector: dict[str, str]
    coalesce: bool = True
    """Merge concurrent same-parameter completions into one Triton call (``--coalesce``/``--no-coalesce``)."""
    max_in_flight_per_client: int = 0
    """``--max-in-flight-per-client``: each API client's requests in flight per pod; 0 = no limit."""
    key_expiries: tuple[tuple[str, date], ...] = ()
    """``--api-key-expires``: (key id, first day refused) of each API key with an ``expires`` day."""
    store_claim: str | None = None
    """The model store's PersistentVolumeClaim, mounted read-only when a backend names a ``checkpoint_subpath``."""
    priority_class: str | None = None
    """The stack's serving PriorityClass (``components.common.priority``); None: the cluster's default priority."""


def spec_file(model: ModelSpec) -> str:
    return f"{model.name}.json"


def specs_data(models: Sequence[ModelSpec]) -> dict[str, str]:
    """The ConfigMap's data: each generator's spec as ``tritonft gateway --spec`` reads it (an embedding model is
    named on the command line instead: its spec says nothing the gateway needs but its batch size)."""
    return {spec_file(m): m.to_json() for m in models if gateway_route(m) is Route.COMPLETIONS}


def specs_digest(models: Sequence[ModelSpec]) -> str:
    data = specs_data(models)
    return hashlib.sha256("\n".join(f"{k}\n{data[k]}" for k in sorted(data)).encode()).hexdigest()


def checkpoint_mount(model: ModelSpec) -> str:
    """Where the gateway pod mounts ``model``'s checkpoint directory."""
    return f"{CHECKPOINT_MOUNT}/{model.name}"


def tokenizer_config_args(model_name: str, checkpoint_dir: str) -> list[str]:
    """``--tokenizer-config MODEL=<checkpoint_dir>/tokenizer_config.json``: the gateway renders ``model``'s chat with
    the template in that file (the deployed pod's mount, or a checkpoint directory on this machine)."""
    return ["--tokenizer-config", f"{model_name}={checkpoint_dir.rstrip('/')}/{TOKENIZER_CONFIG}"]


def in_flight_per_client(stated: int | None, max_concurrent_requests: int, gateway_replicas_max: int) -> int:
    """Requests one API client may have in flight at each gateway replica (``maxConcurrentPerClient``): as stated,
    else derived from the edge's cap so that at the gateway's most replicas one client holds at most half of one
    proxy replica's ``max_concurrent_requests`` slots (a client on one connection reaches one proxy), at least 1."""
    if stated is not None:
        return stated
    return max(1, max_concurrent_requests // (2 * gateway_replicas_max))


def gateway_command(
    backends: Sequence[Backend],
    deadline_seconds: int,
    coalesce: bool = True,
    max_in_flight_per_client: int = 0,
    key_expiries: Sequence[tuple[str, date]] = (),
) -> list[str]:
    """``python -m tritonft gateway`` with one Triton route per model, and a spec per generator or an
    ``--embedding-model NAME:MAX_BATCH`` per embedding model (``MAX_BATCH``: its ensemble's ``max_batch_size``).
    ``backends`` are the served ones (:func:`gateway_route` not None). ``max_in_flight_per_client`` > 0: each API
    client's cap (``--max-in-flight-per-client``, :mod:`tritonft.gateway.limits`); ``key_expiries``: (key id, first
    day refused) of each API key with an ``expires`` day (``--api-key-expires``)."""
    command = ["python", "-m", "tritonft", "gateway", "--port", str(GATEWAY_PORT)]
    command += ["--deadline", str(deadline_seconds), "--coalesce" if coalesce else "--no-coalesce"]
    if max_in_flight_per_client > 0:
        command += ["--max-in-flight-per-client", str(max_in_flight_per_client)]
    for key_id, day in key_expiries:
        command += ["--api-key-expires", f"{key_id}={day.isoformat()}"]
    for backend in backends:
        route = gateway_route(backend.model)
        if route is None:
            raise ValueError(f"model {backend.model.name!r} is a classifier: the gateway does not serve it")
        command += ["--triton-url", f"{backend.model.name}={backend.grpc_address}"]
        if route is Route.EMBEDDINGS:
            command += ["--embedding-model", f"{backend.model.name}:{backend.model.batching.max_batch_size}"]
        else:
            command += ["--spec", f"{SPEC_MOUNT}/{spec_file(backend.model)}"]
        if backend.checkpoint_subpath is not None:
            command += tokenizer_config_args(backend.model.name, checkpoint_mount(backend.model))
        if backend.scales_to_zero:
            command += ["--scales-to-zero", backend.model.name]
    return command


def gateway_pod_spec(backends: Sequence[Backend], pod: GatewayPod, pod_selector: dict[str, str]) -> dict[str, Any]:
    """The gateway pod: hardened like every workload, probes on its health routes, spread over nodes; each vLLM
    model's checkpoint directory mounted read-only from the model store by ``subPath`` (its ``tokenizer_config.json``).

    Readiness is ``/health/ready`` (some Triton answers with all its models); liveness is ``/health/live`` (the
    process answers), so a Triton outage takes the gateway out of the Service but never restarts it. It leaves
    through :func:`gateway_drain`.
    """
    leaving = gateway_drain(longest_deadline_seconds([b.model for b in backends], pod.deadline_seconds))
    resources = {"cpu": pod.cpu, "memory": pod.memory}
    checkpoints = [b for b in backends if b.checkpoint_subpath is not None]
    if checkpoints and pod.store_claim is None:
        raise ValueError(
            f"models {[b.model.name for b in checkpoints]} read their checkpoint from the model store: give the "
            "gateway pod the store's claim (store_claim)"
        )
    checkpoint_mounts = [
        {"name": "store", "mountPath": checkpoint_mount(b.model), "subPath": b.checkpoint_subpath, "readOnly": True}
        for b in checkpoints
    ]
    store_volumes = (
        [{"name": "store", "persistentVolumeClaim": {"claimName": pod.store_claim, "readOnly": True}}]
        if checkpoints
        else []
    )
    container = {
        "name": "gateway",
        "image": pod.image,
        "imagePullPolicy": "Always",
        "command": gateway_command(
            backends, pod.deadline_seconds, pod.coalesce, pod.max_in_flight_per_client, pod.key_expiries
        ),
        "env": [{"name": "HOME", "value": "/tmp"}, {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"}],
        "ports": [{"name": "http", "containerPort": GATEWAY_PORT, "protocol": "TCP"}],
        "resources": {"requests": dict(resources), "limits": dict(resources)},
        "startupProbe": http_probe(LIVE_PATH, 2, 30, timeout=3),
        "livenessProbe": http_probe(LIVE_PATH, 10, 3, timeout=3),
        "readinessProbe": http_probe(READY_PATH, 5, 2, timeout=3),
        "lifecycle": leaving.lifecycle(),
        "securityContext": container_security_context(),
        "volumeMounts": [
            {"name": "specs", "mountPath": SPEC_MOUNT, "readOnly": True},
            {"name": "tmp", "mountPath": "/tmp"},
            *checkpoint_mounts,
        ],
    }
    return {
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": leaving.termination_grace_seconds,
        **({"priorityClassName": pod.priority_class} if pod.priority_class else {}),
        "securityContext": pod_security_context(),
        "nodeSelector": dict(pod.node_selector),
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "kubernetes.io/hostname",
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": dict(pod_selector)},
            },
            {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": dict(pod_selector)},
            },
        ],
        "containers": [container],
        "volumes": [
            {"name": "specs", "configMap": {"name": pod.config_map}},
            {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}},
            *store_volumes,
        ],
    }


def gateway_service_spec(pod_selector: dict[str, str]) -> dict[str, Any]:
    """ClusterIP Service on the gateway's one port (the API, health and ``/metrics``)."""
    return {
        "type": "ClusterIP",
        "selector": dict(pod_selector),
        "ports": [
            {"name": "http", "port": GATEWAY_PORT, "targetPort": "http", "protocol": "TCP", "appProtocol": "http"}
        ],
    }


def gateway_network_policy_spec(
    pod_selector: dict[str, str],
    backends: Sequence[Backend],
    clients: Sequence[tuple[str, dict[str, str]]],
    prometheus_namespace: str,
) -> dict[str, Any]:
    """In: the edge's proxy pods (``clients``: (namespace, pod labels)) and Prometheus's pods, by their labels (never
    a whole namespace: the gateway trusts the client name the edge's proxies set), on the gateway port. Out: DNS,
    and each served model's Triton pods on the gRPC port only."""
    tcp = "TCP"
    sources = [pods_peer(ns, pods) for ns, pods in clients] + [pods_peer(prometheus_namespace, PROMETHEUS_PODS)]
    return {
        "podSelector": {"matchLabels": dict(pod_selector)},
        "policyTypes": ["Ingress", "Egress"],
        "ingress": [{"from": sources, "ports": [{"port": GATEWAY_PORT, "protocol": tcp}]}],
        "egress": [
            dns_egress(),
            {
                "to": [{"podSelector": {"matchLabels": dict(b.pods)}} for b in backends],
                "ports": [{"port": GRPC_PORT, "protocol": tcp}],
            },
        ],
    }


def cpu_hpa_spec(deployment: str, min_replicas: int, max_replicas: int) -> dict[str, Any]:
    """HPA on average CPU use (why CPU: ``components.gateway``). Up at once, down one pod a minute after 5 min."""
    return {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": deployment},
        "minReplicas": min_replicas,
        "maxReplicas": max_replicas,
        "metrics": [
            {
                "type": "Resource",
                "resource": {
                    "name": "cpu",
                    "target": {"type": "Utilization", "averageUtilization": CPU_TARGET_PERCENT},
                },
            }
        ],
        "behavior": hpa_behavior(SCALE_DOWN_WINDOW_SECONDS, scale_down_period_seconds=60),
    }


def gateway_service_monitor_spec(namespace: str, service_labels: dict[str, str]) -> dict[str, Any]:
    """Prometheus scrapes ``/metrics`` on the gateway's port (requests by route/model/status, latencies)."""
    return {
        "selector": {"matchLabels": dict(service_labels)},
        "namespaceSelector": {"matchNames": [namespace]},
        "endpoints": [{"port": "http", "path": METRICS_PATH, "interval": SCRAPE_INTERVAL}],
    }


SERVER_ERROR_ALERT = "GatewayServerErrors"
SERVER_ERROR_RATIO = 0.05
"""Share of the gateway's answers that may be 5xx (5-minute rate) before :data:`SERVER_ERROR_ALERT` fires."""
SERVER_ERROR_FOR = "10m"
SERVER_ERROR_MIN_RATE = 0.1
"""Requests/s below which the ratio is not judged (two failures out of three requests in five minutes is noise)."""


def server_errors_expr(namespace: str, job: str) -> str:
    """The share of the gateway's answers with a 5xx status (5-minute rate, all routes and models), where it
    answered at least :data:`SERVER_ERROR_MIN_RATE` requests/s. 503 ``model_starting`` (a model scaled to zero
    waking) counts too: a client got no answer."""
    sel = f'namespace="{namespace}",job="{job}"'
    total = f"sum by (namespace, job) (rate(tritonft_gateway_requests_total{{{sel}}}[5m]))"
    failed = f'sum by (namespace, job) (rate(tritonft_gateway_requests_total{{{sel},status=~"5.."}}[5m]))'
    return f"({failed} / {total}) and ({total} > {SERVER_ERROR_MIN_RATE:g})"


def gateway_rule_spec(namespace: str, job: str) -> dict[str, Any]:
    """The gateway's alert: more than :data:`SERVER_ERROR_RATIO` of its answers are 5xx for
    :data:`SERVER_ERROR_FOR` (the clients' view: a Triton pod down, a deadline missed, a rollout that drops calls)."""
    spec: dict[str, Any] = {
        "groups": [
            {
                "name": f"{job}.triton-ft.gateway-alerts",
                "rules": [
                    {
                        "alert": SERVER_ERROR_ALERT,
                        "expr": f"({server_errors_expr(namespace, job)}) > {SERVER_ERROR_RATIO:g}",
                        "for": SERVER_ERROR_FOR,
                        "labels": {"severity": "critical", "service": job},
                        "annotations": {
                            "summary": "The OpenAI gateway answers {{ $value | humanizePercentage }} of requests "
                            "with a server error",
                            "description": f"More than {SERVER_ERROR_RATIO:.0%} of the answers of gateway {job} were "
                            f"5xx (5-minute rate) for {SERVER_ERROR_FOR}: its access log names the model and status.",
                        },
                    }
                ],
            }
        ]
    }
    return with_runbooks(spec)
