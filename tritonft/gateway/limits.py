"""Each API client's requests in flight at this gateway pod, capped (issue 51).

The edge's concurrency cap (``maxConcurrentRequests``, Envoy's circuit breaker) is for every client together, and
Envoy Gateway has no per-client one: a single client could hold every slot, each for as long as its longest stream.
The gateway counts each client's requests from the moment it takes one until its answer, a stream included, has
gone out, and answers one more with 429 ``Retry-After`` (the OpenAI SDKs retry it) naming the limit.

A client is the one the edge names in ``x-tritonft-client`` (Envoy Gateway sets it from the API key it accepted and
overwrites whatever a caller sent): ``<client>`` or ``<client>.<key>``, counted per client, so a client that uses two
keys during a rotation's overlap has one allowance, not two. A request without the header did not pass the API-key
edge: a caller inside the cluster (only pods the gateway's NetworkPolicy admits: the edge's proxies, Prometheus, an
in-cluster probe) or any request of a stack without API keys. Those are not counted, on purpose: an in-cluster
probe or judge must not be refused because a client is busy, and without keys there is no client to tell apart
(the edge's cap still bounds them all).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date

from tritonft.gateway.errors import ApiError

MAX_BODY_BYTES = 1 << 20
"""The largest request body the gateway reads (``--max-body-bytes``' default): 413 beyond. The edge holds every route
to the same cap (``components.common.edge.rate_limit_policy_spec``), an encoder's own routes included."""
RETRY_AFTER_S = 1
"""``Retry-After`` of a refusal: a slot frees when one of the client's requests ends, which is what it waits for."""
LIMIT_KNOB = "maxConcurrentPerClient"
"""The stack setting that sets the limit (``tritonft gateway --max-in-flight-per-client``)."""


def client_of(key_id: str) -> str:
    """The client of a key id (``webapp.k2`` -> ``webapp``): client names are DNS labels, so hold no dot."""
    return key_id.split(".", 1)[0]


def admits(in_flight: int, limit: int) -> bool:
    """Whether a client with ``in_flight`` requests may start one more; ``limit`` 0 = no limit."""
    return limit <= 0 or in_flight < limit


def too_many_in_flight(client: str, limit: int) -> ApiError:
    """The 429 of a client at its limit, in OpenAI's error shape, naming the limit and what to do."""
    return ApiError(
        429,
        f"client {client!r} already has {limit} requests in flight at this gateway replica, its limit "
        f"({LIMIT_KNOB}); retry when one of them has ended, or send fewer at once",
        "requests",
        None,
        "concurrency_limit_exceeded",
        RETRY_AFTER_S,
    )


@dataclass
class ClientSlots:
    """The requests in flight per client; ``limit`` 0 counts nothing."""

    limit: int
    in_flight: dict[str, int] = field(default_factory=dict)

    def take(self, key_id: str) -> str | None:
        """Count a request of the client holding ``key_id`` (the header's value; "" = none): the client to
        :meth:`give` back when it ends, None when nothing was counted. Raises the 429 when the client is at its
        limit."""
        if self.limit <= 0 or not key_id:
            return None
        client = client_of(key_id)
        held = self.in_flight.get(client, 0)
        if not admits(held, self.limit):
            raise too_many_in_flight(client, self.limit)
        self.in_flight[client] = held + 1
        return client

    def give(self, client: str | None) -> None:
        """The request :meth:`take` counted for ``client`` has ended."""
        if client is None:
            return
        left = self.in_flight.get(client, 0) - 1
        if left > 0:
            self.in_flight[client] = left
        else:
            self.in_flight.pop(client, None)


def expired_on(key_id: str, expiries: Mapping[str, date], today: date) -> date | None:
    """The ``expires`` day of the key ``key_id`` when ``today`` is that day or later, else None (a key without a day,
    or no key: a request that did not pass the API-key edge)."""
    day = expiries.get(key_id) if key_id else None
    return day if day is not None and today >= day else None


def key_expired(key_id: str, day: date) -> ApiError:
    """The 401 of a key used on or after its ``expires`` day, in OpenAI's error shape."""
    return ApiError(
        401,
        f"API key {key_id!r} expired on {day.isoformat()} (apiKeys): use the client's next key (pulumi stack output "
        "apiKeys --show-secrets)",
        "invalid_request_error",
        None,
        "invalid_api_key",
    )
