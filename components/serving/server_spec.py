"""The Triton Deployment, Service, PodDisruptionBudget and NetworkPolicy, as pure functions (no Pulumi)."""

from __future__ import annotations

import math
import posixpath
from dataclasses import dataclass, field
from typing import Any

from components.common.layout import STORE_MOUNT
from components.common.netpol import dns_egress
from components.common.placement import away_from_gpu_nodes
from components.common.podsec import container_security_context, pod_security_context
from components.common.sizing import ServerSizing, StartupBudget
from components.common.target import GpuScheduling
from components.common.triton import GRPC_PORT, HTTP_PORT, METRICS_PORT
from components.common.workload import (
    ENDPOINTS_LAG_S,
    PROMETHEUS_PODS,
    SERVICE_DNS_TTL_S,
    Drain,
    drain,
    http_probe,
    namespace_peer,
    pods_peer,
)
from components.settings.capacity import spread_affinity, zone_spread
from tritonft.engines.fastertransformer.versions import TRITON_VERSION
from tritonft.engines.vllm import health
from tritonft.engines.vllm.compile_cache import LEASE_ENV, renewing_lease
from tritonft.engines.vllm.health import readiness_probe
from tritonft.gateway.triton import REFRESH_S
from tritonft.spec import ModelSpec

TRITONSERVER = "/opt/tritonserver/bin/tritonserver"
LIVE_PATH = "/v2/health/live"
READY_PATH = "/v2/health/ready"

RESTRICTED_APIS = ("shared-memory", "model-repository", "statistics", "trace", "logging")
"""Triton's API groups no client of the stack calls (the gateway calls health and inference, the probe health,
metadata, model configuration and inference): registering shared memory (the first step of the
CVE-2025-23319/23320/23334 chain into the Python backend), the repository (index, load, unload: a load can carry the
model's files), statistics, trace and log settings (which can name files to write)."""
ADMIN_HEADER = "triton-ft-admin"
"""The header a restricted API asks for; its value is the pod's UID (:data:`ADMIN_KEY_ENV`), which no client has."""
ADMIN_KEY_ENV = "TRITON_POD_UID"
"""The Triton container's variable holding the pod's UID (downward API), expanded into the restriction flags."""
HTTP_RESTRICTION_FROM = (24, 10)
"""The first Triton release verified to have ``--http-restricted-api`` (2.51.0, what ``.tools/triton`` runs); 23.04
(2.33.0, FasterTransformer's last) has only ``--grpc-restricted-protocol``."""


TRITON_PROPAGATION_S = SERVICE_DNS_TTL_S + math.ceil(REFRESH_S) + ENDPOINTS_LAG_S
"""From a Triton pod's deletion until no client picks it: the endpoints (and the edge) updated, the headless
Service's DNS answer expired and the gateway's next re-resolve (``tritonft.gateway.triton.REFRESH_S``)."""
TRITON_EXIT_S = 30
"""Triton's own exit after SIGTERM (``--exit-timeout-secs``' default; idle after the drain, it unloads its models)."""


def triton_drain(longest_request_seconds: int, *, vllm: bool = False) -> Drain:
    """The Triton pod's drain: its ``preStop`` sleeps until no client can still pick it and the longest request
    already sent (``longest_request_seconds``) has ended, so SIGTERM finds it idle. A vLLM model's pod waits only as
    long as its engine has requests (:func:`vllm_lifecycle`: its longest request, many minutes, is the bound, not
    what every pod waits); its grace period allows the check's overrun.

    Triton needs it: on SIGTERM it refuses new work to every model at once ("Server is stopping, scheduler for model
    has stopped accepting new inference requests"), so an ensemble between two steps, or a stream between two
    responses, fails (``tests/system/realtriton/test_drain.py``). Under ``mpirun`` (a model on several GPUs) SIGTERM
    goes to ``mpirun``, PID 1, which kills its child soon after: the hook runs before either sees a signal."""
    overrun = health.DRAIN_OVERRUN_S if vllm else 0
    return drain(TRITON_PROPAGATION_S + overrun, longest_request_seconds, TRITON_EXIT_S)


def vllm_lifecycle(model: ModelSpec, longest_request_seconds: int) -> dict[str, Any]:
    """A vLLM model's Triton container's ``lifecycle``: its ``preStop`` waits out the propagation, then until the
    engine has nothing running or waiting for the model (or the longest request has passed)
    (:data:`tritonft.engines.vllm.health.DRAIN_SCRIPT`)."""
    command = health.drain_command(model.name, TRITON_PROPAGATION_S, longest_request_seconds)
    return {"preStop": {"exec": {"command": command}}}


def release_tuple(release: str) -> tuple[int, int]:
    """``"23.04"`` -> ``(23, 4)``; a release that is not ``YY.MM`` is refused, naming it."""
    year, _, month = release.partition(".")
    if not (year.isdigit() and month.isdigit()):
        raise ValueError(f"Triton release {release!r} is not YY.MM (e.g. 23.04)")
    return int(year), int(month)


def api_restriction_flags(release: str) -> list[str]:
    """``--grpc-restricted-protocol`` (every release the stack runs) and, where the server has it,
    ``--http-restricted-api`` for :data:`RESTRICTED_APIS`, each granted only to a request carrying
    :data:`ADMIN_HEADER` with the pod's UID. On 23.04 the HTTP side of these APIs stays open: only the
    NetworkPolicy stands in front of it (and ``--model-control-mode=none`` refuses every load and unload)."""
    grant = f"{ADMIN_HEADER}=$({ADMIN_KEY_ENV})"
    apis = ",".join(RESTRICTED_APIS)
    flags = [f"--grpc-restricted-protocol={apis}:{grant}"]
    if release_tuple(release) >= HTTP_RESTRICTION_FROM:
        flags.append(f"--http-restricted-api={apis}:{grant}")
    return flags


LATENCY_SUMMARY_FLAG = "--metrics-config=summary_latencies=true"
"""Triton's request-latency summaries (``nv_inference_request_summary_us`` with quantiles), whose p95 the canary phase
compares (``components.serving.canary``); Triton exports no request-latency histogram."""


def tritonserver_args(
    model: ModelSpec, repository_dir: str, release: str = TRITON_VERSION, *, latency_summaries: bool = False
) -> list[str]:
    """Flags of ``tritonserver`` (``release``: the server image's Triton release): no model control (every model
    of the model's own repository loaded at start, load and unload refused), the APIs no client needs restricted
    (:func:`api_restriction_flags`), strict readiness, metrics (GPU metrics on a GPU node, CPU metrics on a CPU
    node: DCGM finds no GPU there) on.

    The repository directory holds exactly the model's ensemble and the models it is made of
    (``components.common.layout.model_paths``), so ``none`` loads what ``explicit`` with ``--load-model`` did.
    ``--strict-readiness`` makes ``/v2/health/ready`` mean "every loaded model is ready" (Triton's deploy guide),
    which is what both the readiness and the startup probe ask. ``latency_summaries`` (a stack with the canary phase)
    adds :data:`LATENCY_SUMMARY_FLAG`.
    """
    hardware_metrics = "--allow-cpu-metrics=true" if model.on_cpu else "--allow-gpu-metrics=true"
    return [
        f"--model-repository={repository_dir}",
        "--model-control-mode=none",
        *api_restriction_flags(release),
        "--strict-readiness=true",
        "--exit-on-error=true",
        f"--http-port={HTTP_PORT}",
        f"--grpc-port={GRPC_PORT}",
        "--allow-metrics=true",
        hardware_metrics,
        f"--metrics-port={METRICS_PORT}",
        *([LATENCY_SUMMARY_FLAG] if latency_summaries else []),
        "--log-verbose=0",
    ]


def server_command(
    model: ModelSpec, repository_dir: str, release: str = TRITON_VERSION, *, latency_summaries: bool = False
) -> list[str]:
    """The container command: plain ``tritonserver`` on CPU or one GPU, under ``mpirun -n 1`` on several.

    A vLLM model runs plain ``tritonserver`` on any number of GPUs: vLLM starts its own worker per GPU
    (``distributed_executor_backend: mp`` in ``model.json``).

    The FasterTransformer backend starts one MPI process per *node* and drives all the node's GPUs from it
    (ft-format.md §6, seed 001: ``mpirun -n 1 ... tritonserver`` for T5-3B on 4 GPUs). The pod runs as a non-root
    user, so seed 001's ``--allow-run-as-root`` is not needed; ``--bind-to none`` keeps MPI from pinning the
    process to one core of the pod's CPU set.
    """
    server = [TRITONSERVER, *tritonserver_args(model, repository_dir, release, latency_summaries=latency_summaries)]
    if model.gpus <= 1 or model.family.is_vllm:  # vLLM starts a worker process per GPU itself (no MPI)
        return server
    return ["mpirun", "-n", "1", "--bind-to", "none", *server]


VLLM_ENV: tuple[dict[str, str], ...] = (
    {"name": "HF_HUB_OFFLINE", "value": "1"},
    {"name": "VLLM_NO_USAGE_STATS", "value": "1"},
    {"name": "DO_NOT_TRACK", "value": "1"},
)
"""A vLLM pod's environment beyond the server's: the model is a directory on the store and the pod's egress is DNS
only, so neither the Hub nor vLLM's usage reporting is called (vLLM ``envs.py``: ``VLLM_NO_USAGE_STATS``,
``DO_NOT_TRACK``; huggingface_hub: ``HF_HUB_OFFLINE``)."""


@dataclass(frozen=True)
class ServerPod:
    """Inputs of the server pod that are not the model itself."""

    image: Any
    """Triton + FT server image (a str or a Pulumi Output of one), pinned by digest."""
    claim_name: str
    gpu: GpuScheduling
    cpu_node_selector: dict[str, str] = field(default_factory=dict)
    """Where a ``device: cpu`` model's pods run (the stack's ``cpuNodeSelector``); GPU nodes are excluded."""
    triton_release: str = TRITON_VERSION
    """The server image's Triton release (``YY.MM``): which API restrictions its ``tritonserver`` has."""
    longest_request_seconds: int = 60
    """The longest a request to this Triton may take (the gateway's ``--deadline``, the edge's request timeout):
    what the pod's drain waits for (:func:`triton_drain`)."""
    engine_stall_seconds: int = 60
    """How long a vLLM engine with work may produce no token before its container is restarted: the model's
    first-token deadline (``gatewayDeadlineSeconds``, a request's wait for the engine and its prompt's prefill;
    :func:`tritonft.engines.vllm.health.liveness_probe`). Not used by the other engines."""
    latency_summaries: bool = False
    """Triton exports its request-latency summaries (:data:`LATENCY_SUMMARY_FLAG`: the canary phase's p95)."""
    priority_class: str | None = None
    """The stack's serving PriorityClass (``components.common.priority``); None: the cluster's default priority."""
    compile_cache: str = ""
    """A vLLM model's compile cache directory on the store (``ModelPaths.compile_cache``, ``compile-cache/<model>``,
    made by its Job): mounted writable by ``subPath`` (:func:`compile_cache_volume`); empty: none (other engines)."""
    compile_cache_root: str = ""
    """vLLM's ``VLLM_CACHE_ROOT``: the pods' key directory inside :attr:`compile_cache`
    (``components.common.layout.compile_cache_root`` of ``tritonft.engines.vllm.compile_cache.cache_key``)."""


COMPILE_CACHE_VOLUME = "compile-cache"
"""The pod's second volume of the store's claim, not read-only: only the model's compile cache is mounted from it."""
COMPILE_CACHE_ENV = LEASE_ENV
"""vLLM 0.27.1 keeps torch.compile's artifacts under ``$VLLM_CACHE_ROOT/torch_compile_cache/<hash>`` (``envs.py:684``,
``compilation/backends.py:1068``: the hash covers vLLM's config, the environment, the traced code and the
compiler) and sends Inductor's and Triton's caches there too (``compilation/compiler_interface.py:476-480``:
``TORCHINDUCTOR_CACHE_DIR``, ``TRITON_CACHE_DIR``); where the root lies is not part of the hash (``envs.py:2144``).
The root is one key's directory (:mod:`tritonft.engines.vllm.compile_cache`): the server image's identity (its base
and the project's files, not the pushed digest), the revision and the engine arguments that shape the graphs."""


def compile_cache_volume(model: ModelSpec, pod: ServerPod) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(env, volumeMount, volume) putting a vLLM model's compile cache on the store: a restarted or added pod, or a
    rebuild of the same server image, finds what an earlier one compiled (torch.compile and the kernels take minutes
    at each start otherwise). Only the model's own ``compile-cache/<model>`` is writable (the rest of the store stays
    read-only); ``VLLM_CACHE_ROOT`` is the pod's key directory in it, whose lease a loop beside Triton renews (the
    container's command: ``tritonft.engines.vllm.compile_cache.renewing_lease``)."""
    if not (model.family.is_vllm and pod.compile_cache):
        raise ValueError(f"model {model.name!r}: only a vLLM model with its compile cache directory has one")
    if posixpath.dirname(pod.compile_cache_root) != pod.compile_cache:
        raise ValueError(
            f"model {model.name!r}: VLLM_CACHE_ROOT {pod.compile_cache_root!r} is not a key directory of its compile "
            f"cache {pod.compile_cache!r}"
        )
    subpath = pod.compile_cache.removeprefix(f"{STORE_MOUNT}/")
    return (
        {"name": COMPILE_CACHE_ENV, "value": pod.compile_cache_root},
        {"name": COMPILE_CACHE_VOLUME, "mountPath": pod.compile_cache, "subPath": subpath},
        {"name": COMPILE_CACHE_VOLUME, "persistentVolumeClaim": {"claimName": pod.claim_name}},
    )


def placement(model: ModelSpec, pod: ServerPod) -> dict[str, Any]:
    """``nodeSelector``, ``tolerations`` and ``affinity`` of the pod: the GPU pool and its taint for a GPU model;
    for a CPU model the CPU nodes, no GPU toleration, and a required affinity away from GPU nodes."""
    if model.on_cpu:
        return {
            "nodeSelector": dict(pod.cpu_node_selector),
            "affinity": away_from_gpu_nodes(pod.gpu.node_selector),
        }
    return {"nodeSelector": dict(pod.gpu.node_selector), "tolerations": [dict(t) for t in pod.gpu.tolerations]}


def server_pod_spec(
    model: ModelSpec,
    repository_dir: str,
    pod: ServerPod,
    sizing: ServerSizing,
    budget: StartupBudget,
    *,
    affinity: dict[str, Any] | None = None,
    pod_selector: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The Triton pod: GPUs = TP x PP on a GPU node (no GPU on a CPU node), sized /dev/shm, startup budget from
    the model, hardened.

    * startupProbe on ``/v2/health/ready`` for ``budget`` (the model's load time), after which
    * livenessProbe on ``/v2/health/live`` restarts a hung server and readinessProbe on ``/v2/health/ready``
      takes an unready one out of the Service; neither can kill a pod that is still loading (server#7014); a vLLM
      model's probes ask the engine itself instead (``tritonft.engines.vllm.health``: a dead or hung engine leaves
      Triton's health true): readiness within 50 s, liveness (a restart) once it has made no progress for
      ``pod.engine_stall_seconds`` while it has work, or answered no token that many seconds while idle;
    * a ``preStop`` drain and a grace period that covers it (:func:`triton_drain`): a rollout or a scale-in fails
      no request;
    * with ``pod_selector`` (the model's pods), its replicas spread over nodes and zones
      (``components.settings.capacity.spread_affinity``, ``zone_spread``).
    """
    leaving = triton_drain(pod.longest_request_seconds, vllm=model.family.is_vllm)
    gpus = {pod.gpu.resource_name: str(sizing.gpus)} if sizing.gpus else {}
    requests = {
        "cpu": sizing.cpu_request,
        "memory": sizing.memory_request,
        "ephemeral-storage": sizing.ephemeral_request,
        **gpus,
    }
    limits = {
        "cpu": sizing.cpu_limit,
        "memory": sizing.memory_limit,
        "ephemeral-storage": sizing.ephemeral_limit,
        **gpus,
    }
    env: list[dict[str, Any]] = [
        {"name": "HOME", "value": "/tmp"},
        {"name": ADMIN_KEY_ENV, "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}},
    ]
    cache = compile_cache_volume(model, pod) if model.family.is_vllm and pod.compile_cache else None
    if model.family.is_vllm:
        env += [dict(e) for e in VLLM_ENV]
        env += [cache[0]] if cache is not None else []
    elif not model.family.is_encoder:
        # FTB's default: GROUP is safe; PARALLEL is faster but may hang (FTB README).
        env.append({"name": "NCCL_LAUNCH_MODE", "value": "GROUP"})
    server = server_command(model, repository_dir, pod.triton_release, latency_summaries=pod.latency_summaries)
    container = {
        "name": "triton",
        "image": pod.image,
        "imagePullPolicy": "Always",
        "command": renewing_lease(server, pod.compile_cache_root) if cache is not None else server,
        "env": env,
        "ports": [
            {"name": "http", "containerPort": HTTP_PORT, "protocol": "TCP"},
            {"name": "grpc", "containerPort": GRPC_PORT, "protocol": "TCP"},
            {"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"},
        ],
        "resources": {"requests": requests, "limits": limits},
        "startupProbe": http_probe(READY_PATH, budget.period_seconds, budget.failure_threshold),
        "livenessProbe": health.liveness_probe(model.name, pod.engine_stall_seconds)
        if model.family.is_vllm
        else http_probe(LIVE_PATH, 10, 3),
        "readinessProbe": readiness_probe(model.name) if model.family.is_vllm else http_probe(READY_PATH, 5, 3),
        "lifecycle": vllm_lifecycle(model, pod.longest_request_seconds)
        if model.family.is_vllm
        else leaving.lifecycle(),
        "securityContext": container_security_context(),
        "volumeMounts": [
            {"name": "store", "mountPath": STORE_MOUNT, "readOnly": True},
            {"name": "shm", "mountPath": "/dev/shm"},
            {"name": "tmp", "mountPath": "/tmp"},
            *([cache[1]] if cache is not None else []),
        ],
    }
    spec: dict[str, Any] = {
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": leaving.termination_grace_seconds,
        **({"priorityClassName": pod.priority_class} if pod.priority_class else {}),
        "securityContext": pod_security_context(),
        **placement(model, pod),
        "containers": [container],
        "volumes": [
            {"name": "store", "persistentVolumeClaim": {"claimName": pod.claim_name, "readOnly": True}},
            # Counted in the memory request (server_sizing): a memory emptyDir is charged to the pod.
            {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": sizing.shm_size}},
            {"name": "tmp", "emptyDir": {"sizeLimit": sizing.tmp_size}},
            *([cache[2]] if cache is not None else []),
        ],
    }
    if affinity is not None:  # GPU packing (pod affinity); a CPU model's node affinity is kept beside it
        spec["affinity"] = {**spec.get("affinity", {}), **affinity}
    if pod_selector is not None:
        spec["affinity"] = {**spec.get("affinity", {}), **spread_affinity(pod_selector)}
        spec["topologySpreadConstraints"] = zone_spread(pod_selector)
    return spec


def service_spec(selector_labels: dict[str, str]) -> dict[str, Any]:
    """ClusterIP Service for HTTP 8000, gRPC 8001 (``appProtocol`` h2c) and metrics 8002."""
    return {
        "type": "ClusterIP",
        "selector": dict(selector_labels),
        "ports": [
            {"name": "http", "port": HTTP_PORT, "targetPort": "http", "protocol": "TCP", "appProtocol": "http"},
            {
                "name": "grpc",
                "port": GRPC_PORT,
                "targetPort": "grpc",
                "protocol": "TCP",
                "appProtocol": "kubernetes.io/h2c",
            },
            {
                "name": "metrics",
                "port": METRICS_PORT,
                "targetPort": "metrics",
                "protocol": "TCP",
                "appProtocol": "http",
            },
        ],
    }


def pods_service_name(base: str) -> str:
    """The headless Service of ``base``'s pods (the gateway's Triton address)."""
    return f"{base}-pods"


def pods_service_spec(selector_labels: dict[str, str]) -> dict[str, Any]:
    """A headless Service (``clusterIP: None``) on gRPC 8001: its DNS name gives one address per *ready* pod.

    The gateway resolves it every few seconds and spreads its calls over every pod (``tritonft.gateway.triton``).
    Through the ClusterIP Service it would keep one long-lived HTTP/2 connection per model, which kube-proxy
    balances once, at connect: every call would go to one pod, and pods the autoscaler adds would get none.
    """
    return {
        "clusterIP": "None",
        "selector": dict(selector_labels),
        "ports": [
            {
                "name": "grpc",
                "port": GRPC_PORT,
                "targetPort": "grpc",
                "protocol": "TCP",
                "appProtocol": "kubernetes.io/h2c",
            }
        ],
    }


def network_policy_spec(
    selector_labels: dict[str, str],
    client_namespaces: tuple[str, ...],
    prometheus_namespace: str,
    gateway_pods: dict[str, str] | None = None,
    *,
    edge_pods: tuple[tuple[str, dict[str, str]], ...] = (),
    judge_pods: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Only the edge's proxy pods (``edge_pods``: (namespace, labels), an exposed encoder's) and the user's
    ``client_namespaces`` reach 8000/8001, the stack's gateway pods (selected by ``gateway_pods``, same namespace)
    reach 8001, only Prometheus's pods (by their label, not the whole monitoring namespace) reach 8002. A model
    without an edge route (FasterTransformer, vLLM: ``components.common.edge.exposes_triton``) is reached by the
    gateway's pods only, and Prometheus's on metrics. A judged model's Triton also admits its judge's pods (selected
    by ``judge_pods``, same namespace: ``components.serving.judge_job``) on 8000, where the judge asks a candidate.

    Egress is limited to cluster DNS: Triton reads its models from the mounted volume and calls nothing.
    """
    tcp = "TCP"
    ingress: list[dict[str, Any]] = []
    peers = [pods_peer(ns, pods) for ns, pods in edge_pods] + [namespace_peer(ns) for ns in client_namespaces]
    if peers:  # an empty `from` would admit every source, so no clients means no rule
        ingress.append(
            {
                "from": peers,
                "ports": [{"port": HTTP_PORT, "protocol": tcp}, {"port": GRPC_PORT, "protocol": tcp}],
            }
        )
    if gateway_pods:
        ingress.append(
            {
                "from": [{"podSelector": {"matchLabels": dict(gateway_pods)}}],
                "ports": [{"port": GRPC_PORT, "protocol": tcp}],
            }
        )
    if judge_pods:
        ingress.append(
            {
                "from": [{"podSelector": {"matchLabels": dict(judge_pods)}}],
                "ports": [{"port": HTTP_PORT, "protocol": tcp}],
            }
        )
    ingress.append(
        {
            "from": [pods_peer(prometheus_namespace, PROMETHEUS_PODS)],
            "ports": [{"port": METRICS_PORT, "protocol": tcp}],
        }
    )
    return {
        "podSelector": {"matchLabels": dict(selector_labels)},
        "policyTypes": ["Ingress", "Egress"],
        "ingress": ingress,
        "egress": [dns_egress()],
    }
