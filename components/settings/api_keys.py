"""The edge's API keys beyond one per client: overlap, revocation of one key, expiry (pure).

``apiClients`` names the clients; each holds one key, ``default``, until ``apiKeys`` says otherwise::

    apiKeys:
      webapp:
        - name: default          # the key webapp has had since it was listed
          expires: "2026-12-31"  # refused from that day (UTC) on: the next `up` drops it
        - name: k2               # a new key, valid alongside the old one (the overlap)

A client listed in ``apiKeys`` holds exactly the keys listed there: leaving one out revokes that key and no other.
A key's id (the Secret's data key, the client id Envoy forwards in ``x-tritonft-client``, the access log's
``client=``) is the client's name for ``default`` and ``<client>.<name>`` for any other key, so the log shows which
of a client's keys is still in use before the old one goes. Expiry is applied where the stack can apply it: each
``pulumi up`` from the ``expires`` day on leaves the key out of the Secret Envoy reads (Envoy Gateway's
``apiKeyAuth`` has no expiry of its own), and warns :data:`EXPIRY_WARNING_DAYS` days ahead.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

from components.settings import kube

DEFAULT_KEY = "default"
"""The key every client holds from the day it is listed in ``apiClients``."""
EXPIRY_WARNING_DAYS = 14
"""How long before a key's ``expires`` day every plan warns about it."""
KEY_FIELDS = ("name", "expires")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


@dataclass(frozen=True)
class KeySpec:
    """One key a client holds, as ``apiKeys`` states it."""

    name: str = DEFAULT_KEY
    expires: date | None = None
    """The first day (UTC) the key is refused; None = it never expires."""


@dataclass(frozen=True)
class ApiKey:
    """One key the edge accepts: whose it is, which of its keys, until when."""

    client: str
    name: str = DEFAULT_KEY
    expires: date | None = None

    @property
    def id(self) -> str:
        return key_id(self.client, self.name)


def key_id(client: str, name: str) -> str:
    """The key's entry in the credentials Secret and the client id Envoy forwards: the client's name for its
    ``default`` key, ``<client>.<name>`` for another (a dot: no client name holds one, so no two ids collide)."""
    return client if name == DEFAULT_KEY else f"{client}.{name}"


def _date(raw: Any) -> tuple[date | None, str | None]:
    """A ``YYYY-MM-DD`` date (YAML may hand over a date already) -> (date, None) or (None, problem)."""
    if isinstance(raw, date):
        return raw, None
    if not isinstance(raw, str) or not _DATE.match(raw):
        return None, f"{raw!r} is not a date; write it as YYYY-MM-DD (quoted), e.g. '2027-01-31'"
    try:
        return date.fromisoformat(raw), None
    except ValueError:
        return None, f"{raw!r} is not a date of the calendar"


def format_problems(value: Any) -> list[tuple[str, str]]:
    """``apiKeys``'s grammar: client -> a non-empty list of ``{name, expires?}`` with distinct DNS-label names."""
    problems: list[tuple[str, str]] = []
    for client, keys in value.items():
        at = f".{client}"
        for p in kube.dns1123_label(str(client)):
            problems.append((at, f"{client!r} {p}: name a client of apiClients"))
        if not isinstance(keys, list) or not keys:
            problems.append(
                (
                    at,
                    "give the list of keys the client holds (`- name: default` is its first key); to revoke every "
                    "key of a client, remove it from apiClients",
                )
            )
            continue
        seen: set[str] = set()
        for i, key in enumerate(keys):
            where = f"{at}[{i}]"
            if not isinstance(key, dict):
                problems.append(
                    (where, f"{key!r} is not a key: write `- name: <key name>` (and `expires: YYYY-MM-DD`)")
                )
                continue
            for unknown in sorted(set(key) - set(KEY_FIELDS)):
                problems.append((f"{where}.{unknown}", f"is not a field of a key: {', '.join(KEY_FIELDS)}"))
            name = key.get("name")
            if not isinstance(name, str):
                problems.append((f"{where}.name", "every key needs a name (`default` is the client's first key)"))
            else:
                problems += [(f"{where}.name", f"{name!r} {p}") for p in kube.dns1123_label(name)]
                if name in seen:
                    problems.append((f"{where}.name", f"{name!r} is listed twice for {client}; each key once"))
                seen.add(name)
            if "expires" in key:
                _, problem = _date(key["expires"])
                if problem:
                    problems.append((f"{where}.expires", problem))
    return problems


def parse(value: Mapping[str, Any]) -> dict[str, tuple[KeySpec, ...]]:
    """A valid ``apiKeys`` (:func:`format_problems` found nothing) -> client -> its keys."""
    return {
        str(client): tuple(KeySpec(str(k["name"]), _date(k["expires"])[0] if "expires" in k else None) for k in keys)
        for client, keys in value.items()
    }


def client_problems(api_keys: Mapping[str, Any], clients: Sequence[str], probe: str) -> list[tuple[str, str]]:
    """``apiKeys`` names only clients of ``apiClients``; never the probe's (it reads its own key from the stack,
    so ``apiKeyRotation`` replaces it with nothing to hand out)."""
    problems: list[tuple[str, str]] = []
    for client in api_keys:
        if client == probe:
            problems.append(
                (
                    f"apiKeys.{client}",
                    f"{probe!r} is the integration probe's own key, replaced with apiKeyRotation; list only apiClients",
                )
            )
        elif client not in clients:
            problems.append(
                (
                    f"apiKeys.{client}",
                    f"{client!r} is not in apiClients ({', '.join(clients) or 'none'}): add it there, or remove it "
                    "here",
                )
            )
    return problems


def client_keys(clients: Iterable[str], api_keys: Mapping[str, Sequence[KeySpec]]) -> tuple[ApiKey, ...]:
    """Every key the stack states, expired or not: each client's ``apiKeys`` entry, or its ``default`` key."""
    return tuple(
        ApiKey(client, spec.name, spec.expires) for client in clients for spec in api_keys.get(client, (KeySpec(),))
    )


def live_keys(keys: Iterable[ApiKey], today: date) -> tuple[ApiKey, ...]:
    """The keys the edge accepts on ``today``: every key whose ``expires`` day has not come."""
    return tuple(k for k in keys if k.expires is None or today < k.expires)


def expiry_warnings(keys: Iterable[ApiKey], api_keys: Mapping[str, Sequence[KeySpec]], today: date) -> list[str]:
    """A warning for each key that has expired (left out of the Secret by this `up`) or expires within
    :data:`EXPIRY_WARNING_DAYS` days, naming it where the stack file states it; and for each client left with no key."""
    keys = tuple(keys)
    warnings: list[str] = []
    for key in keys:
        if key.expires is None:
            continue
        index = next(i for i, s in enumerate(api_keys[key.client]) if s.name == key.name)
        where = f"apiKeys.{key.client}[{index}].expires"
        days = (key.expires - today).days
        if days <= 0:
            warnings.append(
                f"{where}: key {key.id!r} expired on {key.expires.isoformat()}; this update removes it from the "
                "edge (its requests get 401): remove it from the stack file"
            )
        elif days <= EXPIRY_WARNING_DAYS:
            warnings.append(
                f"{where}: key {key.id!r} expires on {key.expires.isoformat()} ({days} day(s)); give the client its "
                "next key now (add one to its list, `pulumi up`, `pulumi stack output apiKeys --show-secrets`)"
            )
    live = {k.client for k in live_keys(keys, today)}
    for client in dict.fromkeys(k.client for k in keys):
        if client not in live:
            warnings.append(
                f"apiKeys.{client}: every key of {client!r} has expired, so it has none: its requests get 401"
            )
    return warnings
