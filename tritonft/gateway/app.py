"""The ASGI application: OpenAI routes, health, metrics, size limits and JSON access logs."""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from tritonft.gateway import sse
from tritonft.gateway.config import GatewayConfig, ServedModel
from tritonft.gateway.errors import ApiError, unknown_model
from tritonft.gateway.mapping import (
    EnsembleRequest,
    chat_body,
    completion_body,
    cut_at_stop,
    ensemble_request,
    stream_delta,
)
from tritonft.gateway.metrics import GatewayMetrics
from tritonft.gateway.triton import Triton

ACCESS_LOG = logging.getLogger("tritonft.gateway.access")
Handler = Callable[[Request], Awaitable[Response]]


def error_response(error: ApiError) -> JSONResponse:
    return JSONResponse(error.body(), status_code=error.status)


async def _json_body(request: Request, limit: int) -> Any:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise ApiError(413, f"the request body is larger than the {limit} byte limit", code="request_too_large")
    raw = b""
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > limit:
            raise ApiError(413, f"the request body is larger than the {limit} byte limit", code="request_too_large")
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise ApiError(400, f"the request body is not valid JSON: {exc}") from exc


def build_app(config: GatewayConfig, triton: Triton | None = None) -> Starlette:
    """The gateway for ``config``; ``triton`` defaults to one gRPC client per Triton endpoint of ``config``."""
    metrics = GatewayMetrics()
    clients: dict[str, Triton] = {}

    def client(model: str) -> Triton:
        url = config.url_of(model)
        if url not in clients:
            clients[url] = triton or Triton(url)
        return clients[url]

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        for name in config.names:
            client(name)
        yield
        for each in {id(c): c for c in clients.values()}.values():
            await each.close()

    def model_for(body: Any) -> ServedModel:
        name = body.get("model") if isinstance(body, dict) else None
        if not isinstance(name, str):
            raise ApiError(400, "model is required: the name of a served model (see GET /v1/models)", param="model")
        model = config.model(name)
        if model is None:
            raise unknown_model(name, config.names)
        return model

    async def collected(req: EnsembleRequest, prompt: str) -> list[str]:
        """A decoupled model answers only over a stream (Triton refuses ModelInfer): the completion is what its
        last response adds to the prompt, the text a ``stream: true`` request gets in pieces."""
        last = ""
        async for whole in client(req.model.name).stream(req, prompt, config.deadline_s):
            last = whole
        return [stream_delta("", last, prompt, True)]

    async def answer(req: EnsembleRequest, deadline: float) -> list[list[str]]:
        started = time.monotonic()
        triton = client(req.model.name)
        try:
            if req.model.streaming:
                return list(await asyncio.gather(*(collected(req, p) for p in req.prompts)))
            return list(
                await asyncio.gather(*(triton.generate(req, p, deadline, config.deadline_s) for p in req.prompts))
            )
        finally:
            metrics.triton_latency.labels(req.model.name).observe(time.monotonic() - started)

    async def stream_events(req: EnsembleRequest, rid: str, created: int, chat: bool) -> AsyncIterator[bytes]:
        kind = "chat.completion.chunk" if chat else "text_completion"

        def chunk(index: int, text: str, finish: str | None) -> bytes:
            if chat:
                choice: dict[str, Any] = {
                    "index": index,
                    "delta": {"content": text} if text else {},
                    "finish_reason": finish,
                }
            else:
                choice = {"index": index, "text": text, "logprobs": None, "finish_reason": finish}
            return sse.event(
                {"id": rid, "object": kind, "created": created, "model": req.model.name, "choices": [choice]}
            )

        try:
            if chat:
                yield sse.event(
                    {
                        "id": rid,
                        "object": kind,
                        "created": created,
                        "model": req.model.name,
                        "choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}],
                    }
                )
            for index, prompt in enumerate(req.prompts):
                sent, stopped = "", False
                if req.model.streaming:
                    async for whole in client(req.model.name).stream(req, prompt, config.deadline_s):
                        text, stopped = cut_at_stop(stream_delta("", whole, prompt, True), req.stop)
                        delta = text[len(sent) :]
                        sent = text
                        if delta:
                            yield chunk(index, delta, None)
                        if stopped:
                            break
                else:
                    whole = (
                        await answer(
                            EnsembleRequest(req.model, (prompt,), req.parameters, 1, False, req.stop),
                            time.monotonic() + config.deadline_s,
                        )
                    )[0][0]
                    sent, stopped = cut_at_stop(whole, req.stop)
                    yield chunk(index, sent, None)
                yield chunk(index, "", "stop" if stopped else "length")
        except ApiError as exc:
            yield sse.event(exc.body())
        yield sse.DONE

    async def completions(request: Request, chat: bool) -> Response:
        body = await _json_body(request, config.max_body_bytes)
        model = model_for(body)
        request.state.model = model.name
        req = ensemble_request(body, model, chat=chat)
        rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
        created = int(time.time())
        if req.stream:
            return StreamingResponse(stream_events(req, rid, created, chat), media_type="text/event-stream")
        answers = await answer(req, time.monotonic() + config.deadline_s)
        payload = chat_body(rid, created, req, answers[0]) if chat else completion_body(rid, created, req, answers)
        return JSONResponse(payload)

    async def post_completions(request: Request) -> Response:
        return await completions(request, chat=False)

    async def post_chat(request: Request) -> Response:
        return await completions(request, chat=True)

    async def get_models(_: Request) -> Response:
        data = [{"id": m.name, "object": "model", "created": 0, "owned_by": "triton-ft"} for m in config.models]
        return JSONResponse({"object": "list", "data": data})

    async def live(_: Request) -> Response:
        return PlainTextResponse("ok")

    async def ready(_: Request) -> Response:
        # Ready while some Triton serves all its models: with one Triton per model (a deployed stack), one model
        # rolling out or scaled to zero must not take every gateway replica, and so every model, out of service.
        by_url: dict[str, list[str]] = {}
        for name in config.names:
            by_url.setdefault(config.url_of(name), []).append(name)
        answers = await asyncio.gather(*(client(names[0]).ready(names, timeout_s=2.0) for names in by_url.values()))
        down = [name for ok, names in zip(answers, by_url.values(), strict=True) if not ok for name in names]
        if not down:
            return PlainTextResponse("ok")
        text = f"not ready: {', '.join(down)}"
        return PlainTextResponse(text, status_code=200 if any(answers) else 503)

    async def get_metrics(_: Request) -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    def observed(route: str, handler: Handler) -> Handler:
        async def wrapped(request: Request) -> Response:
            started = time.monotonic()
            request.state.model = ""
            try:
                response = await handler(request)
            except ApiError as exc:
                response = error_response(exc)
            elapsed = time.monotonic() - started
            model = str(request.state.model)
            metrics.requests.labels(route, model, str(response.status_code)).inc()
            metrics.latency.labels(route).observe(elapsed)
            ACCESS_LOG.info(
                json.dumps(
                    {
                        "ts": round(time.time(), 3),
                        "method": request.method,
                        "path": request.url.path,
                        "status": response.status_code,
                        "model": model,
                        "ms": round(elapsed * 1000, 2),
                        "client": request.client.host if request.client else "",
                    },
                    separators=(",", ":"),
                )
            )
            return response

        return wrapped

    routes = [
        Route("/v1/completions", observed("completions", post_completions), methods=["POST"]),
        Route("/v1/chat/completions", observed("chat", post_chat), methods=["POST"]),
        Route("/v1/models", observed("models", get_models), methods=["GET"]),
        Route("/health/live", live, methods=["GET"]),
        Route("/health/ready", ready, methods=["GET"]),
        Route("/metrics", get_metrics, methods=["GET"]),
    ]
    return Starlette(routes=routes, lifespan=lifespan)
