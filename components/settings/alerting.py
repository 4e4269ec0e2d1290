"""The alerts' ``for:`` durations: their defaults and the stack's ``alertFor`` overrides, validated (pure).

The schema validates ``alertFor`` with these; :mod:`components.serving.monitoring` renders the rules with them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

ALERT_FOR: dict[str, str] = {
    "TritonInferenceFailures": "10m",
    "TritonQueueSaturated": "15m",
    "TritonRequestsPiling": "5m",
    "VllmTimeToFirstTokenHigh": "10m",
    "VllmEngineErrors": "10m",
    "VllmSchedulerGaugesAbsent": "15m",
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


# --- Where alerts go: receivers by severity, Watchdog to a dead-man's switch (pure) ---------------------------------

SECRETS_DIR = "/etc/alertmanager/secrets"
"""Where the Prometheus operator mounts each Secret of ``alertmanagerSpec.secrets`` (``<dir>/<secret>/<key>``): a
receiver reads its webhook URL or key from a file there (``api_url_file``, ``routing_key_file``, ``url_file`` ...)."""
ROUTES = ("critical", "warning", "watchdog")
"""``alertRouting``'s keys: the receiver that gets ``severity=critical`` alerts (pages), ``severity=warning`` alerts
(tickets), and the always-firing ``Watchdog`` (a dead-man's switch: it pages when the heartbeat stops)."""
INLINE_CREDENTIALS = frozenset(
    {
        "api_url",
        "url",
        "routing_key",
        "service_key",
        "api_key",
        "bot_token",
        "webhook_url",
        "auth_password",
        "auth_secret",
        "token",
        "credentials",
        "password",
        "user_key",
        "api_secret",
        "secret_key",
    }
)
"""Alertmanager receiver fields that carry a credential inline (each has a ``<field>_file`` form)."""
_SECRET_FILE = re.compile(rf"^{re.escape(SECRETS_DIR)}/([a-z0-9]([-a-z0-9.]*[a-z0-9])?)/[-._a-zA-Z0-9]+$")


def _leaves(value: object, path: str) -> list[tuple[str, str, object]]:
    """``(path, field, value)`` of every mapping entry under ``value``."""
    found: list[tuple[str, str, object]] = []
    if isinstance(value, Mapping):
        for key, item in value.items():
            found.append((f"{path}.{key}", str(key), item))
            found += _leaves(item, f"{path}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found += _leaves(item, f"{path}[{i}]")
    return found


def inline_credentials(receivers: Sequence[Mapping[str, object]]) -> list[str]:
    """Paths (``[0].slack_configs[0].api_url``) of credentials written into the receivers themselves."""
    return [
        path.lstrip(".")
        for i, receiver in enumerate(receivers)
        for path, key, _ in _leaves(receiver, f"[{i}]")
        if key in INLINE_CREDENTIALS
    ]


def credential_files(receivers: Sequence[Mapping[str, object]]) -> list[tuple[str, str]]:
    """``(path, file)`` of every ``*_file`` field of the receivers."""
    return [
        (path, str(value))
        for i, receiver in enumerate(receivers)
        for path, key, value in _leaves(receiver, f"[{i}]")
        if key.endswith("_file")
    ]


def credential_file_problems(receivers: Sequence[Mapping[str, object]]) -> list[tuple[str, str]]:
    """``(path, message)`` for each ``*_file`` that is not a key of a Secret mounted from the monitoring namespace."""
    return [
        (
            path,
            f"{file!r} is not a mounted Secret's key; use {SECRETS_DIR}/<secret>/<key>, the Secret created in the "
            "monitoring namespace (docs/day2.md#paging)",
        )
        for path, file in credential_files(receivers)
        if not _SECRET_FILE.match(file)
    ]


def credential_secrets(receivers: Sequence[Mapping[str, object]]) -> list[str]:
    """The Secrets (in the monitoring namespace) the receivers' ``*_file`` fields read: Alertmanager mounts them."""
    names = {m.group(1) for _, file in credential_files(receivers) if (m := _SECRET_FILE.match(file))}
    return sorted(names)


def alert_routing(
    receivers: Sequence[Mapping[str, object]], overrides: Mapping[str, str] | None = None
) -> dict[str, str | None]:
    """Which receiver gets what: ``critical`` defaults to the first receiver, ``warning`` to ``critical``'s,
    ``watchdog`` to none (the heartbeat then stops at ``null``: no dead-man's switch). No receivers: all None."""
    overrides = dict(overrides or {})
    first = str(receivers[0]["name"]) if receivers else None
    critical = overrides.get("critical", first)
    return {
        "critical": critical,
        "warning": overrides.get("warning", critical),
        "watchdog": overrides.get("watchdog"),
    }


def routing_problems(
    receivers: Sequence[Mapping[str, object]], overrides: Mapping[str, str] | None, *, prod: bool
) -> list[str]:
    """``<key>: <message>`` for routes to receivers that do not exist, receivers nothing routes to, and, in prod,
    no receiver for pages or no dead-man's switch for Watchdog."""
    names = [str(r.get("name")) for r in receivers]
    routing = alert_routing(receivers, overrides)
    problems = [
        f"alertRouting.{route}: no receiver named {target!r}; the receivers are {', '.join(names) or 'none'}"
        for route, target in (overrides or {}).items()
        if target not in names
    ]
    unused = [n for n in names if n not in routing.values()]
    if unused:
        problems.append(
            f"alertReceivers: {', '.join(unused)} would get no alert; name each in alertRouting ({', '.join(ROUTES)})"
        )
    if prod and not receivers:
        problems.append(
            "alertReceivers: prod pages nobody without one; give the on-call receiver (PagerDuty, Opsgenie, ...) "
            "with its key in a Secret file, see docs/day2.md#paging"
        )
    elif prod and routing["watchdog"] is None:
        problems.append(
            "alertRouting.watchdog: prod needs a dead-man's switch (a receiver that pages when Watchdog's "
            "heartbeat stops: healthchecks.io, Dead Man's Snitch, PagerDuty's heartbeat, ...), else a dead "
            "Prometheus or Alertmanager pages nobody; see docs/day2.md#paging"
        )
    return problems


RUNBOOKS = "docs/operate/runbooks.md"
"""The runbook page, a path in this repository: each alert's section is headed by the alert's name."""


def runbook_url(alert: str) -> str:
    """The ``runbook_url`` annotation of ``alert``: its section of :data:`RUNBOOKS` (GitHub's heading anchor)."""
    return f"{RUNBOOKS}#{alert.lower()}"


def with_runbooks(rule_spec: dict[str, Any]) -> dict[str, Any]:
    """``rule_spec`` (a PrometheusRule's ``spec``) with a ``runbook_url`` annotation on every alert."""
    for group in rule_spec["groups"]:
        for rule in group["rules"]:
            if "alert" in rule:
                rule["annotations"] = {**rule.get("annotations", {}), "runbook_url": runbook_url(rule["alert"])}
    return rule_spec
