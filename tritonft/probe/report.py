"""The probe's typed, JSON-serialisable result.

A :class:`ProbeReport` lists every check in the order it ran (:class:`CheckOutcome`: which check, on which model,
passed or not, and why) plus a per-model summary (:class:`ModelReport`). ``to_dict`` gives plain JSON types;
``from_dict`` reads it back (the Pulumi provider stores it as an output).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from tritonft.probe.stats import LatencySummary
from tritonft.probe.wake import WakeTiming


class ModelStatus(StrEnum):
    """Where a model's checks ended."""

    OK = "ok"
    NOT_READY = "not_ready"
    CONTRACT_MISMATCH = "contract_mismatch"
    INFERENCE_FAILED = "inference_failed"
    WRONG_ANSWER = "wrong_answer"
    GATEWAY_FAILED = "gateway_failed"
    """The model answered correctly over KServe V2 but not through the OpenAI gateway."""
    NOT_CHECKED = "not_checked"
    """The server itself never became live/ready, so the model was not reached."""


@dataclass(frozen=True)
class CheckOutcome:
    """One check: ``check`` is its name (``server_live``, ``model_ready``, ``metadata``, ``model_config``,
    ``inference``, ``latency``, ``gateway``), ``model`` the model it concerns (``None`` for server checks).

    ``degraded`` marks a check the server could not answer (e.g. MLServer has no model-config endpoint); it is
    skipped with the reason in ``detail`` and does not fail the probe.
    """

    check: str
    ok: bool
    detail: str
    elapsed_s: float
    model: str | None = None
    attempts: int = 1
    degraded: bool = False

    @property
    def label(self) -> str:
        return f"{self.check}[{self.model}]" if self.model else self.check


@dataclass(frozen=True)
class ModelReport:
    """The outcome for one model."""

    name: str
    family: str | None
    status: ModelStatus
    sample_prompt: str | None = None
    sample_answer: str | None = None
    bleu: float | None = None
    latency: LatencySummary | None = None
    """Client-side time to the whole answer (for a streaming model: to its last response)."""
    streaming: bool = False
    """Asked over a stream (a decoupled model): ``latency`` is then the time to the last response."""
    first_response_latency: LatencySummary | None = None
    """A streaming model's time to its first response (time to first token); None otherwise."""
    wake: WakeTiming | None = None
    """A model that scales to zero: its wake through the gateway (:mod:`tritonft.probe.wake`); None otherwise."""


@dataclass(frozen=True)
class ProbeReport:
    """Everything the probe found. ``ok`` is true only when every non-degraded check passed."""

    endpoint: str
    protocol: str
    ok: bool
    elapsed_s: float
    server: dict[str, Any] = field(default_factory=dict)
    """Server metadata (``name``, ``version``, ``extensions``) when the server answered it."""
    checks: tuple[CheckOutcome, ...] = ()
    models: tuple[ModelReport, ...] = ()

    @property
    def failures(self) -> tuple[CheckOutcome, ...]:
        return tuple(c for c in self.checks if not c.ok and not c.degraded)

    @property
    def degradations(self) -> tuple[CheckOutcome, ...]:
        return tuple(c for c in self.checks if c.degraded)

    def failure_message(self) -> str:
        """One line per failed check: ``<check>[<model>]: <why>``; empty when the probe passed."""
        return "\n".join(f"{c.label}: {c.detail}" for c in self.failures)

    def model(self, name: str) -> ModelReport:
        (match,) = [m for m in self.models if m.name == name]
        return match

    def to_dict(self) -> dict[str, Any]:
        raw = asdict(self)
        raw["checks"] = [asdict(c) for c in self.checks]
        raw["models"] = [asdict(m) for m in self.models]
        for m in raw["models"]:
            m["status"] = str(m["status"])
        return raw

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> ProbeReport:
        return cls(
            endpoint=str(raw["endpoint"]),
            protocol=str(raw["protocol"]),
            ok=bool(raw["ok"]),
            elapsed_s=float(raw["elapsed_s"]),
            server=dict(raw.get("server") or {}),
            checks=tuple(CheckOutcome(**c) for c in raw.get("checks") or []),
            models=tuple(
                ModelReport(
                    **{
                        **m,
                        "status": ModelStatus(m["status"]),
                        "latency": LatencySummary(**m["latency"]) if m.get("latency") else None,
                        "first_response_latency": (
                            LatencySummary(**m["first_response_latency"]) if m.get("first_response_latency") else None
                        ),
                        "wake": WakeTiming.from_dict(m["wake"]) if m.get("wake") else None,
                    }
                )
                for m in raw.get("models") or []
            ),
        )
