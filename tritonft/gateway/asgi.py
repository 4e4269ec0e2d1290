"""The gateway's ASGI plumbing, kept thin on purpose: an exact-path route table, the request body under a size
limit, JSON responses (orjson) and the lifespan protocol.

A Starlette ``Router`` with its default middleware stack (error and exception middleware, a ``send`` wrapper per
layer, regex route matching) cost the gateway about a tenth of its CPU per request; every OpenAI route is a fixed
path, so a dict lookup is all the routing it needs. Streaming answers still use Starlette's ``StreamingResponse``
(it watches for the client going away).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any

import orjson
from starlette.responses import Response

from tritonft.gateway.errors import ApiError
from tritonft.gateway.limits import ClientSlots, expired_on, key_expired

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

LOG = logging.getLogger("tritonft.gateway")


API_CLIENT_HEADER = b"x-tritonft-client"
"""``components.common.edge.CLIENT_HEADER``: where the edge names the client whose API key it accepted."""


@dataclass(slots=True)
class Call:
    """One HTTP request as a handler sees it; ``model`` is what the access log and metrics record."""

    scope: Scope
    receive: Receive
    model: str = ""

    @property
    def method(self) -> str:
        return str(self.scope["method"])

    @property
    def path(self) -> str:
        return str(self.scope["path"])

    @property
    def client(self) -> str:
        client = self.scope.get("client")
        return str(client[0]) if client else ""

    @property
    def api_client(self) -> str:
        """The authenticated API client the edge names in ``x-tritonft-client`` (Envoy Gateway sets it from the key it
        checked and overwrites whatever a caller sent); "" behind no such edge."""
        value = self.header(API_CLIENT_HEADER)
        return value.decode("latin-1") if value else ""

    def header(self, name: bytes) -> bytes | None:
        """The first value of header ``name`` (lower case), ``None`` when absent."""
        return next((value for key, value in self.scope["headers"] if key == name), None)

    async def body(self, limit: int) -> bytes:
        """The whole request body; a 413 :class:`ApiError` as soon as it is known to exceed ``limit`` bytes."""
        declared = self.header(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise _too_large(limit)
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await self.receive()
            if message["type"] != "http.request":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise _too_large(limit)
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    async def json(self, limit: int) -> Any:
        raw = await self.body(limit)
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise ApiError(400, f"the request body is not valid JSON: {exc}") from exc


def _too_large(limit: int) -> ApiError:
    return ApiError(413, f"the request body is larger than the {limit} byte limit", code="request_too_large")


class JSONResponse(Response):
    """``application/json`` rendered with orjson (UTF-8, compact), the encoding OpenAI clients expect."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


def error_response(error: ApiError) -> JSONResponse:
    headers = {"Retry-After": str(error.retry_after_s)} if error.retry_after_s is not None else None
    return JSONResponse(error.body(), status_code=error.status, headers=headers)


Handler = Callable[[Call], Awaitable[Response]]


@dataclass(frozen=True)
class Route:
    methods: frozenset[str]
    handler: Handler
    observed: str | None = None
    """The ``route`` label of its metrics and access-log line; ``None`` (health, metrics) records nothing."""
    per_client: bool = False
    """Counted in its client's requests in flight (:class:`~tritonft.gateway.limits.ClientSlots`): the inference
    routes, whose answers (streams) hold a slot of the edge for their whole length."""


@dataclass
class Lifespan:
    """ASGI lifespan: enter ``context`` at startup, leave it at shutdown."""

    context: Callable[[], AbstractAsyncContextManager[None]]
    _running: list[AbstractAsyncContextManager[None]] = field(default_factory=list, init=False)

    async def __call__(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    running = self.context()
                    await running.__aenter__()
                    self._running.append(running)
                except Exception as exc:
                    await send({"type": "lifespan.startup.failed", "message": f"{type(exc).__name__}: {exc}"})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                while self._running:
                    await self._running.pop().__aexit__(None, None, None)
                await send({"type": "lifespan.shutdown.complete"})
                return


Observer = Callable[[Call, str, int, float], None]
"""Called once per answered request of an observed route: (call, route label, status, seconds)."""


class App:
    """The ASGI application: ``routes`` by exact path; an :class:`ApiError` from a handler is answered in the OpenAI
    error shape, anything else as a 500 of the same shape (and logged with its traceback). A request of a
    ``per_client`` route counts in ``slots`` from before its handler runs until its answer has gone out (or the
    client left), and is answered 429 instead when its client is at the limit; one whose API key is in ``expiries``
    is answered 401 from that key's day on."""

    def __init__(
        self,
        routes: dict[str, Route],
        lifespan: Lifespan,
        observe: Observer,
        slots: ClientSlots | None = None,
        *,
        expiries: Mapping[str, date] | None = None,
        today: Callable[[], date] = lambda: datetime.now(UTC).date(),
    ) -> None:
        self.routes = routes
        self.lifespan = lifespan
        self.observe = observe
        self.slots = slots or ClientSlots(0)
        self.expiries = dict(expiries or {})
        """Key id -> its ``expires`` day: a request with that key is answered 401 from that day (UTC) on."""
        self.today = today

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        call = Call(scope, receive)
        started = time.monotonic()
        route = self.routes.get(call.path)
        held: str | None = None
        try:
            try:
                if route is None:
                    routes = ", ".join(sorted(self.routes))
                    raise ApiError(404, f"there is nothing at {call.path}; the routes are {routes}", code="not_found")
                if call.method not in route.methods:
                    allowed = ", ".join(sorted(route.methods))
                    raise ApiError(405, f"{call.path} accepts {allowed}, not {call.method}", code="method_not_allowed")
                if route.per_client:
                    key_id = call.api_client
                    day = expired_on(key_id, self.expiries, self.today()) if self.expiries else None
                    if day is not None:
                        raise key_expired(key_id, day)
                    held = self.slots.take(key_id)
                response = await route.handler(call)
            except ApiError as exc:
                response = error_response(exc)
            except Exception:
                LOG.exception("%s %s failed", call.method, call.path)
                response = error_response(ApiError(500, "the gateway failed; see its log", "server_error"))
            await response(scope, receive, send)
        finally:
            self.slots.give(held)
        if route is not None and route.observed is not None:
            self.observe(call, route.observed, response.status_code, time.monotonic() - started)
