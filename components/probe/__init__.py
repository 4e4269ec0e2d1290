"""``IntegrationProbe``: a dynamic resource that probes the deployed endpoint during ``pulumi up``.

It runs :func:`tritonft.probe.run_probe` (server live/ready, each model ready, the served contract, a real inference
judged per family — an encoder on its embeddings' width, norm and similarity order, or on its expected labels —,
latency p50/p95, and the same judged prompts through the OpenAI gateway when the stack runs one: ``/v1/completions``,
or ``/v1/embeddings`` for an embedding model) when created and whenever its inputs change, and exports the results as
outputs. A failed probe raises, which fails the ``up`` with the probe's reasons (a failed create leaves no resource;
a failed update keeps the previous state).

It re-runs when ``trigger`` changes: a digest of the image digest, every model revision and the serving config
(see :func:`probe_trigger`), so a new image, a new model revision or a changed ``config.pbtxt`` is verified, and an
unchanged stack shows no diff.

This module is import-safe (classes and functions only, no resources at import). Pulumi pickles the provider *by
reference* (``components.probe.IntegrationProbeProvider``), so the dynamic-provider host re-imports this module:
never rename or move it while stacks reference it (pulumi-practice.md §2.1).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pulumi
from pulumi.dynamic import CheckFailure, CheckResult, CreateResult, DiffResult, ResourceProvider, UpdateResult

from tritonft.probe.contract import TextContract
from tritonft.probe.endpoint import COMPARED_INPUTS, Protocol
from tritonft.probe.expectations import DEFAULT_BLEU_THRESHOLD
from tritonft.probe.in_cluster import config_from_props
from tritonft.probe.report import ModelReport, ProbeReport
from tritonft.probe.runner import DEFAULT_CALL_TIMEOUT_S, DEFAULT_LATENCY_REQUESTS, ModelTarget, ProbeConfig
from tritonft.spec import ModelSpec

if TYPE_CHECKING:
    from components.settings.model import EncoderProbe

DEFAULT_PROBE_DEADLINE_S = 900.0
"""Long enough for a rollout: new pods pull the image and load the weights before they answer."""


OUTPUT_KEYS = ("ok", "model_status", "sample_answers", "latency_ms", "wake", "report")

_UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"  # pulumi.runtime.rpc.UNKNOWN: a value known only after apply


class ProbeFailedError(Exception):
    """The deployed endpoint failed the probe; the message lists each failed check and why."""


def probe_trigger(image_digest: str | None, model_revisions: Mapping[str, str], serving_config: str | None) -> str:
    """A stable digest of what a release changes: the image, every model revision and the serving config."""
    material = json.dumps(
        {"image": image_digest, "revisions": dict(sorted(model_revisions.items())), "config": serving_config},
        sort_keys=True,
    )
    return "sha256:" + hashlib.sha256(material.encode()).hexdigest()


def _config_from_props(props: Mapping[str, Any]) -> ProbeConfig:
    """The probe's settings from its inputs (the reading the in-cluster judge's Job makes of the same inputs)."""
    return config_from_props(props)


def _probe(props: Mapping[str, Any]) -> ProbeReport:
    """The network step (tests replace it): run every check against the endpoint described by ``props``."""
    from tritonft.probe.runner import run_probe

    return run_probe(_config_from_props(props))


def outputs_of(report: ProbeReport) -> dict[str, Any]:
    """The resource outputs derived from a report (plain JSON values)."""
    return {
        "ok": report.ok,
        "model_status": {m.name: str(m.status) for m in report.models},
        "sample_answers": {m.name: m.sample_answer for m in report.models if m.sample_answer is not None},
        "latency_ms": {m.name: _latency_ms(m) for m in report.models if m.latency},
        # A model that scales to zero: its wake through the gateway (tritonft.probe.wake), when the probe timed one.
        "wake": {m.name: m.wake.to_output() for m in report.models if m.wake is not None},
        "report": report.to_dict(),
    }


def _latency_ms(model: ModelReport) -> dict[str, float]:
    """``{"p50", "p95"}`` to the whole answer; a streaming model's also ``first_p50``/``first_p95``: to its first
    response (time to first token), ``p50``/``p95`` being to its last."""
    assert model.latency is not None
    out = {"p50": model.latency.p50_ms, "p95": model.latency.p95_ms}
    if model.first_response_latency is not None:
        out |= {"first_p50": model.first_response_latency.p50_ms, "first_p95": model.first_response_latency.p95_ms}
    return out


def _contains_unknown(value: Any) -> bool:
    if isinstance(value, str):
        return value == _UNKNOWN
    if isinstance(value, Mapping):
        return any(_contains_unknown(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(_contains_unknown(v) for v in value)
    return False


def headers_from_environment(header_env: Mapping[str, str]) -> dict[str, str]:
    """Header values read from the environment of ``pulumi up`` (so credentials never enter the state)."""
    missing = sorted(var for var in header_env.values() if not os.environ.get(var))
    if missing:
        raise ProbeFailedError(
            f"integration probe needs {', '.join(missing)} in the environment of `pulumi up` (the ingress requires "
            'authentication), e.g. TRITONFT_PROBE_AUTHORIZATION="Basic $(printf USER:PASS | base64)"; or set '
            "probe: false"
        )
    return {header: os.environ[var] for header, var in header_env.items()}


class IntegrationProbeProvider(ResourceProvider):
    """check/diff/create/update/delete for :class:`IntegrationProbe` (no remote state: delete is a no-op)."""

    serialize_as_secret_always = False
    """The provider object captures nothing secret; auth headers travel as a secret *input*."""

    def check(self, _olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        if any(_contains_unknown(news.get(k)) for k in ("endpoint", "models", "protocol", "gateway_url")):
            return CheckResult(news, [])  # preview: validated again once the values are known
        try:
            config = _config_from_props(news)
        except (KeyError, TypeError, ValueError) as exc:
            return CheckResult(news, [CheckFailure("models", f"malformed probe inputs: {exc}")])
        failures = [CheckFailure("endpoint" if key == "url" else key, why) for key, why in config.problems()]
        return CheckResult(news, failures)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        changed = [k for k in COMPARED_INPUTS if olds.get(k) != news.get(k)]
        return DiffResult(changes=bool(changed), replaces=[], stables=[], delete_before_replace=False)

    def _run(self, props: dict[str, Any]) -> dict[str, Any]:
        from_env = headers_from_environment(props.get("header_env") or {})
        report = _probe({**props, "headers": {**dict(props.get("headers") or {}), **from_env}} if from_env else props)
        if not report.ok:
            hint = f"\n{props['failure_hint']}" if props.get("failure_hint") else ""
            raise ProbeFailedError(f"integration probe of {report.endpoint} failed:\n{report.failure_message()}{hint}")
        public = {k: v for k, v in props.items() if k != "headers"}
        return {**public, **outputs_of(report)}

    def create(self, props: dict[str, Any]) -> CreateResult:
        identity = json.dumps({"endpoint": props["endpoint"], "models": props["models"]}, sort_keys=True)
        return CreateResult(id_="probe-" + hashlib.sha256(identity.encode()).hexdigest()[:16], outs=self._run(props))

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(outs=self._run(news))

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        """Nothing was created on the endpoint: forgetting the resource is enough."""


@dataclass(frozen=True)
class IntegrationProbeArgs:
    """Inputs of :class:`IntegrationProbe`.

    * ``endpoint``: the service URL (``http://host:port``, ``grpc://host:port``; see
      :func:`tritonft.probe.parse_endpoint`); usually an output of ``TritonService``.
    * ``models``: what to check (name, family, tensor contract; an encoder's facts and expected answers); see
      :meth:`from_specs`.
    * ``image_digest``, ``model_revisions``, ``serving_config``: what a release changes; folded into the
      ``trigger`` input so the probe re-runs exactly when one of them changes. ``serving_config`` is any string
      that changes with the rendered serving configuration (e.g. a hash of the model repository).
    * ``protocol``: forced transport when ``endpoint`` has no scheme.
    * ``deadline_s``: overall budget including waiting for the rollout; ``call_timeout_s``: per request;
      ``latency_requests``: requests behind p50/p95; ``bleu_threshold``: T5 pass mark.
    * ``headers``: e.g. ``{"Authorization": token}`` for an authenticating ingress; passed as a secret input and
      never exported.
    * ``gateway_url``: the OpenAI gateway's base URL (``https://<host>/v1``): each model is also asked the judged
      prompts through its ``/v1/completions`` (an embedding model its texts through ``/v1/embeddings``; same
      headers); None = no gateway.
    """

    endpoint: pulumi.Input[str]
    models: Sequence[ModelTarget]
    image_digest: pulumi.Input[str] | None = None
    model_revisions: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)
    serving_config: pulumi.Input[str] | None = None
    protocol: Protocol | None = None
    deadline_s: float = DEFAULT_PROBE_DEADLINE_S
    call_timeout_s: float = DEFAULT_CALL_TIMEOUT_S
    latency_requests: int = DEFAULT_LATENCY_REQUESTS
    bleu_threshold: float = DEFAULT_BLEU_THRESHOLD
    headers: pulumi.Input[Mapping[str, str]] | None = None
    header_env: Mapping[str, str] = field(default_factory=dict)
    """Header name -> environment variable read when the probe runs (in the environment of ``pulumi up``), e.g.
    ``{"Authorization": "TRITONFT_PROBE_AUTHORIZATION"}``: the value never enters the state."""
    gateway_url: pulumi.Input[str | None] | None = None
    failure_hint: str | None = None
    """Said after the failed checks when the probe fails (a judge: what its failed candidate leaves, and how to see
    it)."""

    @classmethod
    def from_specs(
        cls,
        endpoint: pulumi.Input[str],
        specs: Sequence[ModelSpec],
        contract: TextContract | None = None,
        encoder_probes: Mapping[str, EncoderProbe] | None = None,
        *,
        reference: bool = False,
        **kwargs: Any,
    ) -> IntegrationProbeArgs:
        """Args for the served models: names, families and pinned revisions come from the specs.

        Each model's contract is the full set of tensors its rendered ensemble declares, unless ``contract`` is given.
        An encoder's target carries its task, width, normalisation and labels from its spec, and the stack's expected
        answers from ``encoder_probes[name]`` (similarity triples or (text, label) pairs; none = the defaults).
        With ``reference``, each generator with a reference (T5, GPT-2, GPT-J; a Llama/Qwen2 served by vLLM:
        :func:`tritonft.probe.judge_reference.has_reference`) is judged against the reference of its original weights
        that its Jobs rendered into its served model (:mod:`tritonft.probe.judge_reference`).
        """
        from tritonft.probe.rendered import target_for_spec

        probes = encoder_probes or {}
        targets = []
        for s in specs:
            asked = probes.get(s.name)
            triples, labels = (asked.triples, asked.labels) if asked else ((), ())
            target = target_for_spec(s, triples, labels, reference=reference)
            targets.append(dataclasses.replace(target, contract=contract) if contract else target)
        return cls(
            endpoint=endpoint,
            models=targets,
            model_revisions={s.name: s.revision for s in specs},
            **kwargs,
        )


def probe_settings(args: IntegrationProbeArgs) -> dict[str, Any]:
    """What the probe is asked to check, as its inputs carry it (read back by
    :func:`tritonft.probe.in_cluster.config_from_props`): the in-process probe's and the in-cluster judge Job's
    settings are this one mapping. No header: those are secret inputs of the probe only."""
    return {
        "endpoint": args.endpoint,
        "protocol": str(args.protocol) if args.protocol else None,
        "models": [m.to_dict() for m in args.models],
        "deadline_s": args.deadline_s,
        "call_timeout_s": args.call_timeout_s,
        "latency_requests": args.latency_requests,
        "bleu_threshold": args.bleu_threshold,
        "gateway_url": args.gateway_url,
    }


class IntegrationProbe(pulumi.dynamic.Resource, module="tritonft", name="IntegrationProbe"):
    """Fails ``pulumi up`` unless every model answers correctly; exports what it saw.

    Outputs: ``endpoint``, ``ok``, ``model_status`` (name -> ``ok``/``not_ready``/...), ``sample_answers``
    (name -> first answer; an embedding model's cosines of its first triple, a classifier's first label),
    ``latency_ms`` (name -> ``{"p50", "p95"}``, plus ``first_p50``/``first_p95`` for a streaming model: to its first
    response), ``wake`` (name -> the wake through the gateway of a model that scales to zero:
    :meth:`tritonft.probe.wake.WakeTiming.to_output`), ``report`` (the full probe report).
    """

    endpoint: pulumi.Output[str]
    ok: pulumi.Output[bool]
    model_status: pulumi.Output[dict[str, str]]
    sample_answers: pulumi.Output[dict[str, str]]
    latency_ms: pulumi.Output[dict[str, dict[str, float]]]
    wake: pulumi.Output[dict[str, dict[str, Any]]]
    report: pulumi.Output[dict[str, Any]]
    trigger: pulumi.Output[str]

    def __init__(self, name: str, args: IntegrationProbeArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        trigger = pulumi.Output.all(
            image=args.image_digest,
            revisions=pulumi.Output.from_input(dict(args.model_revisions)),
            config=args.serving_config,
        ).apply(lambda v: probe_trigger(v["image"], v["revisions"] or {}, v["config"]))
        props: dict[str, Any] = {
            **probe_settings(args),
            "trigger": trigger,
            "header_env": dict(args.header_env),
            **({"failure_hint": args.failure_hint} if args.failure_hint else {}),
            **dict.fromkeys(OUTPUT_KEYS),
        }
        if args.headers is not None:
            props["headers"] = pulumi.Output.secret(args.headers)
            extra = pulumi.ResourceOptions(additional_secret_outputs=["headers"])
            opts = pulumi.ResourceOptions.merge(opts, extra) if opts else extra
        super().__init__(IntegrationProbeProvider(), name, props, opts)
