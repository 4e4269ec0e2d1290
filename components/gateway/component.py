"""Gateway: the OpenAI-compatible HTTP API (``tritonft gateway``) in front of every model of the stack.

Which models it serves: every generator (``/v1/completions``, chat for the GPT families) and every embedding model
(``/v1/embeddings``), each through its own Triton service; a classifier is left out (OpenAI's API has no
classification route; it answers on its KServe V2 endpoint, ``/v2/models/<name>/infer``).

Children: a ConfigMap of the served generators' specs, the Deployment (the tools image running ``python -m tritonft
gateway``, on CPU nodes), its Service, PodDisruptionBudget and NetworkPolicy, an HPA when ``max_replicas`` is above
``min_replicas``, an HTTPRoute (Gateway API) or an Ingress serving ``/v1`` on the stack's base host with the same TLS
and authentication as the models' ``/v2`` endpoints, and a ServiceMonitor when monitoring is on.

Image: the tools image, which already has ``tritonft`` and the gateway's dependencies and is built and pinned by
digest for the conversion Jobs; a slim image of its own would save pull time on a pod that starts rarely, at the
cost of a second build, registry repository and digest to keep in step with the same source.

Autoscaling on CPU, not on requests: a request costs the gateway CPU while it parses, maps and relays (one event
loop per pod), and nothing while it waits for the model, so in-flight or per-second request counts say more about
how long the models generate than about the gateway's load (Triton scales on its own queue:compute ratio). CPU
needs only the resource metrics API (metrics-server), not the custom-metrics adapter.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Any, cast

import pulumi
import pulumi_kubernetes as k8s

from components.common.edge import EdgeArgs, validate_edge
from components.common.edge import endpoint_urls as edge_urls
from components.common.exposure import api_route, basic_auth_secret
from components.common.handoffs import ConvertedModel, ModelVolume, ServedModel
from components.common.ingress import (
    NGINX,
    IngressArgs,
    endpoint_urls,
    ingress_annotations,
    ingress_spec,
    tls_secret_name,
    validate_ingress,
)
from components.common.layout import SERVICE_ANNOTATIONS, as_input, dns_label, labels, object_meta
from components.common.target import ClusterTarget
from components.common.workload import deployment_spec, pdb_spec
from components.gateway.spec import (
    GATEWAY_PORT,
    SPECS_ANNOTATION,
    Backend,
    GatewayPod,
    cpu_hpa_spec,
    gateway_network_policy_spec,
    gateway_pod_spec,
    gateway_route,
    gateway_rule_spec,
    gateway_selector,
    gateway_service_monitor_spec,
    gateway_service_spec,
    longest_deadline_seconds,
    specs_data,
    specs_digest,
)
from tritonft.errors import UserError
from tritonft.spec import ModelSpec

API_PATH = "/v1"
PROGRESS_DEADLINE_SECONDS = 300


@dataclass(frozen=True)
class GatewayBackend:
    """One served model and the Triton service that serves it."""

    model: ModelSpec
    service: ServedModel
    conversion: ConvertedModel | None = None
    """The model's download Job and store paths: required for a vLLM model, whose checkpoint directory (its
    ``tokenizer_config.json``, the chat template) the gateway mounts from the store once that Job has completed."""


def needs_checkpoint(backend: GatewayBackend) -> bool:
    """The gateway reads ``backend``'s checkpoint (a vLLM model: chat through its own template)."""
    return backend.model.family.is_vllm


def served_backends(backends: Sequence[GatewayBackend]) -> list[GatewayBackend]:
    """The backends the gateway serves: the generators and embedding models, not the classifiers."""
    return [b for b in backends if gateway_route(b.model) is not None]


@dataclass(frozen=True)
class GatewayArgs:
    """How the stack's OpenAI-compatible API is run and exposed."""

    target: ClusterTarget
    image: pulumi.Input[str]
    """The tools image (``tritonft`` installed), pinned by digest."""
    backends: Sequence[GatewayBackend]
    """Every model of the stack; the classifiers among them are not served under ``/v1`` (:func:`served_backends`)."""
    store: ModelVolume | None = None
    """The model store: required when a vLLM model is served (its checkpoint directory is mounted read-only)."""
    ingress: IngressArgs | None = None
    """Exposure of ``/v1`` through an Ingress (the stack's base host, same TLS/auth as the models)."""
    edge: EdgeArgs | None = None
    """Exposure of ``/v1`` through a Gateway API HTTPRoute; None with ``ingress`` None = in-cluster only."""
    min_replicas: int = 2
    max_replicas: int = 4
    """Above ``min_replicas``: an HPA on CPU between the two."""
    cpu: str = "1"
    """CPU request and limit of each pod (one event loop uses at most one core)."""
    memory: str = "512Mi"
    """Memory request and limit of each pod."""
    deadline_seconds: int = 60
    """The base of each model's deadline (``tritonft gateway --deadline``; a vLLM model's adds its longest answer:
    :func:`components.gateway.spec.model_deadline_seconds`); the longest of them at most the proxy's timeout."""
    coalesce: bool = True
    """Merge concurrent same-parameter completions into one Triton call (``tritonft gateway --coalesce``)."""
    max_in_flight_per_client: int = 0
    """Each API client's requests in flight per pod (``maxConcurrentPerClient``); 0 = no limit (no API keys)."""
    key_expiries: tuple[tuple[str, date], ...] = ()
    """(key id, ``expires``) of each API key the edge accepts that has a day: the gateway refuses it from that day
    on, without waiting for the ``up`` that drops it from the edge's Secret."""
    monitoring: bool = False
    """Create a ServiceMonitor for ``/metrics`` (needs the prometheus-operator CRDs)."""
    prometheus_namespace: str = "monitoring"
    """Namespace of Prometheus: the NetworkPolicy lets it scrape ``/metrics``."""
    monitoring_labels: dict[str, str] = field(default_factory=lambda: {"release": "kube-prometheus-stack"})
    """Labels Prometheus selects ServiceMonitors by (kube-prometheus-stack: ``release``)."""


def validate_gateway(args: GatewayArgs) -> list[str]:
    """Every problem with ``args``, each naming the field and the fix (empty when valid)."""
    problems: list[str] = []
    names = [b.model.name for b in args.backends]
    if not names:
        problems.append("backends is empty: the gateway needs at least one served model")
    elif not served_backends(args.backends):
        problems.append(
            f"backends: no model the gateway can serve: {', '.join(names)} classify text, and OpenAI's API has no "
            "classification route (call them on their KServe V2 endpoint, /v2/models/<name>/infer); turn the "
            "gateway off (gateway: false) or serve a generator or an embedding model too"
        )
    if len(set(names)) != len(names):
        problems.append(f"backends: each model once, got {names}")
    for b in served_backends(args.backends):
        if needs_checkpoint(b) and (b.conversion is None or args.store is None):
            problems.append(
                f"backends: {b.model.name!r} is served by vLLM: give its conversion (GatewayBackend.conversion) and "
                "the model store (store), so the gateway mounts its tokenizer_config.json for chat"
            )
    if args.min_replicas < 1:
        problems.append(f"min_replicas must be at least 1 (got {args.min_replicas})")
    if args.max_replicas < args.min_replicas:
        problems.append(f"max_replicas ({args.max_replicas}) must be >= min_replicas ({args.min_replicas})")
    if args.deadline_seconds < 1:
        problems.append(f"deadline_seconds must be at least 1 (got {args.deadline_seconds})")
    longest = longest_deadline_seconds([b.model for b in served_backends(args.backends)], args.deadline_seconds)
    for proxy, timeout in (
        ("the ingress timeout", args.ingress.request_timeout_seconds if args.ingress is not None else None),
        ("the edge's request timeout", args.edge.request_timeout_seconds if args.edge is not None else None),
    ):
        if timeout is not None and longest > timeout:
            problems.append(
                f"the longest deadline of a model's requests ({longest} s: deadline_seconds {args.deadline_seconds}"
                f" plus a vLLM model's longest answer) is longer than {proxy} ({timeout} s): the proxy would cut "
                "requests first; lower deadline_seconds or raise the proxy's timeout"
            )
    if args.ingress is not None:
        problems += validate_ingress(args.ingress)
    if args.edge is not None:
        problems += validate_edge(args.edge)
        if args.ingress is not None:
            problems.append("ingress and edge: expose /v1 through an Ingress or a Gateway API route, not both")
    if args.monitoring and "prometheus-operator" not in args.target.addons:
        problems.append("monitoring is on but the cluster has no 'prometheus-operator' add-on (ServiceMonitor CRD)")
    return problems


class Gateway(pulumi.ComponentResource):
    """``tritonft gateway`` for every model of the stack: autoscaled, hardened, behind the stack's ingress."""

    deployment_name: pulumi.Output[str]
    """Name of the gateway Deployment."""
    service_name: pulumi.Output[str]
    """Name of the ClusterIP Service (port 8080)."""
    internal_url: pulumi.Output[str]
    """In-cluster base URL of the API, e.g. ``http://dev-gateway.triton.svc:8080/v1``."""
    endpoint: pulumi.Output[str | None]
    """Public base URL of the OpenAI API (``https://<host>/v1``; None without an ingress)."""

    def __init__(self, name: str, args: GatewayArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        problems = validate_gateway(args)
        if problems:  # before anything registers: a bad config never reaches the engine
            raise UserError(f"Gateway {name!r}:\n  " + "\n  ".join(problems))
        super().__init__("triton-ft:serving:Gateway", name, {}, opts)

        target = args.target
        self._target = target
        ns = target.namespace
        base = dns_label(name)
        sel = gateway_selector(name)
        meta_labels = labels("gateway", name)
        served = served_backends(args.backends)
        models = [b.model for b in served]
        child = pulumi.ResourceOptions(parent=self, provider=target.provider)

        # What the gateway says of each model (its spec, limits, chat template, mounted checkpoint) follows the
        # version the user-facing Services select: it changes only once they switched, after the new version's judge
        # and promotion gate passed (and never after a failed judgement: `up` stops before). A version that rolled in
        # place (no room for a candidate) reaches it only once its judge passed, right after the roll.
        switched = [r for b in served for r in b.service.switched]
        config_map = k8s.core.v1.ConfigMap(
            f"{name}-specs",
            metadata=object_meta(f"{base}-specs", ns, meta_labels),
            data=specs_data(models),
            opts=pulumi.ResourceOptions(parent=self, provider=target.provider, depends_on=switched),
        )
        pod = GatewayPod(
            image=args.image,
            config_map=f"{base}-specs",
            cpu=args.cpu,
            memory=args.memory,
            deadline_seconds=args.deadline_seconds,
            coalesce=args.coalesce,
            max_in_flight_per_client=args.max_in_flight_per_client,
            key_expiries=args.key_expiries,
            node_selector=dict(target.cpu_node_selector),
            store_claim=args.store.k8s_name if args.store is not None else None,
            priority_class=target.priority.serving if target.priority else None,
        )
        reads_store = [b for b in served if needs_checkpoint(b)]
        backends = pulumi.Output.all(*(b.service.grpc_address for b in served)).apply(
            lambda addresses: [
                Backend(
                    b.model,
                    address,
                    b.service.pod_selector,
                    b.service.scales_to_zero,
                    b.conversion.paths.checkpoint_subpath if b.conversion is not None and needs_checkpoint(b) else None,
                )
                for b, address in zip(served, addresses, strict=True)
            ]
        )
        autoscaled = args.max_replicas > args.min_replicas
        digest = specs_digest(models)

        def spec_of(resolved: list[Backend]) -> dict[str, Any]:
            spec = deployment_spec(
                sel,
                {**meta_labels, **sel},
                gateway_pod_spec(resolved, pod, sel),
                PROGRESS_DEADLINE_SECONDS,
                None if autoscaled else args.min_replicas,
                strategy={"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            )
            spec["template"]["metadata"]["annotations"] = {SPECS_ANNOTATION: digest}
            return spec

        deployment = k8s.apps.v1.Deployment(
            f"{name}-deployment",
            metadata=object_meta(base, ns, meta_labels),
            spec=cast(Any, backends.apply(spec_of)),
            # After the models' servers have rolled out: a gateway is ready only once some Triton answers. A vLLM
            # model's download Job has completed before its checkpoint is mounted (as the Triton pods wait for it).
            # After the Services switched: the pods' specs and mounted checkpoints are the serving version's.
            opts=pulumi.ResourceOptions(
                parent=self,
                provider=target.provider,
                depends_on=[
                    config_map,
                    *(b.service.rollout_watch for b in served),
                    *switched,
                    *(b.conversion.job for b in reads_store if b.conversion is not None),
                    *([args.store.claim] if reads_store and args.store is not None else []),
                ],
            ),
        )
        service = k8s.core.v1.Service(
            f"{name}-service",
            metadata=object_meta(base, ns, meta_labels, SERVICE_ANNOTATIONS),
            spec=as_input(gateway_service_spec(sel)),
            opts=child,
        )
        k8s.policy.v1.PodDisruptionBudget(
            f"{name}-pdb", metadata=object_meta(base, ns, meta_labels), spec=as_input(pdb_spec(sel)), opts=child
        )
        clients = tuple((e.controller_namespace, e.controller_pods) for e in (args.ingress, args.edge) if e is not None)
        k8s.networking.v1.NetworkPolicy(
            f"{name}-netpol",
            metadata=object_meta(base, ns, meta_labels),
            spec=cast(
                Any,
                backends.apply(
                    lambda resolved: gateway_network_policy_spec(sel, resolved, clients, args.prometheus_namespace)
                ),
            ),
            opts=child,
        )
        if autoscaled:
            k8s.autoscaling.v2.HorizontalPodAutoscaler(
                f"{name}-hpa",
                metadata=object_meta(base, ns, meta_labels),
                spec=as_input(cpu_hpa_spec(base, args.min_replicas, args.max_replicas)),
                opts=pulumi.ResourceOptions(parent=self, provider=target.provider, depends_on=[deployment]),
            )
        if args.ingress is not None:
            self._ingress(name, base=base, ing=args.ingress, meta_labels=meta_labels, child=child, service=service)
        if args.edge is not None:
            api_route(
                name,
                base=base,
                namespace=ns,
                labels=meta_labels,
                edge=args.edge,
                service=base,
                port=GATEWAY_PORT,
                path=API_PATH,
                opts=pulumi.ResourceOptions(
                    parent=self, provider=target.provider, depends_on=[*target.crd_installers, service]
                ),
            )
        if args.monitoring:
            k8s.apiextensions.CustomResource(
                f"{name}-servicemonitor",
                api_version="monitoring.coreos.com/v1",
                kind="ServiceMonitor",
                metadata=object_meta(base, ns, {**meta_labels, **args.monitoring_labels}),
                spec=ns.apply(lambda n: gateway_service_monitor_spec(n, meta_labels)),
                opts=pulumi.ResourceOptions(
                    parent=self, provider=target.provider, depends_on=[*target.crd_installers, service]
                ),
            )
            k8s.apiextensions.CustomResource(
                f"{name}-rules",
                api_version="monitoring.coreos.com/v1",
                kind="PrometheusRule",
                metadata=object_meta(base, ns, {**meta_labels, **args.monitoring_labels}),
                spec=ns.apply(lambda n: gateway_rule_spec(n, base)),
                opts=pulumi.ResourceOptions(parent=self, provider=target.provider, depends_on=target.crd_installers),
            )

        self.deployment_name = pulumi.Output.from_input(base)
        self.service_name = pulumi.Output.from_input(base)
        self.internal_url = ns.apply(lambda n: f"http://{base}.{n}.svc:{GATEWAY_PORT}{API_PATH}")
        public = (
            endpoint_urls(args.ingress)[0] + API_PATH
            if args.ingress is not None
            else edge_urls(args.edge)[0] + API_PATH
            if args.edge is not None
            else None
        )
        self.endpoint = pulumi.Output.from_input(public)
        self.register_outputs(
            {
                "deployment_name": self.deployment_name,
                "service_name": self.service_name,
                "internal_url": self.internal_url,
                "endpoint": self.endpoint,
            }
        )

    def _ingress(
        self,
        name: str,
        *,
        base: str,
        ing: IngressArgs,
        meta_labels: dict[str, str],
        child: pulumi.ResourceOptions,
        service: k8s.core.v1.Service,
    ) -> None:
        """``/v1`` on the base host; SSE streams go out as the gateway writes them (no proxy buffering)."""
        ns = self._target.namespace
        basic_secret = basic_auth_secret(name, base=base, namespace=ns, labels=meta_labels, ingress=ing, opts=child)
        annotations = ingress_annotations(ing, basic_secret, grpc=False, issue_certificate=True)
        annotations[f"{NGINX}/proxy-buffering"] = "off"
        k8s.networking.v1.Ingress(
            f"{name}-ingress",
            metadata=object_meta(base, ns, meta_labels, annotations),
            spec=as_input(
                ingress_spec(
                    ing,
                    self._target.ingress_class,
                    base,
                    grpc=False,
                    tls_secret=tls_secret_name(ing, base),
                    path=API_PATH,
                )
            ),
            opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[service])),
        )
