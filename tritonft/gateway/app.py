"""The gateway's routes: OpenAI completions, chat and models, health and metrics; metrics and a JSON access-log
line per answered OpenAI request."""

from __future__ import annotations

import asyncio
import itertools
import os
import time
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing, asynccontextmanager
from dataclasses import replace
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.responses import PlainTextResponse, Response, StreamingResponse

from tritonft.gateway import embeddings, vllm
from tritonft.gateway.accesslog import AccessLog
from tritonft.gateway.asgi import App, Call, JSONResponse, Lifespan, Route
from tritonft.gateway.coalesce import Coalescer
from tritonft.gateway.config import GatewayConfig, ServedModel
from tritonft.gateway.errors import ApiError, client_error, deadline_expired, unknown_model
from tritonft.gateway.health import readiness
from tritonft.gateway.limits import ClientSlots
from tritonft.gateway.mapping import (
    Beam,
    EnsembleRequest,
    Row,
    chat_body,
    choices,
    completion_body,
    cut_at_stop,
    ensemble_request,
    held_back,
    stream_delta,
    usage,
)
from tritonft.gateway.metrics import GatewayMetrics
from tritonft.gateway.streaming import Chunks, primed
from tritonft.gateway.triton import CLOSE_GRACE_S, Triton

GET = frozenset({"GET", "HEAD"})
POST = frozenset({"POST"})


def model_list(config: GatewayConfig) -> dict[str, Any]:
    """``GET /v1/models``: every served model, generators then embedders (OpenAI's ``ListModelsResponse``)."""
    return {
        "object": "list",
        "data": [{"id": name, "object": "model", "created": 0, "owned_by": "triton-ft"} for name in config.names],
    }


def build_app(config: GatewayConfig, triton: Triton | None = None, access_log: AccessLog | None = None) -> App:
    """The gateway for ``config``; ``triton`` defaults to one gRPC client per Triton endpoint of ``config``,
    ``access_log`` to JSON lines on stderr."""
    metrics = GatewayMetrics(tuple(config.names))
    access_log = access_log or AccessLog()
    clients: dict[str, Triton] = {}
    # Completion ids: a random per-process prefix and a counter (unique without a urandom call per request).
    id_prefix = os.urandom(8).hex()
    serial = itertools.count(1)

    def client(model: str) -> Triton:
        url = config.url_of(model)
        if url not in clients:
            # A pod that left DNS (draining, unready) keeps its calls until the longest of them may have ended.
            longest = max(config.deadline_of(name) for name in config.names if config.url_of(name) == url)
            clients[url] = triton or Triton(url, close_grace_s=max(CLOSE_GRACE_S, longest))
        return clients[url]

    @asynccontextmanager
    async def lifespan() -> AsyncIterator[None]:
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

    async def streamed(req: EnsembleRequest, prompt: str) -> AsyncGenerator[Beam, None]:
        """A decoupled model's responses to ``prompt`` (the whole sequence so far), timed into its metrics: the
        first response, and the stream until it ended or was abandoned. Closing it cancels the Triton call."""
        started = time.monotonic()
        first = True
        try:
            async with aclosing(client(req.model.name).stream(req, prompt, req.model.deadline_s)) as responses:
                async for whole in responses:
                    if first:
                        metrics.triton_first_response(req.model.name, time.monotonic() - started)
                        first = False
                    yield whole
        finally:
            metrics.triton_waited(req.model.name, time.monotonic() - started)

    def dropped(task: asyncio.Future[Any]) -> None:
        """``task`` no longer wanted: cancelled if running, its error (if it failed) retrieved, not logged as lost."""
        if task.done() and not task.cancelled():
            task.exception()
        task.cancel()

    async def prompt_tokens(model: ServedModel, prompt: str) -> int:
        """``prompt``'s token count from the model's tokenizer (a streaming ensemble does not return it)."""
        return await client(model.name).prompt_tokens(model.preprocessing, prompt, model.deadline_s)

    def generated(model: ServedModel, whole: Beam, prompt: str, prompt_count: int) -> Beam:
        """A streamed response (the whole sequence so far) as the completion it holds: text and token count."""
        count = whole.tokens - prompt_count if model.prompt_in_stream else whole.tokens
        return Beam(stream_delta("", whole.text, prompt, True), max(count, 0))

    async def collected(req: EnsembleRequest, prompt: str) -> Row:
        """A decoupled model answers only over a stream (Triton refuses ModelInfer): the completion is what its
        last response adds to the prompt, the text a ``stream: true`` request gets in pieces."""
        last = Beam("", 0)
        counting = asyncio.ensure_future(prompt_tokens(req.model, prompt))
        try:
            async with aclosing(streamed(req, prompt)) as responses:
                async for whole in responses:
                    last = whole
            prompt_count = await counting
        finally:
            dropped(counting)
        return Row((generated(req.model, last, prompt, prompt_count),), prompt_count)

    async def send(req: EnsembleRequest, prompts: tuple[str, ...], deadline: float) -> list[Row]:
        metrics.triton_called(req.model.name, len(prompts))
        return await client(req.model.name).generate_rows(req, prompts, deadline, req.model.deadline_s)

    coalescer = Coalescer(send, config.deadline_s, config.calls_in_flight, enabled=config.coalesce)

    async def call_rows(req: EnsembleRequest, deadline: float) -> list[Row]:
        if req.model.streaming:  # each stream is timed by streamed()
            return list(await asyncio.gather(*(collected(req, p) for p in req.prompts)))
        started = time.monotonic()
        try:
            return await coalescer.answer(req, deadline)
        finally:
            metrics.triton_waited(req.model.name, time.monotonic() - started)

    async def answer(req: EnsembleRequest, deadline: float) -> list[Row]:
        """One :class:`Row` per prompt whose beams are the request's ``n`` choices."""
        parts = req.choice_requests()
        if len(parts) == 1:
            return choices(req, [await call_rows(req, deadline)])
        return choices(req, list(await asyncio.gather(*(call_rows(part, deadline) for part in parts))))

    async def pieces(req: EnsembleRequest, chunks: Chunks) -> AsyncGenerator[bytes, None]:
        """Each prompt's completion as chunk events, prompt after prompt: a decoupled model's as it generates it,
        another's as one piece; then, when asked, the usage of them all."""
        rows: list[Row] = []
        for index, prompt in enumerate(req.prompts):
            sent, stopped = "", False
            # echo: the prompt goes with the first piece of the completion, so that an error before the model's
            # first token is still answered as an HTTP error (streaming.primed)
            head = prompt if req.echo else ""
            if req.model.streaming:
                text, last = "", Beam("", 0)
                counting = asyncio.ensure_future(prompt_tokens(req.model, prompt)) if req.include_usage else None
                try:
                    async with aclosing(streamed(req, prompt)) as responses:
                        async for whole in responses:
                            last = whole
                            text, stopped = cut_at_stop(stream_delta("", whole.text, prompt, True), req.stop)
                            ready = text if stopped else text[: len(text) - held_back(text, req.stop)]
                            if len(ready) > len(sent):
                                yield chunks.piece(index, head + ready[len(sent) :], None)
                                sent, head = ready, ""
                            if stopped:
                                break
                    if len(text) > len(sent):  # the model ended on what only looked like the start of a stop phrase
                        yield chunks.piece(index, head + text[len(sent) :], None)
                        head = ""
                    if counting is not None:
                        prompt_count = await counting
                        rows.append(Row((generated(req.model, last, prompt, prompt_count),), prompt_count))
                finally:
                    if counting is not None:
                        dropped(counting)
            else:
                row = (
                    await answer(
                        replace(req, prompts=(prompt,), n=1),
                        time.monotonic() + req.model.deadline_s,
                    )
                )[0]
                rows.append(row)
                sent, stopped = cut_at_stop(row.beams[0].text, req.stop)
                yield chunks.piece(index, head + sent, None)
                head = ""
            yield chunks.piece(index, head, "stop" if stopped else "length")
        if req.include_usage:
            yield chunks.usage(usage(rows))

    async def vllm_completions(model: ServedModel, body: Any, chat: bool, rid: str, created: int) -> Response:
        """A vLLM model's completion or chat (:mod:`tritonft.gateway.vllm`)."""
        req = vllm.vllm_request(body, model, chat=chat)
        timings = (metrics.triton_first_response, metrics.triton_waited)
        deadline_s = model.deadline_s if req.stream else config.unstreamed_deadline_of(model)
        engine = vllm.Engine(client(model.name), deadline_s, *timings)

        def answered(error: ApiError) -> ApiError:
            return client_error(error, model.name, config.scales_to_zero)

        try:
            if req.stream:
                chunks = Chunks(rid, created, model.name, chat, req.include_usage)
                stream = vllm.events(engine, req, chunks)
                events = await primed(chunks.opening(), stream, answered)
                return StreamingResponse(events, media_type="text/event-stream")
            metrics.triton_called(model.name, len(req.prompts))
            answers = await asyncio.wait_for(vllm.answers(engine, req), deadline_s)
        except TimeoutError as exc:
            raise deadline_expired(deadline_s, stream_for_longer=deadline_s < model.deadline_s) from exc
        except ApiError as exc:
            if exc.code == "timeout" and deadline_s < model.deadline_s:
                raise deadline_expired(deadline_s, stream_for_longer=True) from exc
            error = answered(exc)
            if error is exc:
                raise
            raise error from exc
        if chat:
            return JSONResponse(vllm.chat_body(rid, created, req, answers[0]))
        return JSONResponse(vllm.completion_body(rid, created, req, answers))

    async def completions(call: Call, chat: bool) -> Response:
        body = await call.json(config.max_body_bytes)
        model = model_for(body)
        call.model = model.name
        rid = f"{'chatcmpl' if chat else 'cmpl'}-{id_prefix}{next(serial):016x}"
        created = int(time.time())
        if model.vllm:
            return await vllm_completions(model, body, chat, rid, created)
        req = ensemble_request(body, model, chat=chat)

        def answered(error: ApiError) -> ApiError:
            return client_error(error, model.name, config.scales_to_zero)

        try:
            if req.stream:
                chunks = Chunks(rid, created, model.name, chat, req.include_usage)
                events = await primed(chunks.opening(), pieces(req, chunks), answered)
                return StreamingResponse(events, media_type="text/event-stream")
            rows = await answer(req, time.monotonic() + config.unstreamed_deadline_of(model))
        except ApiError as exc:
            error = answered(exc)
            if error is exc:
                raise
            raise error from exc
        payload = chat_body(rid, created, req, rows[0]) if chat else completion_body(rid, created, req, rows)
        return JSONResponse(payload)

    async def post_completions(call: Call) -> Response:
        return await completions(call, chat=False)

    async def post_chat(call: Call) -> Response:
        return await completions(call, chat=True)

    async def post_embeddings(call: Call) -> Response:
        body = await call.json(config.max_body_bytes)
        name = body.get("model") if isinstance(body, dict) else None
        if not isinstance(name, str):
            raise ApiError(400, "model is required: the name of a served model (see GET /v1/models)", param="model")
        model = config.embedder(name)
        if model is None:
            if config.model(name) is not None:
                raise ApiError(
                    400,
                    f"model {name!r} generates text; /v1/embeddings needs an embedding model "
                    f"({', '.join(m.name for m in config.embedders) or 'none served'})",
                    param="model",
                    code="model_not_embedding",
                )
            raise unknown_model(name, config.names)
        call.model = model.name
        request = embeddings.parse_request(body)
        try:
            triton = client(model.name)
            await triton.refresh()
            vectors, tokens = await embeddings.embed(
                triton.stub, model, request, time.monotonic() + config.deadline_s, config.deadline_s
            )
        except ApiError as exc:
            error = client_error(exc, model.name, config.scales_to_zero)
            if error is exc:
                raise
            raise error from exc
        return JSONResponse(embeddings.response_body(model.name, request, vectors, tokens))

    models_body = model_list(config)

    async def get_models(_: Call) -> Response:
        return JSONResponse(models_body)

    async def live(_: Call) -> Response:
        return PlainTextResponse("ok")

    async def ready(_: Call) -> Response:
        by_url: dict[str, list[str]] = {}
        for name in config.names:
            by_url.setdefault(config.url_of(name), []).append(name)
        answers = await asyncio.gather(*(client(names[0]).ready(names, timeout_s=2.0) for names in by_url.values()))
        down = [name for ok, names in zip(answers, by_url.values(), strict=True) if not ok for name in names]
        status, text = readiness(down, any(answers), config.scales_to_zero)
        return PlainTextResponse(text, status_code=status)

    async def get_metrics(_: Call) -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    def observe(call: Call, route: str, status: int, elapsed: float) -> None:
        metrics.answered(route, call.model, status, elapsed)
        access_log.write(
            {
                "ts": round(time.time(), 3),
                "method": call.method,
                "path": call.path,
                "status": status,
                "model": call.model,
                "ms": round(elapsed * 1000, 2),
                "client": call.client,
                "apiClient": call.api_client,
            }
        )

    routes = {
        "/v1/completions": Route(POST, post_completions, "completions", per_client=True),
        "/v1/chat/completions": Route(POST, post_chat, "chat", per_client=True),
        "/v1/embeddings": Route(POST, post_embeddings, "embeddings", per_client=True),
        "/v1/models": Route(GET, get_models, "models"),
        "/health/live": Route(GET, live),
        "/health/ready": Route(GET, ready),
        "/metrics": Route(GET, get_metrics),
    }
    return App(
        routes, Lifespan(lifespan), observe, ClientSlots(config.max_in_flight_per_client), expiries=config.key_expiries
    )
