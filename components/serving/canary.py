"""The weighted (canary) phase of a judged promotion and the candidate's replicas before the switch (pure).

After the probe has judged a new serving version (``components.serving.promotion``), and before the user-facing
Services switch to it, the promotion gate (``components.serving.promotion_gate``) does two things:

1. **Replicas through the switch.** The candidate comes up with one pod (the one surge pod per model the capacity
   rules count); the stable version may serve with more (its autoscaler's count). A second fleet of that size
   beside the stable one is room the stack does not plan (prod's t5-3b at ``replicasMax``: five more whole nodes),
   so the candidate is not grown before the switch. The gate *pins* the stable's ready pods in the user-facing
   Services (EndpointSlices owned by the stable Deployment), the Services switch, and the handover
   (``PromotionHandover``) grows the candidate to :func:`replicas_before_switch` one pod at a time while the stable
   shrinks (:func:`handover_step`): users are served by at least as many pods as the stable had, and never more
   than one pod beyond them exists.
2. **The weighted phase** (``canary: true``). The model's HTTPRoute and GRPCRoute send ``weight`` % of the model's
   edge traffic to the candidate's Service (:func:`route_backends` of :attr:`Phase.CANARY`) for ``duration``; then
   Prometheus gives one :class:`VersionSample` per version (:func:`sample_queries`) and :func:`canary_verdict`
   compares them. The routes go back to the user-facing Service alone (:attr:`Phase.STABLE`, what the program
   declares) whatever the verdict: on a pass the switch follows, on a failure ``up`` fails with the stable version
   serving 100 % and the candidate at weight 0, naming the metric, both values and the threshold.

Which metrics, and why: Triton's own, per pod, as the stack's ServiceMonitor scrapes them. Every pod of either
version exports them (the OpenAI gateway's metrics would miss the edge's direct traffic, and Envoy's per-cluster
statistics are not scraped by the stack). The ServiceMonitor selects the model's Services by the component's labels,
which the candidate Service carries too, so each series' ``job`` is the Service it was scraped through: the
user-facing Service (``<model>``) selects exactly the stable version's pods until the switch, the candidate Service
(``<model>-<version>``) exactly the candidate's. No relabeling is needed.

* error ratio: ``nv_inference_request_failure`` / (``_failure`` + ``nv_inference_request_success``) of the model
  clients call (FT's ensemble, the encoder's ensemble, the vLLM model), ``increase`` over the phase. It counts what
  Triton failed; a request the edge could not deliver is not Triton's to count (the rollout watch and the probe
  catch pods that do not answer at all).
* latency p95: ``nv_inference_request_summary_us{quantile="0.95"}``, Triton's request-duration summary (exported
  with ``--metrics-config=summary_latencies=true``, which a stack with ``canary`` on gives its Triton pods: Triton
  has no request-latency histogram). A summary's quantiles cannot be added across pods, so the version's figure is
  its worst pod's p95, averaged over the phase (``avg_over_time`` of a subquery that leaves out the NaN a summary
  reports while no request came), in milliseconds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

from components.common.edge import WeightedBackend
from components.settings.model import CanarySettings

PATCH_FORCE = "pulumi.com/patchForce"
"""On the model's routes when the gate rewrites their weights: the program's next apply of the route wins over the
gate's field manager (server-side apply would otherwise refuse it as a conflict)."""
P95_QUANTILE = "0.95"
SUMMARY_METRIC = "nv_inference_request_summary_us"


class Phase(Enum):
    """Where a judged promotion is, as far as the model's routes are concerned."""

    STABLE = "stable"
    """The user-facing Service alone: before the phase, after a passed one (the Service then selects the new
    version) and after a failed one (the candidate at weight 0)."""
    CANARY = "canary"
    """The user-facing Service (still the stable version) and the candidate's Service, weighted."""


def route_backends(phase: Phase, *, stable: str, candidate: str, weight_percent: int) -> list[WeightedBackend]:
    """The model routes' ``backendRefs`` in ``phase``: the user-facing Service ``stable`` alone, or with
    ``weight_percent`` of the requests going to the ``candidate`` Service."""
    if phase is Phase.STABLE:
        return [WeightedBackend(stable)]
    if not 0 < weight_percent < 100:
        raise ValueError(f"canary weight must lie within 1..99 percent, got {weight_percent}")
    return [WeightedBackend(stable, 100 - weight_percent), WeightedBackend(candidate, weight_percent)]


def replicas_before_switch(stable_ready: int, *, min_replicas: int, max_replicas: int) -> int:
    """How many ready pods the candidate needs to serve alone: as many as the stable version has ready now (at least
    the autoscaler's minimum, at least one), never more than ``replicasMax``. It reaches them by the handover
    (:func:`handover_step`), never by a second fleet beside the stable one."""
    return max(1, min(max(stable_ready, min_replicas), max_replicas))


@dataclass(frozen=True)
class HandoverStep:
    """The replicas of both versions' Deployments for the next step of a handover."""

    candidate: int
    stable: int


def handover_step(target: int, *, candidate_replicas: int, candidate_ready: int, stable_replicas: int) -> HandoverStep:
    """The next step of the handover from the stable version to a candidate that passed its judge and gate, after
    the user-facing Services switched to it while still sending requests to the stable's pods (pinned): the
    candidate grows by one pod (never shrunk: its autoscaler may have raised it), the stable shrinks so the two
    together hold at most ``target + 1`` pods, the one surge pod per model the capacity rules count
    (``components.settings.capacity``). The pods serving users (the stable's pinned ones and the candidate's ready
    ones) stay at ``target`` or more throughout: when the candidate's autoscaler raised it beyond its ready pods + 1
    (its floor at the switch), the stable shrinks only as far as the candidate's *ready* pods replace it, and the
    pods beyond the surge wait for the nodes the stable frees; the stable keeps one pod until the candidate has
    ``target`` ready."""
    grow = max(candidate_replicas, min(target, candidate_ready + 1))
    keep = max(1, target + 1 - grow, target - candidate_ready)
    return HandoverStep(candidate=grow, stable=min(stable_replicas, keep))


# -- the comparison ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class VersionSample:
    """One version's figures over the phase, as Prometheus answered them."""

    requests: float
    """Requests the model answered or failed in the phase (``increase`` of success + failure)."""
    failures: float
    p95_ms: float | None
    """Worst pod's latency p95 (ms); None when Triton exported no summary (no request, or the flag is off)."""

    @property
    def error_ratio(self) -> float:
        return self.failures / self.requests if self.requests > 0 else 0.0


@dataclass(frozen=True)
class Finding:
    """One metric compared: both values, the threshold the candidate had to stay within, and the outcome."""

    metric: str
    candidate: float | None
    stable: float | None
    threshold: float | None
    passed: bool
    message: str


@dataclass(frozen=True)
class Verdict:
    findings: tuple[Finding, ...]

    @property
    def passed(self) -> bool:
        return all(f.passed for f in self.findings)

    @property
    def failures(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if not f.passed)

    def summary(self) -> str:
        """One line per metric, the failed ones first."""
        ordered = sorted(self.findings, key=lambda f: f.passed)
        return "; ".join(("pass: " if f.passed else "FAIL: ") + f.message for f in ordered)


def _pct(ratio: float) -> str:
    return f"{100 * ratio:.2f}%"


def canary_verdict(candidate: VersionSample, stable: VersionSample, policy: CanarySettings) -> Verdict:
    """The candidate passes when it answered at least ``min_requests``, its error ratio exceeds the stable's by at
    most ``max_error_ratio_increase_percent`` points and its p95 exceeds the stable's by at most
    ``max_latency_increase_percent`` %. A stable version without a p95 (no summary: its pods predate the flag) leaves
    the latency unjudged, said so; a candidate without one while it answered requests fails."""
    findings: list[Finding] = []
    if candidate.requests < policy.min_requests:
        findings.append(
            Finding(
                "requests",
                candidate.requests,
                stable.requests,
                float(policy.min_requests),
                False,
                f"inconclusive: the candidate answered {candidate.requests:.0f} requests in the phase, fewer than "
                f"canaryMinRequests {policy.min_requests} (raise canaryDurationSeconds or canaryWeightPercent, or "
                "lower canaryMinRequests)",
            )
        )
    allowed_errors = stable.error_ratio + policy.max_error_ratio_increase_percent / 100
    errors_ok = candidate.error_ratio <= allowed_errors + 1e-12
    findings.append(
        Finding(
            "error_ratio",
            candidate.error_ratio,
            stable.error_ratio,
            allowed_errors,
            errors_ok,
            f"error ratio: candidate {_pct(candidate.error_ratio)} ({candidate.failures:.0f} of "
            f"{candidate.requests:.0f}), stable {_pct(stable.error_ratio)} ({stable.failures:.0f} of "
            f"{stable.requests:.0f}); threshold {_pct(allowed_errors)} (stable + "
            f"canaryMaxErrorRatioIncreasePercent {policy.max_error_ratio_increase_percent})",
        )
    )
    findings.append(_latency_finding(candidate, stable, policy))
    return Verdict(tuple(findings))


def _latency_finding(candidate: VersionSample, stable: VersionSample, policy: CanarySettings) -> Finding:
    knob = f"canaryMaxLatencyIncreasePercent {policy.max_latency_increase_percent}"
    if stable.p95_ms is None:
        return Finding(
            "latency_p95",
            candidate.p95_ms,
            None,
            None,
            True,
            "latency p95: not judged, the stable version exported no latency summary (pods started before "
            "canary turned Triton's summary_latencies on, or no request reached it)",
        )
    allowed = stable.p95_ms * (1 + policy.max_latency_increase_percent / 100)
    if candidate.p95_ms is None:
        return Finding(
            "latency_p95",
            None,
            stable.p95_ms,
            allowed,
            candidate.requests == 0,
            f"latency p95: the candidate exported no latency summary; stable {stable.p95_ms:.1f} ms; threshold "
            f"{allowed:.1f} ms (stable + {knob})",
        )
    return Finding(
        "latency_p95",
        candidate.p95_ms,
        stable.p95_ms,
        allowed,
        candidate.p95_ms <= allowed + 1e-9,
        f"latency p95: candidate {candidate.p95_ms:.1f} ms, stable {stable.p95_ms:.1f} ms; threshold "
        f"{allowed:.1f} ms (stable + {knob})",
    )


def failure_message(model: str, version: str, verdict: Verdict, weight_percent: int, duration_s: int) -> str:
    """What ``up`` says when the phase fails."""
    return (
        f"canary phase of {model} version {version} failed after {duration_s} s at {weight_percent}% of the "
        f"traffic: {verdict.summary()}. The stable version serves 100% again and the candidate takes no traffic; "
        "fix the model (or the thresholds: canaryMax*) and run `pulumi up` again"
    )


# -- the queries --------------------------------------------------------------------------------------------------


def _selector(namespace: str, job: str, model: str) -> str:
    return f'namespace="{namespace}",job="{job}",model="{model}"'


def sample_queries(namespace: str, job: str, model: str, window_s: int) -> dict[str, str]:
    """The PromQL giving one version's :class:`VersionSample` over the last ``window_s`` seconds: ``job`` is the
    Service its pods are scraped through (the user-facing Service for the stable version, the candidate Service for
    the candidate), ``model`` the Triton model clients call."""
    sel = _selector(namespace, job, model)
    window = f"[{window_s}s]"
    failures = f"sum(increase(nv_inference_request_failure{{{sel}}}{window}))"
    successes = f"sum(increase(nv_inference_request_success{{{sel}}}{window}))"
    p95 = f'{SUMMARY_METRIC}{{{sel},quantile="{P95_QUANTILE}"}}'
    return {
        "requests": f"{failures} + {successes}",
        "failures": failures,
        # ">= 0" drops the NaN a summary reports for a window without requests (it would make the mean NaN).
        "p95_ms": f"max(avg_over_time(({p95} >= 0)[{window_s}s:])) / 1000",
    }


def sample_from(values: Mapping[str, float | None]) -> VersionSample:
    """The sample from the queries' answers (each the single value of its instant vector, None when empty; a
    summary quantile with no observation in its window is NaN: no p95)."""
    p95 = values.get("p95_ms")
    return VersionSample(
        requests=float(values.get("requests") or 0.0),
        failures=float(values.get("failures") or 0.0),
        p95_ms=None if p95 is None or math.isnan(p95) else float(p95),
    )
