"""TritonService: one model served by Triton (FasterTransformer, or ONNX Runtime for encoders), exposed, autoscaled
and monitored. A ``device: cpu`` encoder's pods request no GPU and run on the stack's CPU nodes.

Children: Deployment, Service, PodDisruptionBudget, NetworkPolicy; Gateway API routes (an HTTPRoute of Triton's
inference paths and a GRPCRoute of its inference methods, ``components/common/edge.py``) or, on a cluster that keeps
an Ingress controller, HTTP and gRPC Ingresses (with TLS and auth unless ``secure`` is off); an HPA or a KEDA
ScaledObject; a ServiceMonitor, a PrometheusRule and a Grafana dashboard ConfigMap when monitoring is on. Custom
resources (routes, ServiceMonitor, PrometheusRule, ScaledObject) are created only when asked for and always after
the resources that install their CRDs (pulumi-kubernetes#1712, #3176). The Deployment waits for the model's
conversion Job; ``up`` then waits for its rollout through a ``RolloutWatch`` (the startup budget computed from the
model's size, or much less when the scheduler shows the pods can never get their GPUs) instead of the Kubernetes
provider's await. With a judge, a new serving version is judged in the cluster: as a candidate beside the serving one
before the Services switch (``components.serving.promotion``), or, without room for a candidate, right after it
rolled in place.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import pulumi
import pulumi_kubernetes as k8s

from components.common.edge import EdgeArgs, validate_edge
from components.common.edge import endpoint_urls as edge_urls
from components.common.exposure import basic_auth_secret, model_route_refs, model_routes
from components.common.handoffs import ConvertedModel, ModelVolume
from components.common.ingress import (
    IngressArgs,
    endpoint_urls,
    grpc_exposed,
    ingress_annotations,
    ingress_spec,
    tls_secret_name,
    validate_ingress,
)
from components.common.layout import (
    SERVICE_ANNOTATIONS,
    SKIP_AWAIT,
    as_input,
    compile_cache_root,
    dns_label,
    labels,
    object_meta,
    selector,
)
from components.common.sizing import (
    LOAD_BANDWIDTH,
    progress_deadline_seconds,
    rollout_timeout_minutes,
    scale_down_window_seconds,
    server_sizing,
    startup_budget,
)
from components.common.target import ClusterTarget
from components.common.triton import GRPC_PORT, HTTP_PORT, adapter_rule, waiting_adapter_rule
from components.common.workload import deployment_spec, pdb_spec
from components.rollout_watch import RolloutWatch, RolloutWatchArgs, spec_hash
from components.serving.autoscaling import (
    DEFAULT_TTFT_P95_TARGET_S,
    DEFAULT_WAITING_TARGET,
    GatewayDemand,
    scaled_object_spec,
    scaling_signal,
    signal_hpa_spec,
)
from components.serving.canary import PATCH_FORCE, Phase, route_backends
from components.serving.gemm_tuning import GemmTuning, with_gemm_tuning
from components.serving.judge_job import (
    JUDGE_COMPONENT,
    judge_network_policy_spec,
    judge_pod_labels,
    judge_selector,
)
from components.serving.monitoring import dashboard_json_for, rule_spec_for, service_monitor_spec
from components.serving.promotion import (
    VERSION_LABEL,
    Candidate,
    judged_after_its_roll,
    room_for_a_candidate,
    serving_version,
    version_selector,
    versioned_name,
)
from components.serving.promotion_gate import PromotionGate, PromotionGateArgs, PromotionHandover
from components.serving.server_spec import (
    ServerPod,
    network_policy_spec,
    pods_service_name,
    pods_service_spec,
    release_tuple,
    server_pod_spec,
    service_spec,
    triton_drain,
)
from components.settings.alerting import alert_for
from components.settings.capacity import (
    PACKING_LABEL,
    PLACEMENT_ANNOTATION,
    Rollout,
    fixed_rollout,
    packing,
    placement_affinity,
    placement_note,
)
from components.settings.model import CanarySettings
from tritonft.engines.fastertransformer.versions import TRITON_VERSION
from tritonft.engines.vllm.compile_cache import cache_key
from tritonft.errors import UserError
from tritonft.repo.naming import RepoNames
from tritonft.rollout.verdict import NodeGrowth

Autoscaler = Literal["hpa", "keda", "none"]
Judge = Callable[[Candidate, pulumi.ResourceOptions], pulumi.Resource]
"""Builds the resource that judges a serving version (the in-cluster judge, given by the composition: a stage never
imports another): a candidate before it takes traffic, or a version that rolled in place right after its roll
(``Candidate.in_place``); its create must fail when the version answers wrong."""


@dataclass(frozen=True)
class TritonServiceArgs:
    """How one converted model is served."""

    target: ClusterTarget
    conversion: ConvertedModel
    """The model's conversion (its model spec, store paths and Job, which the Deployment waits for)."""
    store: ModelVolume
    """The model store the conversion wrote into (mounted read-only)."""
    image: pulumi.Input[str]
    """Triton + FasterTransformer server image, pinned by digest."""
    triton_release: str = TRITON_VERSION
    """The server image's Triton release (``YY.MM``): which of Triton's API restrictions its server has
    (``components.serving.server_spec.api_restriction_flags``)."""
    ingress: IngressArgs | None = None
    """External exposure through an Ingress (clusters that keep an Ingress controller); None = see ``edge``."""
    edge: EdgeArgs | None = None
    """External exposure through Gateway API routes (Triton's inference routes only); None with ``ingress`` None =
    in-cluster only."""
    autoscaler: Autoscaler = "hpa"
    """``hpa`` (queue/compute ratio via prometheus-adapter), ``keda`` (same ratio + scale-to-zero), ``none``."""
    min_replicas: int = 1
    """Lower bound of the autoscaler (0 allowed with KEDA and an ingress or the gateway), or the fixed count
    without one."""
    max_replicas: int = 3
    ratio_target: float = 1.0
    """Target queue time / compute time per pod (NVIDIA tutorial: 1.0; 1.5-3.5 for large TP models)."""
    ttft_p95_target_s: float = DEFAULT_TTFT_P95_TARGET_S
    """A vLLM model's time-to-first-token p95 objective, seconds: its ``VllmTimeToFirstTokenHigh`` alert's
    threshold and its dashboard's line."""
    waiting_target: float = DEFAULT_WAITING_TARGET
    """A vLLM model's autoscaling target: requests waiting inside vLLM per pod (what it scales on instead of the
    ratio: ``components.serving.autoscaling.scaling_signal``)."""
    keda_prometheus_url: str = "http://kube-prometheus-stack-prometheus.monitoring.svc:9090"
    """Prometheus the KEDA triggers query."""
    keda_requests_per_replica: float = 20.0
    """With KEDA: ingress requests/s one replica is expected to absorb."""
    monitoring: bool = True
    """Create ServiceMonitor, PrometheusRule and the Grafana dashboard (needs the prometheus-operator CRDs)."""
    prometheus_namespace: str = "monitoring"
    """Namespace of Prometheus: the only one the NetworkPolicy lets reach the metrics port."""
    alert_for: dict[str, str] = field(default_factory=dict)
    """Alert name -> its ``for:`` duration, for the alerts to change (``components.serving.monitoring.ALERT_FOR``)."""
    monitoring_labels: dict[str, str] = field(default_factory=lambda: {"release": "kube-prometheus-stack"})
    """Labels Prometheus selects ServiceMonitors/PrometheusRules by (kube-prometheus-stack: ``release``)."""
    dashboard_labels: dict[str, str] = field(default_factory=lambda: {"grafana_dashboard": "1"})
    """Labels the Grafana sidecar loads dashboard ConfigMaps by."""
    dashboard_namespace: str | None = None
    """Namespace the Grafana sidecar watches for dashboards (None = the workload namespace)."""
    client_namespaces: tuple[str, ...] = ()
    """Extra namespaces whose pods may call 8000/8001 directly (besides the ingress controller's)."""
    load_bandwidth: int = LOAD_BANDWIDTH
    """Bytes/s the server reads weights from the store at start-up; sizes the startup budget."""
    scale_down_window_seconds: int | None = None
    """HPA/KEDA scale-down stabilization override; None = computed from the startup budget."""
    gpus_per_node: int | None = None
    """GPUs of one GPU node: part-node pods then pack together (``components.settings.capacity``); None = no packing."""
    node_type: str = "GPU"
    """Name of the GPU node type, for the placement annotation."""
    gpu_node_cpus: int | None = None
    """CPUs of one GPU node: a vLLM model's CPU limit (``components.common.sizing.vllm_cpu_limit``); None: not
    known (or a model on CPU nodes)."""
    rollout: Rollout = field(default_factory=fixed_rollout)
    """Surge or replace one at a time, decided from the GPU capacity (``components.settings.capacity.rollout_for``)."""
    longest_request_seconds: int = 60
    """The longest a request to this Triton may take: the gateway's ``--deadline``, and the edge's request timeout
    when the model is exposed directly. Each pod's drain waits it out before Triton is stopped
    (``components.serving.server_spec.triton_drain``)."""
    engine_stall_seconds: int = 60
    """A vLLM model's first-token deadline (the gateway's base ``--deadline``): its engine, with work and no token
    for that long, is restarted by its livenessProbe (``components.serving.server_spec.ServerPod``)."""
    gateway_pods: dict[str, str] | None = None
    """Selector labels of the stack's OpenAI gateway pods, which the NetworkPolicy lets call gRPC (8001)."""
    gateway_job: str | None = None
    """Prometheus job of the stack's OpenAI gateway (its Service name): with KEDA, the gateway's requests for this
    model are demand too, and wake it from zero. None = no gateway."""
    node_growth: NodeGrowth = field(default_factory=lambda: NodeGrowth(autoscaler=False))
    """What can add GPU nodes while a pod waits for GPUs (the rollout watch fails fast when nothing can); not
    used for a ``device: cpu`` model, whose pods wait for no GPU node."""
    gemm_tuning: GemmTuning = field(default_factory=GemmTuning)
    """FT's GEMM autotuning in an init container before Triton starts (``components.serving.gemm_tuning``); only
    for FasterTransformer's families (an encoder's pod has no tuning step, on GPU or CPU)."""
    compile_identity: str = ""
    """What the server image compiles with (``components.platform.compile_identity``: its base and the project's
    files, not the pushed digest): with the revision and the engine arguments, a vLLM model's compile cache key
    (``tritonft.engines.vllm.compile_cache.cache_key``). Required for a vLLM model."""
    image_pins: str = ""
    """What the server image is built from, as plain text (the stack's ``image`` settings): part of the serving
    version (``components.serving.promotion``), so a new server image is judged before it takes traffic."""
    judge: Judge | None = None
    """Judges each new serving version before the user-facing Services switch to it; a model without room for a
    candidate (``rollout``) rolls in place and is judged right after its roll, before the gateway's configuration
    moves (``components.serving.promotion.judged_after_its_roll``). None: nothing judges it."""
    canary: CanarySettings | None = None
    """The weighted phase after a judged version (``components.serving.canary``; needs ``edge``): its routes' weights,
    duration and thresholds. None or not enabled: a judged version takes the traffic at once (with as many ready
    replicas as the stable serves)."""


def _validate(args: TritonServiceArgs) -> list[str]:
    problems: list[str] = []
    if args.max_replicas < max(1, args.min_replicas):
        problems.append(f"max_replicas ({args.max_replicas}) must be >= max(1, min_replicas={args.min_replicas})")
    if args.min_replicas < 0:
        problems.append("min_replicas must be >= 0")
    if args.min_replicas == 0 and args.autoscaler != "keda":
        problems.append("min_replicas 0 (scale to zero) needs autoscaler='keda'")
    if args.ingress is not None and args.edge is not None:
        problems.append("ingress and edge: expose the model through an Ingress or Gateway API routes, not both")
    if args.min_replicas == 0 and args.ingress is None and args.edge is None and args.gateway_job is None:
        problems.append(
            "scale to zero needs an ingress or the gateway: their request rate is what wakes a service with no pods"
        )
    try:
        release_tuple(args.triton_release)
    except ValueError as exc:
        problems.append(f"triton_release: {exc}")
    if args.longest_request_seconds < 1:
        problems.append(f"longest_request_seconds must be at least 1 (got {args.longest_request_seconds})")
    if args.engine_stall_seconds < 1:
        problems.append(f"engine_stall_seconds must be at least 1 (got {args.engine_stall_seconds})")
    if args.ratio_target <= 0:
        problems.append(f"ratio_target must be positive (got {args.ratio_target})")
    if args.ttft_p95_target_s <= 0:
        problems.append(f"ttft_p95_target_s must be positive (got {args.ttft_p95_target_s})")
    if args.waiting_target <= 0:
        problems.append(f"waiting_target must be positive (got {args.waiting_target})")
    addons = args.target.addons
    if args.monitoring and "prometheus-operator" not in addons:
        problems.append("monitoring is on but the cluster has no 'prometheus-operator' add-on (ServiceMonitor CRD)")
    if args.autoscaler == "keda" and "keda" not in addons:
        problems.append("autoscaler 'keda' needs the 'keda' add-on (ScaledObject CRD)")
    if args.autoscaler != "none" and not args.monitoring:
        problems.append(
            f"autoscaler {args.autoscaler!r} reads the ratio recorded by the PrometheusRule: turn monitoring on, "
            "or set autoscaler='none'"
        )
    if args.ingress is not None and args.ingress.cluster_issuer and "cert-manager" not in addons:
        problems.append("ingress.cluster_issuer needs the 'cert-manager' add-on")
    try:
        alert_for(args.alert_for)
    except ValueError as exc:
        problems.append(f"alert_for: {exc}")
    return problems


class TritonService(pulumi.ComponentResource):
    """Triton serving one model (FasterTransformer on GPUs, or an ONNX Runtime encoder on a GPU or CPU nodes), with
    ingress, autoscaling and monitoring."""

    deployment_name: pulumi.Output[str]
    """Name of the Triton Deployment."""
    service_name: pulumi.Output[str]
    """Name of the ClusterIP Service (ports http 8000, grpc 8001, metrics 8002)."""
    internal_url: pulumi.Output[str]
    """In-cluster HTTP base URL, e.g. ``http://t5-small.triton.svc:8000``."""
    grpc_address: pulumi.Output[str]
    """In-cluster gRPC ``host:port`` of the headless Service, e.g. ``t5-small-pods.triton.svc:8001``: what the
    gateway resolves to every pod's address and spreads its calls over."""
    endpoint: pulumi.Output[str | None]
    """Public HTTP base URL through the ingress (None without an ingress)."""
    grpc_endpoint: pulumi.Output[str | None]
    """Public gRPC target ``host:443`` (None without a TLS ingress)."""
    adapter_rules: pulumi.Output[str]
    """JSON of the prometheus-adapter ``rules.custom`` entry the HPA needs (for the adapter chart's values)."""
    startup_budget_seconds: pulumi.Output[int]
    """The startupProbe budget derived from the model size."""
    deployment: k8s.apps.v1.Deployment
    """The Triton Deployment of the serving version (``<model>-<version>``)."""
    version: str | None
    """The serving version (``components.serving.promotion.serving_version``); None when the model rolls in place
    (no judge, or no room for a candidate beside the serving version)."""
    candidate: Candidate | None
    """What the version's judge reaches (its own Service, its judge route); None when the model rolls in place."""
    judged_in_place: Candidate | None
    """What the judge of a version that rolled in place asks (the user-facing Service, right after the roll); None
    when the model has a candidate, no judge, or scales to zero."""
    rollout_watch: RolloutWatch
    """Done when the Deployment has rolled out (for ``depends_on`` of the integration probe)."""
    switched: tuple[pulumi.Resource, ...]
    """The user-facing Services (``<model>``, ``<model>-pods``): done when they select the declared version, which
    for a judged promotion is after its judge and gate passed; for a version judged in place, also its judge (what
    the gateway's configuration waits for)."""
    pod_selector: dict[str, str]
    """Selector labels of the Triton pods (the gateway's NetworkPolicy lets it reach these)."""
    scales_to_zero: bool
    """May have no replica when idle (KEDA, ``min_replicas`` 0): the gateway must not need it to be ready."""

    def __init__(self, name: str, args: TritonServiceArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        problems = (
            _validate(args)
            + (validate_ingress(args.ingress) if args.ingress is not None else [])
            + (validate_edge(args.edge) if args.edge is not None else [])
        )
        if problems:  # before anything registers: a bad config never reaches the engine
            raise UserError(f"TritonService {name!r}:\n  " + "\n  ".join(problems))
        super().__init__("triton-ft:serving:TritonService", name, {}, opts)

        target = args.target
        model = args.conversion.model
        repository_dir = args.conversion.paths.repository_dir
        self._target = target
        base = dns_label(name)
        ns = target.namespace
        sel = selector("triton", name)
        # What the model serves has a version: a new one comes up beside the serving one under its own names
        # (components.serving.promotion) and the Services below switch to it once it is judged. Without room for
        # it, the version rolls in place and is judged right after its roll.
        served_version = serving_version(repository_dir, args.image_pins, args.triton_release)
        version = served_version if args.judge is not None and room_for_a_candidate(args.rollout) else None
        in_place = args.judge is not None and judged_after_its_roll(args.rollout, args.min_replicas)
        versioned = versioned_name(base, version) if version else base
        serving_sel = version_selector(sel, version) if version else sel
        version_labels = {VERSION_LABEL: version} if version else {}
        canary = args.canary if args.canary is not None and args.canary.enabled and args.edge is not None else None
        meta_labels = labels("triton", name, model.name)
        pod_labels = {**meta_labels, **serving_sel}
        # RolloutWatch below waits instead of the provider's await, which only gives up at its timeout.
        placement: dict[str, str] = {"triton-ft.io/rollout": args.rollout.reason, SKIP_AWAIT: "true"}
        affinity = None
        if args.gpus_per_node is not None and model.gpus:  # GPU packing: a CPU model's pods take no GPU
            pod_labels[PACKING_LABEL] = packing(model.gpus, args.gpus_per_node)
            affinity = placement_affinity(model.gpus, args.gpus_per_node)
            placement[PLACEMENT_ANNOTATION] = placement_note(model.gpus, args.gpus_per_node, args.node_type)
        child = pulumi.ResourceOptions(parent=self, provider=target.provider)

        sizing = server_sizing(model, args.gpu_node_cpus)
        budget = startup_budget(model, load_bandwidth=args.load_bandwidth)
        pod = ServerPod(
            image=args.image,
            claim_name=args.store.k8s_name,
            gpu=target.gpu,
            cpu_node_selector=dict(target.cpu_node_selector),
            triton_release=args.triton_release,
            longest_request_seconds=args.longest_request_seconds,
            engine_stall_seconds=args.engine_stall_seconds,
            latency_summaries=canary is not None,
            priority_class=target.priority.serving if target.priority else None,
            compile_cache=args.conversion.paths.compile_cache,
            compile_cache_root=compile_cache_root(
                args.conversion.paths.compile_cache, cache_key(model, args.compile_identity)
            )
            if args.conversion.paths.compile_cache
            else "",
        )
        tuning_seconds = args.gemm_tuning.budget_seconds() if args.gemm_tuning.applies(model) else 0
        drain_seconds = triton_drain(pod.longest_request_seconds, vllm=model.family.is_vllm).termination_grace_seconds
        # Nothing to wait for from a GPU node autoscaler when the model takes no GPU.
        growth = NodeGrowth(autoscaler=False) if model.on_cpu else args.node_growth
        replicas = args.min_replicas if args.autoscaler == "none" else None
        applied_spec = deployment_spec(
            serving_sel,
            pod_labels,
            with_gemm_tuning(
                server_pod_spec(model, repository_dir, pod, sizing, budget, affinity=affinity, pod_selector=sel),
                model,
                args.image,
                args.store.k8s_name,
                args.gemm_tuning,
            ),
            progress_deadline_seconds(budget, tuning_seconds, drain_seconds),
            replicas,
            strategy=args.rollout.strategy(),
        )
        deployment = k8s.apps.v1.Deployment(
            f"{name}-deployment-{version}" if version else f"{name}-deployment",
            metadata=object_meta(versioned, ns, {**meta_labels, **version_labels}, placement),
            spec=as_input(applied_spec),
            opts=pulumi.ResourceOptions(
                parent=self,
                provider=target.provider,
                # A T5/GPT-2/GPT-J repository is complete once both its Jobs are (the later one renders it).
                depends_on=[*args.conversion.jobs, args.store.claim],
            ),
        )
        rollout_watch = RolloutWatch(
            f"{name}-rollout",
            RolloutWatchArgs(
                namespace=ns,
                deployment=versioned,
                # The spec applied, not the live generation (an HPA scale bumps that: refresh must stay clean).
                spec_hash=pulumi.Output.from_input(applied_spec).apply(spec_hash),
                deadline_s=60.0 * rollout_timeout_minutes(budget, tuning_seconds, drain_seconds),
                growth=growth,
                # A new version is judged at one pod: its autoscaler moves to it only with the switch, and the
                # handover (or, on a first deploy, the autoscaler) brings it to replicasMin after that.
                min_replicas=min(args.min_replicas, 1) if version else args.min_replicas,
                kubeconfig=target.kubeconfig,
                context=target.context,
            ),
            pulumi.ResourceOptions(parent=self, depends_on=[deployment]),
        )
        candidate: Candidate | None = None
        gate_args: PromotionGateArgs | None = None
        switch = child
        # No room for a candidate: the version rolls in place and serves once ready. Its judge (below, after the
        # Services) asks the user-facing Service once every pod runs it, with a candidate's Job, settings and reach.
        judged_in_place = (
            Candidate(
                model=model.name,
                version=served_version,
                service=base,
                internal_url=ns.apply(lambda n: f"http://{base}.{n}.svc:{HTTP_PORT}"),
                judge_pods=judge_pod_labels(name, model.name, served_version),
                in_place=True,
                rolled=rollout_watch.generation,
            )
            if in_place
            else None
        )
        if version is not None and args.judge is not None:
            candidate = self._candidate(
                name=name, base=base, version=version, args=args, meta_labels=meta_labels, depends_on=[deployment]
            )
            judge = args.judge(
                candidate, pulumi.ResourceOptions(parent=self, depends_on=[rollout_watch, *self._judge_via])
            )
            # Between the judgement and the switch: (canary) a share of the traffic and Prometheus' comparison, then
            # the stable's ready pods pinned in the Services (components.serving.promotion_gate).
            gate_args = PromotionGateArgs(
                namespace=ns,
                model=model.name,
                version=version,
                stable_service=base,
                candidate_service=versioned,
                candidate_deployment=versioned,
                routes=model_route_refs(base, args.edge) if canary is not None and args.edge else (),
                min_replicas=args.min_replicas,
                max_replicas=args.max_replicas,
                # Each handover step waits for a stable pod's drain, then a new pod's start-up.
                replicas_deadline_s=60.0 * rollout_timeout_minutes(budget, tuning_seconds, drain_seconds),
                canary=canary,
                kubeconfig=target.kubeconfig,
                context=target.context,
            )
            gate = PromotionGate(
                f"{name}-promotion-{version}",
                gate_args,
                pulumi.ResourceOptions(parent=self, depends_on=[rollout_watch, judge]),
            )
            # The switch: the user-facing Services select the new version once it has rolled out, been judged and
            # passed the gate.
            switch = pulumi.ResourceOptions.merge(
                child, pulumi.ResourceOptions(depends_on=[rollout_watch, judge, gate])
            )
        service = k8s.core.v1.Service(
            f"{name}-service",
            metadata=object_meta(base, ns, meta_labels, SERVICE_ANNOTATIONS),
            spec=as_input(service_spec(serving_sel)),
            opts=switch,
        )
        pods_service = k8s.core.v1.Service(
            f"{name}-pods-service",
            metadata=object_meta(pods_service_name(base), ns, meta_labels, SERVICE_ANNOTATIONS),
            spec=as_input(pods_service_spec(serving_sel)),
            opts=switch,
        )
        k8s.policy.v1.PodDisruptionBudget(
            f"{name}-pdb", metadata=object_meta(base, ns, meta_labels), spec=as_input(pdb_spec(sel)), opts=child
        )
        edge_pods = tuple(
            (e.controller_namespace, e.controller_pods) for e in (args.ingress, args.edge) if e is not None
        )
        triton_policy = k8s.networking.v1.NetworkPolicy(
            f"{name}-netpol",
            metadata=object_meta(base, ns, meta_labels),
            spec=as_input(
                network_policy_spec(
                    sel,
                    args.client_namespaces,
                    args.prometheus_namespace,
                    gateway_pods=args.gateway_pods,
                    edge_pods=edge_pods,
                    judge_pods=judge_selector(name) if candidate is not None or judged_in_place is not None else None,
                )
            ),
            opts=child,
        )
        in_place_judge: list[pulumi.Resource] = []
        if judged_in_place is not None and args.judge is not None:
            # After the rollout watch: every pod of the model runs the version; the Service and both policies exist.
            judge_policy = self._judge_policy(name=name, base=base, args=args)
            after_the_roll = [rollout_watch, service, triton_policy, judge_policy]
            in_place_judge.append(
                args.judge(judged_in_place, pulumi.ResourceOptions(parent=self, depends_on=after_the_roll))
            )

        ingress_names = self._ingresses(
            name=name, base=base, args=args, meta_labels=meta_labels, child=child, depends_on=[service]
        )
        if args.edge is not None:
            model_routes(
                name,
                base=base,
                namespace=ns,
                labels=meta_labels,
                edge=args.edge,
                model=model.name,
                backends=route_backends(Phase.STABLE, stable=base, candidate=versioned, weight_percent=0),
                # With the canary phase the gate rewrites the routes' weights; a new version re-applies them as
                # declared (the version annotation changes), over what the gate wrote (patchForce).
                annotations={PATCH_FORCE: "true", VERSION_LABEL: version} if canary is not None and version else None,
                opts=pulumi.ResourceOptions(
                    parent=self, provider=target.provider, depends_on=[*target.crd_installers, service]
                ),
            )
        scale_down = args.scale_down_window_seconds or scale_down_window_seconds(budget)
        # Custom resources only after the charts that install their CRDs (pulumi-kubernetes#1712, #3176).
        crd_opts = pulumi.ResourceOptions(
            parent=self, provider=target.provider, depends_on=[*target.crd_installers, service]
        )
        if args.monitoring:
            self._monitoring(
                name=name,
                base=base,
                args=args,
                meta_labels=meta_labels,
                crd_opts=crd_opts,
                child=child,
                max_pending=4 * model.batching.max_batch_size,
            )
        signal = scaling_signal(model, ratio_target=args.ratio_target, waiting_target=args.waiting_target)
        scaler: pulumi.Resource | None = None
        if args.autoscaler == "hpa":
            scaler = k8s.autoscaling.v2.HorizontalPodAutoscaler(
                f"{name}-hpa",
                metadata=object_meta(base, ns, meta_labels),
                spec=as_input(signal_hpa_spec(signal, versioned, args.min_replicas, args.max_replicas, scale_down)),
                # Moves to the new version with the traffic: until then the serving version keeps its autoscaler.
                opts=pulumi.ResourceOptions(
                    parent=self, provider=target.provider, depends_on=[deployment, *([service] if version else [])]
                ),
            )
        elif args.autoscaler == "keda":
            scaler = k8s.apiextensions.CustomResource(
                f"{name}-scaledobject",
                api_version="keda.sh/v1alpha1",
                kind="ScaledObject",
                metadata=object_meta(base, ns, meta_labels),
                spec=ns.apply(
                    lambda n: scaled_object_spec(
                        deployment=versioned,
                        namespace=n,
                        job=base,
                        prometheus_url=args.keda_prometheus_url,
                        ingresses=ingress_names,
                        gateway=GatewayDemand(args.gateway_job, model.name) if args.gateway_job else None,
                        min_replicas=args.min_replicas,
                        max_replicas=args.max_replicas,
                        ratio_target=args.ratio_target,
                        requests_per_replica=args.keda_requests_per_replica,
                        scale_down_window_seconds=scale_down,
                        signal=signal,
                    )
                ),
                opts=pulumi.ResourceOptions.merge(crd_opts, pulumi.ResourceOptions(depends_on=[deployment])),
            )

        if gate_args is not None and version is not None:
            # After the switch and the autoscaler's move to the new version: the candidate grows to the stable's
            # ready count one pod at a time while the stable's pinned pods leave (the capacity's one surge pod).
            PromotionHandover(
                f"{name}-handover-{version}",
                gate_args,
                pulumi.ResourceOptions(
                    parent=self, depends_on=[service, pods_service, *([scaler] if scaler is not None else [])]
                ),
            )

        self.deployment = deployment
        self.rollout_watch = rollout_watch
        # The gateway's configuration waits for these: a version judged in place reaches it only once judged right.
        self.switched = (service, pods_service, *in_place_judge)
        self.version = version
        self.candidate = candidate
        self.judged_in_place = judged_in_place
        self.deployment_name = pulumi.Output.from_input(versioned)
        self.service_name = pulumi.Output.from_input(base)
        self.internal_url = ns.apply(lambda n: f"http://{base}.{n}.svc:{HTTP_PORT}")
        self.grpc_address = ns.apply(lambda n: f"{pods_service_name(base)}.{n}.svc:{GRPC_PORT}")
        self.pod_selector = dict(sel)
        self.scales_to_zero = args.min_replicas == 0
        http_url, grpc_url = (
            endpoint_urls(args.ingress)
            if args.ingress is not None
            else edge_urls(args.edge)
            if args.edge is not None
            else (None, None)
        )
        self.endpoint = pulumi.Output.from_input(http_url)
        self.grpc_endpoint = pulumi.Output.from_input(grpc_url)
        served_rule = waiting_adapter_rule() if model.family.is_vllm else adapter_rule()
        self.adapter_rules = pulumi.Output.from_input(json.dumps({"custom": [served_rule]}, sort_keys=True))
        self.startup_budget_seconds = pulumi.Output.from_input(budget.seconds)
        self.gemm_tuning: pulumi.Output[dict[str, str]] = rollout_watch.gemm_tuning
        self.startup: pulumi.Output[dict[str, dict[str, Any]]] = rollout_watch.startup
        self.register_outputs(
            {
                "deployment_name": self.deployment_name,
                "version": self.version,
                "service_name": self.service_name,
                "internal_url": self.internal_url,
                "grpc_address": self.grpc_address,
                "endpoint": self.endpoint,
                "grpc_endpoint": self.grpc_endpoint,
                "adapter_rules": self.adapter_rules,
                "startup_budget_seconds": self.startup_budget_seconds,
                "gemm_tuning": self.gemm_tuning,
                "startup": self.startup,
            }
        )

    def _candidate(
        self,
        *,
        name: str,
        base: str,
        version: str,
        args: TritonServiceArgs,
        meta_labels: dict[str, str],
        depends_on: list[pulumi.Resource],
    ) -> Candidate:
        """The version's own Service, which its judge (a Job in the cluster) asks, and the judge's NetworkPolicy."""
        target = self._target
        ns = target.namespace
        versioned = versioned_name(base, version)
        version_labels = {**meta_labels, VERSION_LABEL: version}
        opts = pulumi.ResourceOptions(parent=self, provider=target.provider, depends_on=depends_on)
        candidate_service = k8s.core.v1.Service(
            f"{name}-candidate-{version}",
            metadata=object_meta(versioned, ns, version_labels, SERVICE_ANNOTATIONS),
            spec=as_input(service_spec(version_selector(selector("triton", name), version))),
            opts=opts,
        )
        judge_policy = self._judge_policy(name=name, base=base, args=args)
        self._judge_via: list[pulumi.Resource] = [candidate_service, judge_policy]
        return Candidate(
            model=args.conversion.model.name,
            version=version,
            service=versioned,
            internal_url=ns.apply(lambda n: f"http://{versioned}.{n}.svc:{HTTP_PORT}"),
            judge_pods=judge_pod_labels(name, args.conversion.model.name, version),
        )

    def _judge_policy(self, *, name: str, base: str, args: TritonServiceArgs) -> k8s.networking.v1.NetworkPolicy:
        """The judge's pods (a Job, ``components.serving.judge_job``), a candidate's or an in-place version's: they
        reach this model's Triton on 8000 and DNS, nothing else; the model's Triton admits them by label
        (``network_policy_spec``). No route at the edge."""
        target = self._target
        return k8s.networking.v1.NetworkPolicy(
            f"{name}-judge-netpol",
            metadata=object_meta(
                f"{base}-judge", target.namespace, labels(JUDGE_COMPONENT, name, args.conversion.model.name)
            ),
            spec=as_input(judge_network_policy_spec(judge_selector(name), selector("triton", name))),
            opts=pulumi.ResourceOptions(parent=self, provider=target.provider),
        )

    def _ingresses(
        self,
        *,
        name: str,
        base: str,
        args: TritonServiceArgs,
        meta_labels: dict[str, str],
        child: pulumi.ResourceOptions,
        depends_on: list[pulumi.Resource],
    ) -> tuple[str, ...]:
        """HTTP (and gRPC when TLS is on) Ingresses; returns their names."""
        ing = args.ingress
        if ing is None:
            return ()
        ns = self._target.namespace
        basic_secret = basic_auth_secret(name, base=base, namespace=ns, labels=meta_labels, ingress=ing, opts=child)
        tls = tls_secret_name(ing, base)
        opts = pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=depends_on))
        made = [f"{base}-http"]
        k8s.networking.v1.Ingress(
            f"{name}-http",
            metadata=object_meta(
                made[0],
                ns,
                meta_labels,
                ingress_annotations(
                    ing, basic_secret, grpc=False, issue_certificate=True, streams=args.conversion.model.decoupled
                ),
            ),
            spec=as_input(ingress_spec(ing, self._target.ingress_class, base, grpc=False, tls_secret=tls)),
            opts=opts,
        )
        if grpc_exposed(ing):
            made.append(f"{base}-grpc")
            k8s.networking.v1.Ingress(
                f"{name}-grpc",
                metadata=object_meta(
                    made[1], ns, meta_labels, ingress_annotations(ing, basic_secret, grpc=True, issue_certificate=False)
                ),
                spec=as_input(ingress_spec(ing, self._target.ingress_class, base, grpc=True, tls_secret=tls)),
                opts=opts,
            )
        return tuple(made)

    def _monitoring(
        self,
        *,
        name: str,
        base: str,
        args: TritonServiceArgs,
        meta_labels: dict[str, str],
        crd_opts: pulumi.ResourceOptions,
        child: pulumi.ResourceOptions,
        max_pending: int,
    ) -> None:
        """ServiceMonitor + PrometheusRule (custom resources, after the CRD installers) and the dashboard, for the
        model's engine (a vLLM model's signals are vLLM's: ``components.serving.monitoring.rule_spec_for``)."""
        ns = self._target.namespace
        model = args.conversion.model
        cr_labels = {**meta_labels, **args.monitoring_labels}
        k8s.apiextensions.CustomResource(
            f"{name}-servicemonitor",
            api_version="monitoring.coreos.com/v1",
            kind="ServiceMonitor",
            metadata=object_meta(base, ns, cr_labels),
            spec=ns.apply(lambda n: service_monitor_spec(n, meta_labels)),
            opts=crd_opts,
        )
        k8s.apiextensions.CustomResource(
            f"{name}-rules",
            api_version="monitoring.coreos.com/v1",
            kind="PrometheusRule",
            metadata=object_meta(base, ns, cr_labels),
            spec=ns.apply(
                lambda n: rule_spec_for(
                    model,
                    n,
                    base,
                    ratio_target=args.ratio_target,
                    ttft_p95_target_s=args.ttft_p95_target_s,
                    max_pending=max_pending,
                    ensembles=(RepoNames.of(model).ensemble,),
                    for_=args.alert_for,
                )
            ),
            opts=crd_opts,
        )
        k8s.core.v1.ConfigMap(
            f"{name}-dashboard",
            metadata=object_meta(
                f"{base}-dashboard", args.dashboard_namespace or ns, {**meta_labels, **args.dashboard_labels}
            ),
            data=ns.apply(
                lambda n: {
                    f"{base}.json": dashboard_json_for(
                        model,
                        n,
                        base,
                        f"Triton: {base} ({n})",
                        args.ttft_p95_target_s,
                        waiting_target=args.waiting_target,
                    )
                }
            ),
            opts=child,
        )
