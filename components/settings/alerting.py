"""The alerts' ``for:`` durations: their defaults and the stack's ``alertFor`` overrides, validated (pure).

The schema validates ``alertFor`` with these; :mod:`components.serving.monitoring` renders the rules with them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

ALERT_FOR: dict[str, str] = {
    "TritonInferenceFailures": "10m",
    "TritonQueueSaturated": "15m",
    "TritonRequestsPiling": "5m",
    "VllmTimeToFirstTokenHigh": "10m",
    "VllmEngineErrors": "10m",
}
"""Each alert's default ``for:`` (how long its condition must hold before it fires); the stack's ``alertFor``
overrides them one by one."""
_DURATION = re.compile(r"^(\d+y)?(\d+w)?(\d+d)?(\d+h)?(\d+m)?(\d+s)?(\d+ms)?$")


def duration_problem(value: object) -> str | None:
    """Why ``value`` is not a Prometheus duration (``30s``, ``5m``, ``1h30m``: units y w d h m s ms, largest
    first), or None."""
    if isinstance(value, str) and value and _DURATION.match(value):
        return None
    return f"{value!r} is not a Prometheus duration like `30s`, `5m` or `1h30m` (units y, w, d, h, m, s, ms)"


def alert_for(overrides: Mapping[str, str] | None = None) -> dict[str, str]:
    """:data:`ALERT_FOR` with ``overrides`` applied; an unknown alert or a bad duration is a ``ValueError``."""
    overrides = dict(overrides or {})
    unknown = sorted(set(overrides) - set(ALERT_FOR))
    if unknown:
        raise ValueError(f"no alert named {', '.join(unknown)}; the alerts are {', '.join(ALERT_FOR)}")
    problems = [f"{name}: {p}" for name, value in overrides.items() if (p := duration_problem(value))]
    if problems:
        raise ValueError("; ".join(problems))
    return {**ALERT_FOR, **overrides}
