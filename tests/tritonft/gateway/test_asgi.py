"""The gateway's ASGI plumbing driven as uvicorn drives it (scope, receive, send): routing, errors in the OpenAI
shape, the body limit, the access log and the lifespan."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from starlette.responses import Response

from tritonft.gateway.accesslog import AccessLog
from tritonft.gateway.asgi import App, Call, JSONResponse, Lifespan, Route

LIMIT = 64


async def echo(call: Call) -> Response:
    body = await call.json(LIMIT)
    call.model = str(body.get("model", ""))
    return JSONResponse({"got": body})


async def broken(_: Call) -> Response:
    raise KeyError("an internal bug")


@asynccontextmanager
async def nothing() -> AsyncIterator[None]:
    yield


def app(observed: list[tuple[str, str, int]] | None = None, lifespan: Lifespan | None = None) -> App:
    routes = {
        "/v1/echo": Route(frozenset({"POST"}), echo, "echo"),
        "/v1/broken": Route(frozenset({"POST"}), broken, "broken"),
    }
    seen = observed if observed is not None else []
    return App(
        routes, lifespan or Lifespan(nothing), lambda call, route, status, _: seen.append((route, call.model, status))
    )


def request(
    gateway: App, method: str, path: str, chunks: list[bytes], headers: list[tuple[bytes, bytes]] | None = None
) -> tuple[int, dict[bytes, bytes], bytes]:
    """Status, headers and body of one request whose body arrives in ``chunks``."""
    scope = {"type": "http", "method": method, "path": path, "headers": headers or [], "client": ("10.0.0.7", 5000)}
    incoming = [
        {"type": "http.request", "body": chunk, "more_body": i < len(chunks) - 1} for i, chunk in enumerate(chunks)
    ]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return incoming.pop(0) if incoming else {"type": "http.disconnect"}

    async def send(message: Any) -> None:
        sent.append(message)

    asyncio.run(gateway(scope, receive, send))
    start, body = sent[0], b"".join(m.get("body", b"") for m in sent[1:])
    return start["status"], dict(start["headers"]), body


def test_a_routed_request_gets_its_handlers_json_answer() -> None:
    status, headers, body = request(app(), "POST", "/v1/echo", [b'{"model": "gpt", ', b'"x": "\xc3\xa9"}'])
    assert status == 200
    assert headers[b"content-type"] == b"application/json"
    assert json.loads(body) == {"got": {"model": "gpt", "x": "é"}}


def test_an_unknown_path_is_an_openai_style_404() -> None:
    status, _, body = request(app(), "POST", "/v2/echo", [b"{}"])
    assert status == 404
    error = json.loads(body)["error"]
    assert error["code"] == "not_found"
    assert "/v1/echo" in error["message"]


def test_a_wrong_method_is_a_405_naming_the_allowed_one() -> None:
    status, _, body = request(app(), "GET", "/v1/echo", [b""])
    assert status == 405
    assert "accepts POST" in json.loads(body)["error"]["message"]


def test_a_declared_length_over_the_limit_is_a_413_before_reading() -> None:
    status, _, body = request(app(), "POST", "/v1/echo", [b"{}"], [(b"content-length", str(LIMIT + 1).encode())])
    assert status == 413
    assert json.loads(body)["error"]["code"] == "request_too_large"


def test_a_chunked_body_growing_over_the_limit_is_a_413() -> None:
    status, _, _ = request(app(), "POST", "/v1/echo", [b" " * 40, b" " * 40])
    assert status == 413


def test_a_body_that_is_not_json_is_a_400_saying_so() -> None:
    status, _, body = request(app(), "POST", "/v1/echo", [b"{nope"])
    assert status == 400
    assert "not valid JSON" in json.loads(body)["error"]["message"]


def test_a_handler_bug_is_a_500_in_the_openai_shape_without_internals() -> None:
    status, _, body = request(app(), "POST", "/v1/broken", [b"{}"])
    assert status == 500
    error = json.loads(body)["error"]
    assert error["type"] == "server_error"
    assert "KeyError" not in error["message"]


def test_every_answer_of_an_observed_route_is_observed_with_its_model_and_status() -> None:
    seen: list[tuple[str, str, int]] = []
    gateway = app(seen)
    request(gateway, "POST", "/v1/echo", [b'{"model": "gpt"}'])
    request(gateway, "POST", "/v1/echo", [b"{nope"])
    request(gateway, "POST", "/nowhere", [b"{}"])
    assert seen == [("echo", "gpt", 200), ("echo", "", 400)]


def test_the_lifespan_enters_at_startup_and_leaves_at_shutdown() -> None:
    events: list[str] = []

    @asynccontextmanager
    async def tracked() -> AsyncIterator[None]:
        events.append("enter")
        yield
        events.append("exit")

    messages = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]
    sent: list[str] = []

    async def receive() -> dict[str, Any]:
        return messages.pop(0)

    async def send(message: Any) -> None:
        sent.append(message["type"])

    asyncio.run(app(lifespan=Lifespan(tracked))({"type": "lifespan"}, receive, send))
    assert events == ["enter", "exit"]
    assert sent == ["lifespan.startup.complete", "lifespan.shutdown.complete"]


def test_access_lines_queued_in_one_loop_turn_are_all_written_as_json_lines() -> None:
    read_end, write_end = os.pipe()
    log = AccessLog(write_end)

    async def turn() -> None:
        for n in range(3):
            log.write({"n": n, "path": "/v1/completions"})
        await asyncio.sleep(0)

    try:
        asyncio.run(turn())
        lines = os.read(read_end, 4096).decode().splitlines()
    finally:
        os.close(read_end)
        os.close(write_end)
    assert [json.loads(line) for line in lines] == [{"n": n, "path": "/v1/completions"} for n in range(3)]


def test_an_access_line_written_outside_an_event_loop_is_written_at_once() -> None:
    entry = {"status": 200, "model": "gpt"}
    read_end, write_end = os.pipe()
    try:
        AccessLog(write_end).write(entry)
        assert json.loads(os.read(read_end, 4096)) == entry
    finally:
        os.close(read_end)
        os.close(write_end)


def test_the_access_log_names_the_api_client_the_edge_authenticated() -> None:
    from tritonft.gateway.app import build_app
    from tritonft.gateway.config import GatewayConfig

    read_end, write_end = os.pipe()
    try:
        log = AccessLog(write_end)
        gateway = build_app(GatewayConfig(triton_url="127.0.0.1:1", models=()), access_log=log)
        status, _, _ = request(gateway, "GET", "/v1/models", [b""], [(b"x-tritonft-client", b"webapp")])
        log.flush()  # a running gateway's loop flushes on its next turn; this one's loop is gone
        os.set_blocking(read_end, False)  # nothing logged fails here at once instead of waiting
        line = json.loads(os.read(read_end, 4096).decode().splitlines()[-1])
    finally:
        os.close(read_end)
        os.close(write_end)
    assert status == 200
    assert (line["path"], line["apiClient"], line["client"]) == ("/v1/models", "webapp", "10.0.0.7")


def test_without_the_edges_header_the_api_client_is_empty() -> None:
    from tritonft.gateway.asgi import Call

    async def nothing() -> dict[str, Any]:
        return {}

    assert Call({"headers": []}, nothing).api_client == ""
