"""Wake from zero, timed end to end through the OpenAI gateway (pure).

A model that scales to zero (``scaleToZero`` with ``replicasMin: 0``) has no Triton pod while idle; the gateway then
answers a request for it 503 ``model_starting`` (with ``Retry-After``), and that request is the demand that wakes it
(KEDA reads the gateway's request counter). The probe asks such a model its judged prompts through the gateway
*before* anything else touches the model, and keeps asking (0.2 s doubling to
:data:`tritonft.probe.runner.WAKE_RETRY_CAP_S`, 1 s) until the answer comes and is judged. Each try is one
:class:`WakeTry`; :func:`wake_timing` turns them into the figures:

- ``asleep``: the first request was answered ``model_starting`` (the model had no replica). Otherwise the model was
  already awake and there is no wake to measure (``wake_s`` is None);
- ``asleep_until_s``: first request -> the last ``model_starting`` answer (the model had no ready replica the gateway
  could reach until at least then);
- ``answer_s``: the try that was answered: sent -> answered (the first inference on a fresh server);
- ``wake_s``: first request sent -> the judged answer received: what a client that retries as the probe does waits.
  The part between ``asleep_until_s`` and the answered try's start is the retry pause (at most 1 s): the figure's
  resolution.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class TryOutcome(StrEnum):
    """What one request through the gateway got."""

    ASLEEP = "asleep"
    """503 ``model_starting``: the gateway found no running replica (the request wakes the model)."""
    UNAVAILABLE = "unavailable"
    """Any other transient failure (the gateway itself unreachable, 502/504, a timeout)."""
    ANSWERED = "answered"
    """An answer, to be judged."""
    REFUSED = "refused"
    """A permanent failure (an answer retrying cannot fix)."""


@dataclass(frozen=True)
class WakeTry:
    """One request: sent ``sent_s`` and ended ``ended_s`` seconds after the first one was sent, and its outcome."""

    sent_s: float
    ended_s: float
    outcome: TryOutcome


@dataclass(frozen=True)
class WakeTiming:
    """The wake of one model (see the module's docstring); seconds, rounded to the millisecond."""

    asleep: bool
    tries: int
    asleep_answers: int
    """Tries answered ``model_starting``."""
    asleep_until_s: float | None
    answer_s: float | None
    wake_s: float | None
    """None when the model was awake at the first request, or never answered."""
    judged_ok: bool
    """The answer that ended the wake was judged right (false also when no answer came)."""

    def to_output(self) -> dict[str, Any]:
        """Plain JSON for a stack output."""
        return {
            "asleep": self.asleep,
            "wake_s": self.wake_s,
            "asleep_until_s": self.asleep_until_s,
            "answer_s": self.answer_s,
            "tries": self.tries,
            "asleep_answers": self.asleep_answers,
            "judged_ok": self.judged_ok,
        }

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> WakeTiming:
        def seconds(key: str) -> float | None:
            return None if raw.get(key) is None else float(raw[key])

        return cls(
            asleep=bool(raw["asleep"]),
            tries=int(raw["tries"]),
            asleep_answers=int(raw["asleep_answers"]),
            asleep_until_s=seconds("asleep_until_s"),
            answer_s=seconds("answer_s"),
            wake_s=seconds("wake_s"),
            judged_ok=bool(raw["judged_ok"]),
        )

    def describe(self) -> str:
        """One line for the probe's ``wake`` check."""
        if not self.asleep:
            if self.answer_s is None:
                return f"no answer through the gateway after {self.tries} tries"
            return (
                f"the model was awake at the first request (answered in {self.answer_s:.3f} s): no wake from zero to "
                "measure (it is measured when the probe finds the model scaled to zero)"
            )
        if self.wake_s is None:
            return f"asleep at the first request; no answer through the gateway after {self.tries} tries"
        return (
            f"asleep at the first request; first {'judged' if self.judged_ok else 'wrong'} answer through the gateway "
            f"{self.wake_s:.3f} s after it ({self.asleep_answers} answer(s) model_starting until "
            f"{self.asleep_until_s:.3f} s; the answered request took {self.answer_s:.3f} s)"
        )


def _ms(seconds: float) -> float:
    return round(seconds, 3)


def wake_timing(tries: Sequence[WakeTry], judged_ok: bool) -> WakeTiming:
    """The figures of a wake from its tries in the order they were sent (times from the first try's send).

    ``judged_ok``: whether the last try's answer (when it is one) was judged right. Raises ``ValueError`` for no
    tries or tries out of order (a caller's mistake, not a server's)."""
    if not tries:
        raise ValueError("a wake needs at least one try (the first request)")
    if any(b.sent_s < a.sent_s for a, b in itertools.pairwise(tries)):
        raise ValueError("tries must be in the order they were sent")
    if any(t.ended_s < t.sent_s for t in tries):
        raise ValueError("a try cannot end before it was sent")
    origin = tries[0].sent_s
    asleep_tries = [t for t in tries if t.outcome is TryOutcome.ASLEEP]
    answered = tries[-1] if tries[-1].outcome is TryOutcome.ANSWERED else None
    asleep = tries[0].outcome is TryOutcome.ASLEEP
    return WakeTiming(
        asleep=asleep,
        tries=len(tries),
        asleep_answers=len(asleep_tries),
        asleep_until_s=_ms(asleep_tries[-1].ended_s - origin) if asleep_tries else None,
        answer_s=_ms(answered.ended_s - answered.sent_s) if answered else None,
        wake_s=_ms(answered.ended_s - origin) if answered and asleep else None,
        judged_ok=answered is not None and judged_ok,
    )
