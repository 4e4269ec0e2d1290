"""The probe: server live -> server ready -> each model ready -> metadata/config contract -> a real inference
judged per family -> latency over N requests -> the same judged request through the OpenAI gateway.

An encoder (a target with :attr:`ModelTarget.encoder`) is asked its texts through the ensemble's ``text_input``
and judged on its output tensors (:class:`tritonft.probe.encoder.EncoderTarget`: embedding width, unit norm and
the similarity order, or the expected labels); through the gateway an embedding model is asked the same texts on
``/v1/embeddings`` (a classifier has no OpenAI route).

All of it shares one deadline. Transient failures are retried with backoff inside it; every network call gets a
timeout that cannot outlive it, so the probe never hangs and returns within the deadline plus one call's
teardown. A failed check names itself and says why; later checks of that model are skipped (a model that is not
ready cannot answer), other models are still checked.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

import numpy as np
import numpy.typing as npt

from tritonft.probe.client import TritonClient, V2Client
from tritonft.probe.contract import DEFAULT_TEXT_CONTRACT, TextContract, compare_metadata, compare_model_config
from tritonft.probe.encoder import EMBEDDING_OUTPUT, LABEL_OUTPUT, EncoderTarget
from tritonft.probe.endpoint import Endpoint, Protocol, parse_endpoint
from tritonft.probe.expectations import DEFAULT_BLEU_THRESHOLD, Sample, Verdict, judge, judge_exact, samples_for
from tritonft.probe.gateway import ModelStartingError, gateway_completions, gateway_embeddings
from tritonft.probe.judge_reference import (
    REFERENCE_PARAMETER,
    JudgeReference,
    ServedAnswer,
    judge_against_reference,
    reference_from_model_config,
    rendering_problems,
)
from tritonft.probe.report import CheckOutcome, ModelReport, ModelStatus, ProbeReport
from tritonft.probe.retry import (
    MIN_CALL_TIMEOUT_S,
    Deadline,
    PermanentError,
    RetriesExhaustedError,
    TransientError,
    backoff_delays,
    retry,
)
from tritonft.probe.stats import LatencySummary
from tritonft.probe.streaming import StreamedAnswer
from tritonft.probe.vllm import PROBE_MAX_TOKENS, vllm_stream
from tritonft.probe.wake import TryOutcome, WakeTiming, WakeTry, wake_timing
from tritonft.spec import EncoderTask, Family

_T = TypeVar("_T")

DEFAULT_DEADLINE_S = 300.0
DEFAULT_CALL_TIMEOUT_S = 30.0
DEFAULT_LATENCY_REQUESTS = 20
WAKE_RETRY_CAP_S = 1.0
"""The longest pause between two tries of a wake (0.2, 0.4, 0.8, then 1 s): the wake figure's resolution, at one
request a second through the gateway while the model starts."""
READINESS_SHARE = 0.75
"""Waiting for readiness may use this share of the deadline; the rest is kept for checking the ready models."""


@dataclass(frozen=True)
class ModelTarget:
    """One model to check: its served name, its family (decides the answer check), its tensor contract and,
    optionally, exact expected answers (prompt -> text; they replace the family's prompts and judgement)."""

    name: str
    family: Family | None = None
    contract: TextContract = DEFAULT_TEXT_CONTRACT
    max_tokens: int | None = None
    """``max_tokens`` of the request through the gateway (the model's ``max_output_len``); None = its default."""
    expected: tuple[Sample, ...] = ()
    streaming: bool = False
    """Rendered decoupled (``streaming: true``): the model answers only over a stream (see
    :mod:`tritonft.probe.streaming`). A Triton's model configuration says so too, and the probe follows it."""
    encoder: EncoderTarget | None = None
    """An encoder's facts and expected answers (None for a generator, whose JSON then has no ``encoder`` key)."""
    vllm: bool = False
    """Served by Triton's vLLM backend: asked greedy, streamed, with NVIDIA's inputs (:mod:`tritonft.probe.vllm`),
    ``max_tokens`` (default :data:`tritonft.probe.vllm.PROBE_MAX_TOKENS`) tokens directly and through the gateway."""
    scales_to_zero: bool = False
    """The model scales to zero (``scaleToZero``): with a gateway, the probe first asks it through the gateway, before
    anything else touches it, and times the wake when it finds it asleep (:mod:`tritonft.probe.wake`)."""
    reference: bool = False
    """Judged against the reference of its original weights that its served ensemble carries
    (:mod:`tritonft.probe.judge_reference`): its prompts, and the rule; a model that carries none fails."""
    tokenizer_config: str | None = None
    """The version's ``tokenizer_config.json`` as the gateway reads it (``--tokenizer-config``; in the judge Job's
    pod, the version's checkpoint mounted read-only where the gateway mounts it): the reference's chats are rendered
    from it (with the template files beside it) as the gateway renders a user's chat. None: no chat is judged."""

    def to_dict(self) -> dict[str, Any]:
        raw: dict[str, Any] = {
            "name": self.name,
            "family": str(self.family) if self.family else None,
            "contract": self.contract.to_dict(),
        }
        if self.expected:
            raw["expected"] = [{"prompt": s.prompt, "answer": s.reference} for s in self.expected]
        if self.max_tokens is not None:
            raw["max_tokens"] = self.max_tokens
        if self.streaming:
            raw["streaming"] = True
        if self.encoder is not None:
            raw["encoder"] = self.encoder.to_dict()
        if self.vllm:
            raw["vllm"] = True
        if self.scales_to_zero:
            raw["scales_to_zero"] = True
        if self.reference:
            raw["reference"] = True
        if self.tokenizer_config is not None:
            raw["tokenizer_config"] = self.tokenizer_config
        return raw

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> ModelTarget:
        family = raw.get("family")
        contract = raw.get("contract")
        max_tokens = raw.get("max_tokens")
        encoder = raw.get("encoder")
        return cls(
            name=str(raw["name"]),
            family=Family(family) if family else None,
            contract=TextContract.from_dict(dict(contract)) if contract else DEFAULT_TEXT_CONTRACT,
            expected=tuple(Sample(str(e["prompt"]), str(e["answer"])) for e in raw.get("expected") or ()),
            max_tokens=int(max_tokens) if max_tokens is not None else None,
            streaming=bool(raw.get("streaming", False)),
            encoder=EncoderTarget.from_dict(encoder) if encoder else None,
            vllm=bool(raw.get("vllm", False)),
            scales_to_zero=bool(raw.get("scales_to_zero", False)),
            reference=bool(raw.get("reference", False)),
            tokenizer_config=str(raw["tokenizer_config"]) if raw.get("tokenizer_config") else None,
        )


@dataclass(frozen=True)
class ProbeConfig:
    """What to probe and how hard.

    ``deadline_s`` bounds the whole probe (including waiting for a rolling-out server to come up);
    ``call_timeout_s`` bounds each request (shortened near the deadline); ``latency_requests`` sequential requests
    of the first sample prompt give p50/p95; ``bleu_threshold`` is the T5 pass mark. ``headers`` are sent with
    every request and never reported. With ``gateway_url`` (an OpenAI base URL, ``https://<host>/v1``), each
    model that passed is also asked the judged prompts through the gateway's ``/v1/completions`` (an embedding
    model its texts through ``/v1/embeddings``).
    """

    url: str
    models: tuple[ModelTarget, ...]
    protocol: Protocol | None = None
    deadline_s: float = DEFAULT_DEADLINE_S
    call_timeout_s: float = DEFAULT_CALL_TIMEOUT_S
    latency_requests: int = DEFAULT_LATENCY_REQUESTS
    bleu_threshold: float = DEFAULT_BLEU_THRESHOLD
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    gateway_url: str | None = None

    @property
    def through_gateway_only(self) -> bool:
        """No V2 endpoint (``url`` empty): the models' own Triton has no route from where the probe runs (a
        FasterTransformer or vLLM model, ``components.common.edge.exposes_triton``), so each is judged through
        the OpenAI gateway only, as its clients reach it."""
        return not self.url

    def problems(self) -> list[tuple[str, str]]:
        """Every invalid setting as ``(field, reason)``; empty when the config can run."""
        found: list[tuple[str, str]] = []
        if self.through_gateway_only:
            if self.gateway_url is None:
                found.append(("url", "give the model's V2 endpoint, or the gateway_url it is reached through"))
        else:
            try:
                parse_endpoint(self.url, self.protocol)
            except ValueError as exc:
                found.append(("url", str(exc)))
        if not self.models:
            found.append(("models", "at least one model name is required"))
        names = [m.name for m in self.models]
        if any(not n.strip() for n in names):
            found.append(("models", "model names must be non-empty"))
        if len(set(names)) != len(names):
            found.append(("models", f"model names must be unique, got {names}"))
        if self.deadline_s <= 0:
            found.append(("deadline_s", f"must be positive, got {self.deadline_s}"))
        if self.call_timeout_s <= 0:
            found.append(("call_timeout_s", f"must be positive, got {self.call_timeout_s}"))
        if self.latency_requests < 1:
            found.append(("latency_requests", f"must be at least 1, got {self.latency_requests}"))
        if not 0 <= self.bleu_threshold <= 100:
            found.append(("bleu_threshold", f"must be within 0..100, got {self.bleu_threshold}"))
        for model in self.models:
            if model.encoder is not None:
                if model.expected:
                    found.append(("models", f"{model.name}: exact expected answers are for generators, not encoders"))
                if model.family is not None and not model.family.is_encoder:
                    found.append(("models", f"{model.name}: encoder facts given for a {model.family} model"))
                found += [("models", f"{model.name}: encoder {why}") for why in model.encoder.problems()]
            elif not model.contract.answers_text:
                found.append(
                    ("models", f"{model.name}: text_output {model.contract.text_output!r} must be a BYTES tensor")
                )
        if self.gateway_url is not None and not self.gateway_url.startswith(("http://", "https://")):
            found.append(("gateway_url", f"must be an http(s) URL such as https://host/v1, got {self.gateway_url!r}"))
        return found


ClientFactory = Callable[[Endpoint, Mapping[str, str]], V2Client]


Complete = Callable[..., list[str]]
"""The request through the gateway: :func:`tritonft.probe.gateway.gateway_completions` (tests pass their own)."""
Embed = Callable[..., npt.NDArray[np.float64]]
"""An embedding request through the gateway: :func:`tritonft.probe.gateway.gateway_embeddings`."""
AskVllm = Callable[..., StreamedAnswer]
"""A vLLM model's streamed answer: :func:`tritonft.probe.vllm.vllm_stream` (tests pass their own)."""


class _Run:
    def __init__(
        self,
        config: ProbeConfig,
        client: V2Client,
        deadline: Deadline,
        sleep: Callable[[float], None],
        complete: Complete = gateway_completions,
        *,
        embed: Embed = gateway_embeddings,
        ask_vllm: AskVllm = vllm_stream,
    ):
        self.config = config
        self.ask_vllm = ask_vllm
        self.client = client
        self.deadline = deadline
        self.sleep = sleep
        self.complete = complete
        self.embed = embed
        self.checks: list[CheckOutcome] = []
        self.server_info = ""
        self.streaming: set[str] = {m.name for m in config.models if m.streaming or m.vllm}
        """Models asked over a stream: rendered decoupled, or served decoupled (their model configuration)."""
        self.configs: dict[str, dict[str, Any]] = {}
        """Each model's served configuration, when the server has the endpoint."""
        self.references: dict[str, JudgeReference] = {}
        """The judge's reference each model with ``reference`` carries (read by :meth:`read_reference`)."""

    def record(
        self, check: str, ok: bool, detail: str, started: float, model: str | None = None, **extra: Any
    ) -> CheckOutcome:
        outcome = CheckOutcome(
            check=check,
            ok=ok,
            detail=detail,
            elapsed_s=round(self.deadline.elapsed() - started, 3),
            model=model,
            **extra,
        )
        self.checks.append(outcome)
        return outcome

    def attempt(self, check: str, call: Callable[[float], str], model: str | None = None) -> bool:
        """Run one retried check (``call`` returns its success detail); record it; return whether it passed."""
        started = self.deadline.elapsed()
        try:
            done = retry(call, self.deadline, self.config.call_timeout_s, sleep=self.sleep)
        except RetriesExhaustedError as exc:
            self.record(check, False, exc.reason, started, model, attempts=exc.attempts)
            return False
        self.record(check, True, done.value, started, model, attempts=done.attempts)
        return True

    # --- server --------------------------------------------------------------------------------------------
    def server_live(self) -> bool:
        def check(timeout: float) -> str:
            if not self.client.server_live(timeout):
                raise TransientError("server live: the server answered not live")
            return "ok"

        return self.attempt("server_live", check)

    def server_metadata(self) -> dict[str, Any]:
        timeout = self.deadline.call_timeout(self.config.call_timeout_s)
        if timeout < MIN_CALL_TIMEOUT_S:
            return {}
        try:
            return self.client.server_metadata(timeout)
        except (TransientError, PermanentError):
            return {}

    # --- models --------------------------------------------------------------------------------------------
    def not_ready_reason(self, model: str, timeout: float) -> str:
        try:
            self.client.model_metadata(model, timeout)
        except (TransientError, PermanentError) as exc:
            return str(exc)
        return f"model {model!r} is known to the server but not ready (still loading, or its load failed)"

    def wait_ready(self, names: list[str]) -> set[str]:
        """Poll server readiness and every model's readiness together until all are ready or the deadline passes.

        Polled together because a V2 server is ready only when all its models are: the per-model answers say
        which model holds it back. The wait may use :data:`READINESS_SHARE` of the remaining time, so the models
        that did become ready are still checked. Records ``server_ready`` and one ``model_ready`` outcome per
        model; returns the models that became ready.
        """
        started = self.deadline.elapsed()
        budget = Deadline(max(self.deadline.remaining() * READINESS_SHARE, 1e-3))
        server_ready = False
        server_reason = "the deadline passed before the server was asked"
        ready: set[str] = set()
        reasons: dict[str, str] = {}

        def poll(_timeout: float) -> None:
            nonlocal server_ready, server_reason
            if not server_ready:
                try:
                    server_ready = self.client.server_ready(budget.call_timeout(self.config.call_timeout_s))
                    server_reason = "the server answered not ready"
                except (TransientError, PermanentError) as exc:
                    server_reason = str(exc)
            for name in names:
                if name in ready:
                    continue
                timeout = budget.call_timeout(self.config.call_timeout_s)
                try:
                    if self.client.model_ready(name, timeout):
                        ready.add(name)
                        continue
                    reasons[name] = self.not_ready_reason(name, budget.call_timeout(timeout))
                except (TransientError, PermanentError) as exc:
                    reasons[name] = str(exc)  # an unknown model may still be registering: keep polling
            if not server_ready or len(ready) < len(names):
                raise TransientError("not ready yet")

        try:
            attempts = retry(poll, budget, self.config.call_timeout_s, sleep=self.sleep).attempts
        except RetriesExhaustedError as exc:
            attempts = exc.attempts
        within = f"not ready within {budget.seconds:.1f} s ({READINESS_SHARE:.0%} of the deadline)"
        if server_ready:
            self.record("server_ready", True, "ok", started, attempts=attempts)
        else:
            self.record("server_ready", False, f"{within}: {server_reason}", started, attempts=attempts)
        for name in names:
            if name in ready:
                self.record("model_ready", True, "ok", started, name, attempts=attempts)
            else:
                reason = reasons.get(name, "the deadline passed before the model was asked")
                self.record("model_ready", False, f"{within}: {reason}", started, name, attempts=attempts)
        return ready

    def check_contract(self, target: ModelTarget) -> bool:
        def check(timeout: float) -> str:
            metadata = self.client.model_metadata(target.name, timeout)
            problems = compare_metadata(target.contract, metadata)
            if problems:
                hint = encoder_hint(target, metadata)
                raise PermanentError("served tensors differ from the rendered contract: " + "; ".join(problems) + hint)
            return "inputs/outputs match the rendered contract"

        return self.attempt("metadata", check, target.name)

    def check_config(self, target: ModelTarget) -> bool:
        started = self.deadline.elapsed()

        def check(timeout: float) -> dict[str, Any] | None:
            return self.client.model_config(target.name, timeout)

        try:
            done = retry(check, self.deadline, self.config.call_timeout_s, sleep=self.sleep)
        except RetriesExhaustedError as exc:
            self.record("model_config", False, exc.reason, started, target.name, attempts=exc.attempts)
            return False
        if done.value is None:
            server = self.server_info or "this server"
            detail = f"skipped: {server} has no model-configuration endpoint (not Triton); metadata was checked"
            self.record("model_config", True, detail, started, target.name, degraded=True)
            return True
        self.configs[target.name] = done.value
        problems = compare_model_config(target.contract, done.value)
        served_decoupled = decoupled(done.value)
        if target.streaming and not served_decoupled:
            problems.append(
                "the model was rendered decoupled (streaming: true) but the served one is not: its answers would "
                "come in one piece, not streamed; redeploy the rendered repository"
            )
        if served_decoupled:
            self.streaming.add(target.name)
        if problems:
            detail = "model configuration differs from the rendered contract: " + "; ".join(problems)
            self.record("model_config", False, detail, started, target.name, attempts=done.attempts)
            return False
        detail = "config inputs/outputs match"
        if served_decoupled:
            detail += "; decoupled (streaming): asked over a stream"
        self.record("model_config", True, detail, started, target.name, attempts=done.attempts)
        return True

    def vllm_answer(self, target: ModelTarget, prompt: str, timeout: float) -> StreamedAnswer:
        """The vLLM ``target``'s greedy streamed answer to ``prompt`` (:mod:`tritonft.probe.vllm`)."""
        endpoint = parse_endpoint(self.config.url, self.config.protocol)
        max_tokens = target.max_tokens or PROBE_MAX_TOKENS
        return self.ask_vllm(
            endpoint, target.name, prompt, max_tokens=max_tokens, headers=self.config.headers, timeout_s=timeout
        )

    def infer_one(self, target: ModelTarget, prompt: str) -> str:
        def check(timeout: float) -> str:
            if target.vllm:
                return self.vllm_answer(target, prompt, timeout).text
            if target.name in self.streaming:
                return self.client.stream_text(target.name, target.contract, prompt, timeout).text
            return self.client.infer_text(target.name, target.contract, [prompt], timeout)[0]

        return retry(check, self.deadline, self.config.call_timeout_s, sleep=self.sleep).value

    def samples(self, target: ModelTarget) -> tuple[Sample, ...]:
        """The prompts ``target`` is asked: its exact expected answers', its reference's, or its family's."""
        if target.expected:
            return target.expected
        reference = self.references.get(target.name)
        if reference is not None:
            return tuple(Sample(p.prompt, p.answer) for p in reference.prompts)
        return samples_for(target.family)

    def verdict(self, target: ModelTarget, samples: tuple[Sample, ...], answers: list[str]) -> Verdict:
        """Exact expected answers when given (``--expected-answers``), else the reference of the original weights
        (a target with ``reference``), else the family's judgement."""
        if target.expected:
            return judge_exact(samples, answers)
        reference = self.references.get(target.name)
        if reference is not None:
            judged = judge_against_reference(reference, answers)
            return Verdict(judged.ok, judged.detail)
        return judge(target.family, samples, answers, self.config.bleu_threshold)

    def read_reference(self, target: ModelTarget) -> str | None:
        """Read the reference ``target``'s served configuration carries into :attr:`references`; the reason when it
        cannot be judged against one."""
        config = self.configs.get(target.name)
        if config is None:
            server = self.server_info or "this server"
            return f"{server} has no model-configuration endpoint: the judge's reference cannot be read"
        try:
            reference = reference_from_model_config(config)
        except ValueError as exc:
            return str(exc)
        if reference is None:
            return (
                f"the served {target.name!r} carries no judge reference (its ensemble's {REFERENCE_PARAMETER} "
                "parameter): its repository was rendered without the reference of its original weights; re-run its "
                "reference Job, which computes it (`tritonft reference`) and renders it in (`tritonft repo "
                "--judge-reference`)"
            )
        if reference.family is not target.family:
            return (
                f"the served {target.name!r} carries the reference of a {reference.family} model, not {target.family}"
            )
        self.references[target.name] = reference
        return None

    def check_answers(self, target: ModelTarget) -> ModelReport:
        if target.reference and not target.expected:
            started = self.deadline.elapsed()
            missing = self.read_reference(target)
            if missing is not None:
                self.record("inference", False, missing, started, target.name)
                return self.model_report(target, ModelStatus.WRONG_ANSWER, None, None)
        reference = self.references.get(target.name)
        if reference is not None and target.vllm:
            return self.check_reference_answers(target, reference)
        samples = self.samples(target)
        started = self.deadline.elapsed()
        answers: list[str] = []
        try:
            for sample in samples:
                answers.append(self.infer_one(target, sample.prompt))
        except RetriesExhaustedError as exc:
            self.record("inference", False, exc.reason, started, target.name, attempts=exc.attempts)
            return self.model_report(target, ModelStatus.INFERENCE_FAILED, samples[0].prompt, None)
        verdict = self.verdict(target, samples, answers)
        self.record("inference", verdict.ok, verdict.detail, started, target.name, attempts=len(samples))
        status = ModelStatus.OK if verdict.ok else ModelStatus.WRONG_ANSWER
        return self.model_report(target, status, samples[0].prompt, answers[0], bleu=verdict.score)

    def check_reference_answers(self, target: ModelTarget, reference: JudgeReference) -> ModelReport:
        """A vLLM model against its reference: each plain prompt asked as is, each chat rendered from the version's
        chat template as the gateway renders it (:func:`chat_prompt_of`), every answer with how it ended and the
        server's count of the prompt's tokens (:class:`~tritonft.probe.judge_reference.ServedAnswer`)."""
        started = self.deadline.elapsed()
        first = reference.prompts[0].prompt
        sent: list[tuple[str, tuple[str, ...]]] = []
        for prompt in reference.prompts:
            if not prompt.is_chat:
                sent.append((prompt.prompt, ()))
                continue
            try:
                rendered = chat_prompt_of(target, prompt.messages, prompt.rendered_at)
            except ChatJudgeError as exc:
                self.record("inference", False, str(exc), started, target.name)
                return self.model_report(target, ModelStatus.WRONG_ANSWER, first, None)
            sent.append((rendered, tuple(rendering_problems(prompt.messages, rendered))))
        answers: list[ServedAnswer] = []
        try:
            for text, problems in sent:

                def ask(timeout: float, text: str = text) -> StreamedAnswer:
                    return self.vllm_answer(target, text, timeout)

                got = retry(ask, self.deadline, self.config.call_timeout_s, sleep=self.sleep).value
                answers.append(ServedAnswer(got.text, got.finish_reason, got.prompt_tokens, problems))
        except RetriesExhaustedError as exc:
            self.record("inference", False, exc.reason, started, target.name, attempts=exc.attempts)
            return self.model_report(target, ModelStatus.INFERENCE_FAILED, first, None)
        judged = judge_against_reference(reference, answers)
        self.record("inference", judged.ok, judged.detail, started, target.name, attempts=len(answers))
        status = ModelStatus.OK if judged.ok else ModelStatus.WRONG_ANSWER
        return self.model_report(target, status, first, answers[0].text)

    def measure_latency(self, target: ModelTarget, prompt: str) -> tuple[LatencySummary, LatencySummary | None] | None:
        """p50/p95 of ``latency_requests`` sequential requests of ``prompt`` (an encoder: one text): to the whole
        answer, and for a streaming model also to its first response (time to first token); None when a request
        failed or the deadline passed."""
        started = self.deadline.elapsed()
        wanted = self.config.latency_requests
        streaming = target.name in self.streaming
        latencies: list[float] = []
        firsts: list[float] = []
        for _ in range(wanted):
            timeout = self.deadline.call_timeout(self.config.call_timeout_s)
            if timeout < MIN_CALL_TIMEOUT_S:
                detail = f"the deadline passed after {len(latencies)} of {wanted} requests"
                self.record("latency", False, detail, started, target.name, attempts=len(latencies))
                return None
            t0 = time.perf_counter()
            try:
                if target.encoder is not None:
                    outputs = target.encoder.outputs
                    self.client.infer_tensors(target.name, target.contract.text_input, [prompt], outputs, timeout)
                elif target.vllm:
                    firsts.append(self.vllm_answer(target, prompt, timeout).first_s)
                elif streaming:
                    answer = self.client.stream_text(target.name, target.contract, prompt, timeout)
                    firsts.append(answer.first_s)
                else:
                    self.client.infer_text(target.name, target.contract, [prompt], timeout)
            except (TransientError, PermanentError) as exc:
                detail = f"request {len(latencies) + 1} of {wanted} failed: {exc}"
                self.record("latency", False, detail, started, target.name, attempts=len(latencies) + 1)
                return None
            latencies.append(time.perf_counter() - t0)
        summary = LatencySummary.of_seconds(latencies)
        detail = f"p50 {summary.p50_ms:.1f} ms, p95 {summary.p95_ms:.1f} ms over {summary.count} requests"
        first = LatencySummary.of_seconds(firsts) if streaming else None
        if first is not None:
            detail = (
                f"to the last response (whole answer): {detail}; to the first response (time to first token): "
                f"p50 {first.p50_ms:.1f} ms, p95 {first.p95_ms:.1f} ms"
            )
        self.record("latency", True, detail, started, target.name, attempts=wanted)
        return summary, first

    def gateway_question(self, target: ModelTarget, gateway_url: str) -> tuple[str, Callable[[float], Any], Any]:
        """(route, call, judge) of ``target``'s judged request through the gateway: the judged prompts on
        ``/v1/completions``, an embedding model's texts on ``/v1/embeddings``."""
        if target.encoder is not None:
            encoder = target.encoder
            texts = encoder.texts()

            def embed(timeout: float) -> npt.NDArray[np.float64]:
                return self.embed(gateway_url, target.name, texts, headers=self.config.headers, timeout_s=timeout)

            return "/v1/embeddings", embed, lambda vectors: encoder.judge(texts, {"embedding": vectors})
        samples = self.samples(target)

        def call(timeout: float) -> list[str]:
            prompts = [s.prompt for s in samples]
            return self.complete(
                gateway_url,
                target.name,
                prompts,
                max_tokens=(target.max_tokens or PROBE_MAX_TOKENS) if target.vllm else target.max_tokens,
                headers=self.config.headers,
                timeout_s=timeout,
            )

        return "/v1/completions", call, lambda texts: self.verdict(target, samples, texts)

    def check_gateway(self, target: ModelTarget, gateway_url: str) -> bool:
        """The judged prompts through the gateway's ``/v1/completions``, judged like the direct answers (the exact
        expected answers when given)."""
        return self.judge_gateway(target, *self.gateway_question(target, gateway_url))

    def wake(self, target: ModelTarget, gateway_url: str) -> WakeTiming | None:
        """The judged request through the gateway, sent before anything else asks the model, retried until answered
        within the deadline; each try timed (:func:`tritonft.probe.wake.wake_timing`). Recorded as the model's
        ``wake`` check: failed when no answer came or the answer was wrong. None when the deadline left no try."""
        route, call, judge_answer = self.gateway_question(target, gateway_url)
        started = self.deadline.elapsed()
        tries: list[WakeTry] = []
        origin: list[float] = []
        """When the first try was sent (the times of every try count from it)."""

        def timed(timeout: float) -> Any:
            sent = time.monotonic()
            origin[:] = origin or [sent]
            outcome = TryOutcome.ANSWERED
            try:
                return call(timeout)
            except ModelStartingError:
                outcome = TryOutcome.ASLEEP
                raise
            except TransientError:
                outcome = TryOutcome.UNAVAILABLE
                raise
            except PermanentError:
                outcome = TryOutcome.REFUSED
                raise
            finally:
                tries.append(WakeTry(sent - origin[0], time.monotonic() - origin[0], outcome))

        try:
            delays = backoff_delays(cap_s=WAKE_RETRY_CAP_S)
            done = retry(timed, self.deadline, self.config.call_timeout_s, sleep=self.sleep, delays=delays)
        except RetriesExhaustedError as exc:
            timing = wake_timing(tries, judged_ok=False) if tries else None
            detail = f"{timing.describe() if timing else 'no try'}: {exc.reason}"
            self.record("wake", False, detail, started, target.name, attempts=exc.attempts)
            return timing
        verdict: Verdict = judge_answer(done.value)
        timing = wake_timing(tries, judged_ok=verdict.ok)
        detail = f"POST {route}: {timing.describe()}"
        if not verdict.ok:
            detail += f"; the OpenAI gateway answered wrong: {verdict.detail}"
        self.record("wake", verdict.ok, detail, started, target.name, attempts=done.attempts)
        return timing

    def judge_gateway(
        self, target: ModelTarget, route: str, call: Callable[[float], _T], judge: Callable[[_T], Verdict]
    ) -> bool:
        """One call of the gateway's ``POST route``, retried within the deadline, its answer judged; recorded as the
        model's ``gateway`` check."""
        started = self.deadline.elapsed()
        try:
            done = retry(call, self.deadline, self.config.call_timeout_s, sleep=self.sleep)
        except RetriesExhaustedError as exc:
            detail = f"the OpenAI gateway did not answer: {exc.reason}"
            self.record("gateway", False, detail, started, target.name, attempts=exc.attempts)
            return False
        verdict = judge(done.value)
        detail = f"POST {route}: {verdict.detail}"
        if not verdict.ok:
            detail = f"the OpenAI gateway answered wrong (POST {route}): {verdict.detail}"
        self.record("gateway", verdict.ok, detail, started, target.name, attempts=done.attempts)
        return verdict.ok

    # --- encoders ---------------------------------------------------------------------------------------------
    def encode(self, target: ModelTarget, texts: list[str], timeout: float) -> dict[str, npt.NDArray[Any]]:
        """The encoder's output tensors for ``texts``, in requests of at most its ``max_batch_size`` texts."""
        assert target.encoder is not None
        encoder = target.encoder
        parts: list[dict[str, npt.NDArray[Any]]] = []
        for start in range(0, len(texts), encoder.max_batch_size):
            chunk = texts[start : start + encoder.max_batch_size]
            call_timeout = min(timeout, self.deadline.call_timeout(self.config.call_timeout_s))
            parts.append(
                self.client.infer_tensors(target.name, target.contract.text_input, chunk, encoder.outputs, call_timeout)
            )
        return {name: np.concatenate([part[name] for part in parts]) for name in encoder.outputs}

    def check_encoder_answers(self, target: ModelTarget) -> ModelReport:
        """The expected texts through the ensemble, judged (:meth:`EncoderTarget.judge`)."""
        assert target.encoder is not None
        encoder = target.encoder
        texts = encoder.texts()
        started = self.deadline.elapsed()
        try:
            done = retry(
                lambda t: self.encode(target, texts, t), self.deadline, self.config.call_timeout_s, sleep=self.sleep
            )
        except RetriesExhaustedError as exc:
            self.record("inference", False, exc.reason, started, target.name, attempts=exc.attempts)
            return self.model_report(target, ModelStatus.INFERENCE_FAILED, texts[0], None)
        verdict = encoder.judge(texts, done.value)
        self.record("inference", verdict.ok, verdict.detail, started, target.name, attempts=done.attempts)
        status = ModelStatus.OK if verdict.ok else ModelStatus.WRONG_ANSWER
        sample = encoder.sample(texts, done.value) if verdict.ok else verdict.detail
        return self.model_report(target, status, texts[0], sample)

    def check_gateway_embeddings(self, target: ModelTarget, gateway_url: str) -> bool:
        """The embedding model's texts through the gateway's ``/v1/embeddings``, judged like the direct answers."""
        assert target.encoder is not None
        return self.judge_gateway(target, *self.gateway_question(target, gateway_url))

    def check_encoder(self, target: ModelTarget) -> ModelReport:
        """Answers judged, latency, and (embedding models) the gateway; after the contract checks passed."""
        assert target.encoder is not None
        report = self.check_encoder_answers(target)
        if report.status is not ModelStatus.OK or report.sample_prompt is None:
            return report
        measured = self.measure_latency(target, report.sample_prompt)
        if measured is None:
            return ModelReport(**{**report.__dict__, "status": ModelStatus.INFERENCE_FAILED})
        timed = {**report.__dict__, "latency": measured[0]}
        embeds = target.encoder.task is EncoderTask.EMBED
        if embeds and self.config.gateway_url and not self.check_gateway_embeddings(target, self.config.gateway_url):
            return ModelReport(**{**timed, "status": ModelStatus.GATEWAY_FAILED})
        return ModelReport(**timed)

    def model_report(
        self, target: ModelTarget, status: ModelStatus, prompt: str | None, answer: str | None, **extra: Any
    ) -> ModelReport:
        family = str(target.family) if target.family else None
        streaming = target.name in self.streaming
        return ModelReport(target.name, family, status, prompt, answer, streaming=streaming, **extra)

    def check_model(self, target: ModelTarget) -> ModelReport:
        if not self.check_contract(target):
            return self.model_report(target, ModelStatus.CONTRACT_MISMATCH, None, None)
        if not self.check_config(target):
            return self.model_report(target, ModelStatus.CONTRACT_MISMATCH, None, None)
        if target.encoder is not None:
            return self.check_encoder(target)
        report = self.check_answers(target)
        if report.status is not ModelStatus.OK or report.sample_prompt is None:
            return report
        measured = self.measure_latency(target, report.sample_prompt)
        if measured is None:
            return ModelReport(**{**report.__dict__, "status": ModelStatus.INFERENCE_FAILED})
        timed = {**report.__dict__, "latency": measured[0], "first_response_latency": measured[1]}
        if self.config.gateway_url and not self.check_gateway(target, self.config.gateway_url):
            return ModelReport(**{**timed, "status": ModelStatus.GATEWAY_FAILED})
        return ModelReport(**timed)


class ChatJudgeError(Exception):
    """The version's chat template cannot be read or rendered for the judge's conversation (the message says which
    and why)."""


def chat_prompt_of(target: ModelTarget, messages: Sequence[Mapping[str, str]], rendered_at: str = "") -> str:
    """``messages`` as the gateway sends a user's chat to ``target``: its ``tokenizer_config.json`` read as the
    gateway's ``--tokenizer-config`` reads it (the template files beside it folded in) and rendered by the same
    :func:`tritonft.engines.vllm.chat.engine_prompt`, at the reference's moment of rendering (``rendered_at``, ISO
    8601; a template that writes today's date writes the reference's)."""
    import json
    from datetime import datetime
    from pathlib import Path

    from tritonft.engines.vllm.chat import ChatTemplateError, engine_prompt, read_template_files, with_template_files

    if target.tokenizer_config is None:
        raise ChatJudgeError(
            f"{target.name}'s reference has a chat but the judge was given no tokenizer_config.json of the version to "
            "render it with (the gateway's --tokenizer-config; `tritonft probe --tokenizer-config MODEL=PATH`)"
        )
    path = Path(target.tokenizer_config)
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(config, dict):
            raise ChatJudgeError(f"the version's {path} is not a JSON object")
        now = datetime.fromisoformat(rendered_at) if rendered_at else None
        return engine_prompt(with_template_files(config, *read_template_files(path.parent)), messages, now=now)
    except ChatTemplateError as exc:
        raise ChatJudgeError(f"the version's chat template ({path}) cannot render the judge's chat: {exc}") from exc
    except (OSError, ValueError) as exc:
        raise ChatJudgeError(f"the version's {path} cannot be read: {exc}") from exc


def encoder_hint(target: ModelTarget, metadata: Mapping[str, Any]) -> str:
    """For a model probed as a generator whose ensemble answers an encoder's tensors: how to probe it as one."""
    outputs = {str(t.get("name")) for t in metadata.get("outputs") or []}
    if target.encoder is not None or not outputs & {EMBEDDING_OUTPUT, LABEL_OUTPUT}:
        return ""
    return (
        f" ({target.name!r} answers an encoder's tensors: probe it from its spec, `tritonft probe --spec SPEC.json`,"
        " which says its task)"
    )


def decoupled(config: Mapping[str, Any]) -> bool:
    """Whether a model configuration (``GET /v2/models/<m>/config`` as JSON) declares the decoupled transaction
    policy (Triton reports it on an ensemble whose step is decoupled, too)."""
    policy = config.get("model_transaction_policy", config.get("modelTransactionPolicy")) or {}
    return bool(policy.get("decoupled", False)) if isinstance(policy, Mapping) else False


def wakes_through_gateway(target: ModelTarget, config: ProbeConfig) -> bool:
    """Whether the probe times ``target``'s wake from zero: it scales to zero, the stack runs a gateway and the
    gateway serves it (a classifier has no OpenAI route)."""
    served = target.encoder is None or target.encoder.task is EncoderTask.EMBED
    return target.scales_to_zero and config.gateway_url is not None and served


def default_client(endpoint: Endpoint, headers: Mapping[str, str]) -> V2Client:
    return TritonClient(endpoint, headers)


def run_probe(
    config: ProbeConfig,
    client_factory: ClientFactory = default_client,
    sleep: Callable[[float], None] = time.sleep,
    complete: Complete = gateway_completions,
    embed: Embed = gateway_embeddings,
    *,
    ask_vllm: AskVllm = vllm_stream,
) -> ProbeReport:
    """Run every check against ``config.url`` and return the report (never raises for server problems).

    Raises ``ValueError`` listing every problem when ``config`` itself is invalid.
    """
    problems = config.problems()
    if problems:
        raise ValueError("invalid probe settings: " + "; ".join(f"{k}: {why}" for k, why in problems))
    if config.through_gateway_only:
        return _probe_through_gateway(config, sleep, complete, embed)
    endpoint = parse_endpoint(config.url, config.protocol)
    deadline = Deadline(config.deadline_s)
    client = client_factory(endpoint, config.headers)
    run = _Run(config, client, deadline, sleep, complete, embed=embed, ask_vllm=ask_vllm)
    models: list[ModelReport] = []
    server: dict[str, Any] = {}
    wakes: dict[str, WakeTiming | None] = {}
    try:
        # A model that scales to zero is asked through the gateway first, before the checks below wake it.
        for target in config.models:
            if config.gateway_url is not None and wakes_through_gateway(target, config):
                wakes[target.name] = run.wake(target, config.gateway_url)
        if run.server_live():
            ready = run.wait_ready([m.name for m in config.models])
            server = run.server_metadata()
            if server.get("name"):
                run.server_info = f"{server.get('name')} {server.get('version', '')}".strip()
            for target in config.models:
                if target.name in ready:
                    models.append(run.check_model(target))
                else:
                    models.append(run.model_report(target, ModelStatus.NOT_READY, None, None))
        else:
            models = [run.model_report(m, ModelStatus.NOT_CHECKED, None, None) for m in config.models]
    finally:
        client.close()
    models = [dataclasses.replace(m, wake=wakes[m.name]) if wakes.get(m.name) else m for m in models]
    ok = all(c.ok for c in run.checks) and all(m.status is ModelStatus.OK for m in models)
    return ProbeReport(
        endpoint=endpoint.url,
        protocol=str(endpoint.protocol),
        ok=ok,
        elapsed_s=round(deadline.elapsed(), 3),
        server={k: server[k] for k in ("name", "version", "extensions") if k in server},
        checks=tuple(run.checks),
        models=tuple(models),
    )


class _NoV2Client:
    """The V2 client of a probe through the gateway only: never called (nothing asks Triton directly)."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"a probe through the gateway only asked Triton directly ({name})")


def _probe_through_gateway(
    config: ProbeConfig, sleep: Callable[[float], None], complete: Complete, embed: Embed
) -> ProbeReport:
    """Each model's judged request through the OpenAI gateway (its wake first when it scales to zero): the only
    path to a model whose Triton has no route from here. A classifier, which the gateway does not serve, is never
    probed this way (its Triton keeps its own route). The served ensemble's configuration, and with it the judge's
    reference, cannot be read here: a FasterTransformer generator is judged by its family's rule (BLEU, a non-empty
    continuation). In a stack its reference judgement was made in the cluster by its judge Job, before the switch
    or right after an in-place roll (``docs/judge.md``)."""
    assert config.gateway_url is not None
    gateway_url = config.gateway_url
    deadline = Deadline(config.deadline_s)
    run = _Run(config, cast("V2Client", _NoV2Client()), deadline, sleep, complete, embed=embed)
    models: list[ModelReport] = []
    for target in config.models:
        wake = run.wake(target, gateway_url) if wakes_through_gateway(target, config) else None
        route, call, judge = run.gateway_question(target, gateway_url)
        answers: list[Any] = []

        def kept(timeout: float, call: Callable[[float], Any] = call, answers: list[Any] = answers) -> Any:
            answers[:] = [call(timeout)]
            return answers[0]

        ok = run.judge_gateway(target, route, kept, judge)
        samples = () if target.encoder is not None else (target.expected or samples_for(target.family))
        prompt = samples[0].prompt if samples else None
        answer = str(answers[0][0]) if samples and answers and answers[0] else None
        status = ModelStatus.OK if ok else ModelStatus.GATEWAY_FAILED
        models.append(dataclasses.replace(run.model_report(target, status, prompt, answer), wake=wake))
    return ProbeReport(
        endpoint=gateway_url,
        protocol=str(Protocol.HTTP),
        ok=all(c.ok for c in run.checks) and all(m.status is ModelStatus.OK for m in models),
        elapsed_s=round(deadline.elapsed(), 3),
        server={},
        checks=tuple(run.checks),
        models=tuple(models),
    )
