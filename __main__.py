"""Composition root of the triton-ft Pulumi program: load settings, build the components in order, export."""

from __future__ import annotations

import dataclasses
from typing import Any

import pulumi
import pulumi_aws as aws

from components import args
from components.common.exposure import EdgeObjects
from components.common.priority import priority_classes
from components.common.target import ClusterTarget
from components.gateway import Gateway, GatewayBackend
from components.models.conversion import ModelConversion
from components.models.store import ModelStore
from components.platform.aws.platform import AwsPlatform
from components.platform.cluster import ExistingCluster
from components.platform.image import TritonImage
from components.probe import IntegrationProbe
from components.probe.in_cluster import InClusterJudge
from components.serving.promotion import Candidate
from components.serving.service import Judge, TritonService
from components.settings.pulumi_config import settings_from_pulumi
from tritonft.engines import engine_for
from tritonft.errors import UserError
from tritonft.spec import ModelSpec

try:
    settings = settings_from_pulumi()
except UserError as exc:
    # RunError ends `pulumi up`/`preview` with the message only: no traceback for a configuration mistake.
    raise pulumi.RunError(str(exc)) from None

config = pulumi.Config()
hf_token = config.get_secret("hfToken")
htpasswd = config.get_secret("ingressHtpasswd")
name = settings.stack
for warning in settings.warnings:
    pulumi.log.warn(warning)

target: ClusterTarget
aws_provider: aws.Provider | None
if settings.cluster.platform == "aws":
    try:
        platform = AwsPlatform(name, args.aws_platform_args(settings))
    except UserError as exc:  # e.g. the account's GPU quota, read before any resource: the message, no traceback
        raise pulumi.RunError(str(exc)) from None
    target, aws_provider = platform.target, platform.aws_provider
    pulumi.export("clusterName", platform.cluster_name)
    pulumi.export("kubeconfig", platform.kubeconfig)
else:
    target, aws_provider = ExistingCluster(name, args.existing_cluster_args(settings)).target, None
target = priority_classes(name, target, settings.namespace)

edge: EdgeObjects | None = None
edge_objects = args.edge_objects_args(settings, target)
if edge_objects is not None:
    edge = EdgeObjects(f"{name}-edge", edge_objects)
    if edge_objects.api_key_auth:
        # Secret outputs: `pulumi stack output apiKeys --show-secrets` shows them; nothing prints them otherwise.
        pulumi.export("apiKeys", edge.api_keys)

images = TritonImage(f"{name}-images", args.triton_image_args(settings, aws_provider))
store = ModelStore(f"{name}-store", args.model_store_args(settings, target))

release_digest = pulumi.Output.concat(images.server_image, "|", images.tools_image)


def judge_for(model: ModelSpec) -> Judge:
    """The in-cluster judge of ``model``'s new version (``components.serving.judge_job``): a Job asking what the probe
    asks of the candidate's own Service, its verdict read before the Services switch; or, for a version that rolled in
    place (no room for a candidate), of the user-facing Service right after the roll."""

    def judge(candidate: Candidate, opts: pulumi.ResourceOptions) -> InClusterJudge:
        probe = args.judge_probe_args(settings, candidate, model, release_digest, edge=edge)
        return InClusterJudge(
            f"{name}-{model.name}-judge-{candidate.version}",
            args.in_cluster_judge_args(
                settings, target, candidate, probe, images.tools_image, model=model, store_claim=store.k8s_name
            ),
            opts,
        )

    return judge


endpoints: dict[str, pulumi.Output[str | None]] = {}
services: list[tuple[ModelSpec, TritonService]] = []
conversions: dict[str, ModelConversion] = {}
for model in settings.models:
    conversion = ModelConversion(
        f"{name}-{model.name}-convert",
        args.model_conversion_args(
            target,
            store,
            model,
            images.tools_image,
            hf_token,
            verify_generation=settings.probe.verify_generation,
            bleu_threshold=settings.probe.bleu_threshold,
            hf_token_secret=settings.token_secrets.get(model.name),
        ),
    )
    conversions[model.name] = conversion
    service_args = args.triton_service_args(
        settings,
        target=target,
        store=store,
        conversion=conversion,
        server_image=images.server_image_for(engine_for(model.family).name),
        htpasswd=htpasswd,
    )
    if args.judged_before_the_switch(settings, model):
        # Judged promotion: each new serving version is judged in the cluster before the Services switch to it
        # (without room for a candidate: right after it rolled in place, failing `up` before the gateway moves).
        service_args = dataclasses.replace(service_args, judge=judge_for(model))
    service = TritonService(f"{name}-{model.name}", service_args)
    endpoints[model.name] = service.endpoint
    services.append((model, service))

gateway: Gateway | None = None
if settings.serving.gateway.enabled:
    gateway = Gateway(
        args.gateway_name(settings),
        args.gateway_args(
            settings,
            target=target,
            backends=[GatewayBackend(model, service, conversions[model.name]) for model, service in services],
            store=store,
            tools_image=images.tools_image,
            htpasswd=htpasswd,
        ),
    )
    pulumi.export("openaiBaseUrl", gateway.endpoint)

probes: dict[str, IntegrationProbe] = {}
if settings.probe.enabled:
    for model, service in services:
        probes[model.name] = IntegrationProbe(
            f"{name}-{model.name}-probe",
            args.integration_probe_args(
                settings,
                service,
                model,
                # Both digests: a new tools image rolls the gateway and re-renders repositories, so it is judged too.
                release_digest,
                gateway.endpoint if gateway is not None else None,
                edge=edge,
            ),
            pulumi.ResourceOptions(depends_on=[service, *([gateway] if gateway is not None else [])]),
        )

served = {model.name: service for model, service in services}
encoders = {model.name for model, _ in services if model.encoder is not None}
pulumi.export("environment", settings.environment)
pulumi.export("namespace", target.namespace)
pulumi.export("serverImage", images.server_image)
pulumi.export("toolsImage", images.tools_image)
pulumi.export("models", [m.name for m in settings.models])
pulumi.export("endpoints", endpoints)
pulumi.export("edgeHosts", args.edge_hosts(settings))
pulumi.export(
    "probe",
    {
        model: {
            "ok": p.ok,
            "status": p.model_status,
            # An encoder's: its first similarity triple's cosines, or its first text's label and score.
            "sampleAnswer": p.sample_answers,
            "latencyMs": p.latency_ms,
            # What each Triton pod's GEMM tuning did when `up` rolled it out: tuned, cached, or fallback (FT defaults).
            # FasterTransformer's only: an encoder (ONNX Runtime) has none.
            **({} if model in encoders else {"gemmTuning": served[model].gemm_tuning}),
        }
        for model, p in probes.items()
    },
)
# Each model's Triton pods' start-up budget when `up` rolled them out: seconds per stage (scheduled, init, started,
# ready, total), what the API says inside them (node_provisioned, image_pull, gemm_tuning) and Triton's own model
# loads (`tritonft startup-budget` prints the same for a live cluster at any time).
pulumi.export("startupBudget", {model.name: service.startup for model, service in services})
# Each model that scales to zero: its wake from zero timed by the probe end to end through the gateway (request at zero
# replicas -> first judged answer), when the probe found it asleep (tritonft.probe.wake; the pods' stages are above).


def wake_of(model: str, probe: IntegrationProbe) -> pulumi.Output[dict[str, Any]]:
    """The probe's timing of ``model``'s wake, or ``{"timed": false}`` when it timed none (no gateway, a classifier)."""
    return probe.wake.apply(lambda wakes: (wakes or {}).get(model) or {"timed": False})


pulumi.export("wakeFromZero", {m: wake_of(m, p) for m, p in probes.items() if served[m].scales_to_zero})
