"""Closed-loop load: ``concurrency`` workers each send the next request as soon as the last one answers
(perf_analyzer's concurrency mode). HTTP: tritonclient's asyncio client (aiohttp), one task per worker. gRPC: one
thread per worker on a blocking stub of one shared channel: the blocking call's C core releases the GIL while it
waits and costs less Python per request than ``grpc.aio``'s event-loop round trip (0.6 ms lower p50 at
concurrency 1 in interleaved A/B runs on 2 cores, ``benchmarks/grpc_client_ab.py``; at 16 the difference is within
the machine's noise).

A request counts when it *started* inside the measurement window (after the warm-up); requests still in flight
when the window closes are awaited so their latency is measured and the server is left idle for the next level.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tritonft.bench.results import LevelResult
from tritonft.probe.contract import TextContract
from tritonft.probe.endpoint import Endpoint, Protocol


@dataclass(frozen=True)
class LoadPlan:
    """One benchmark: the endpoint, model, prompt and the levels to measure."""

    endpoint: Endpoint
    model: str
    contract: TextContract
    prompt: str
    concurrencies: tuple[int, ...]
    duration_s: float
    warmup_s: float
    timeout_s: float
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)


def grpc_request(plan: LoadPlan) -> Any:
    """The plan's one ``ModelInferRequest``, built once (like perf_analyzer) and sent as is by every worker."""
    import numpy as np
    from tritonclient.grpc import service_pb2
    from tritonclient.utils import serialize_byte_tensor

    text = np.array([[plan.prompt.encode("utf-8")]], dtype=np.object_)
    return service_pb2.ModelInferRequest(
        model_name=plan.model,
        inputs=[
            service_pb2.ModelInferRequest.InferInputTensor(
                name=plan.contract.text_input, datatype="BYTES", shape=[1, 1]
            )
        ],
        outputs=[service_pb2.ModelInferRequest.InferRequestedOutputTensor(name=plan.contract.text_output)],
        raw_input_contents=[serialize_byte_tensor(text).item()],
    )


def text_of(response: Any, output: str) -> str:
    """The first text of ``output`` in a gRPC ``ModelInferResponse``."""
    from tritonclient.utils import deserialize_bytes_tensor

    names = [tensor.name for tensor in response.outputs]
    if output not in names:
        raise RuntimeError(f"response has no output {output!r}")
    return str(deserialize_bytes_tensor(response.raw_output_contents[names.index(output)]).reshape(-1)[0])


class AsyncHttpClient:
    """One aiohttp-based client, shared by every worker task of a level (it multiplexes concurrent requests)."""

    def __init__(self, plan: LoadPlan) -> None:
        self.plan = plan
        self._client: Any = None

    async def __aenter__(self) -> AsyncHttpClient:
        import tritonclient.http.aio as http_aio

        self._client = http_aio.InferenceServerClient(
            self.plan.endpoint.address,
            ssl=self.plan.endpoint.ssl,
            conn_timeout=self.plan.timeout_s,
            conn_limit=max(self.plan.concurrencies) + 1,
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._client.close()

    async def infer(self) -> str:
        import numpy as np
        import tritonclient.http.aio as http_aio

        plan = self.plan
        batch = np.array([[plan.prompt.encode("utf-8")]], dtype=np.object_)
        http_in = http_aio.InferInput(plan.contract.text_input, [1, 1], "BYTES")
        http_in.set_data_from_numpy(batch, binary_data=False)  # MLServer has no binary tensor extension
        call = self._client.infer(
            plan.model,
            [http_in],
            outputs=[http_aio.InferRequestedOutput(plan.contract.text_output, binary_data=False)],
            headers={"Content-Type": "application/json", **plan.headers},
        )
        result = await asyncio.wait_for(call, timeout=plan.timeout_s)
        answer = result.as_numpy(plan.contract.text_output)
        if answer is None:
            raise RuntimeError(f"response has no output {plan.contract.text_output!r}")
        return str(answer.reshape(-1)[0])


@dataclass
class _Window:
    """One level's measurement window: requests that *started* inside it count."""

    start: float
    end: float
    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @classmethod
    def after_warmup(cls, plan: LoadPlan) -> _Window:
        start = time.perf_counter() + plan.warmup_s
        return cls(start, start + plan.duration_s)

    def record(self, t0: float, error: BaseException | None) -> None:
        if t0 < self.start:
            return
        if error is None:
            self.latencies.append(time.perf_counter() - t0)  # list.append is atomic: threads may share it
        else:
            self.errors.append(_named(error))

    def result(self, plan: LoadPlan, concurrency: int) -> tuple[LevelResult, str | None]:
        result = LevelResult.from_latencies(concurrency, self.latencies, len(self.errors), plan.duration_s)
        return result, self.errors[0] if self.errors else None


class BlockingGrpcClient:
    """gRPC through a blocking stub: one channel, one request message built once, shared by the worker threads."""

    def __init__(self, plan: LoadPlan) -> None:
        import grpc  # type: ignore[import-untyped]  # no types-grpcio in the lock

        self.plan = plan
        options = [("grpc.max_send_message_length", 2**31 - 1), ("grpc.max_receive_message_length", 2**31 - 1)]
        address = plan.endpoint.address
        self._channel = (
            grpc.secure_channel(address, grpc.ssl_channel_credentials(), options=options)
            if plan.endpoint.ssl
            else grpc.insecure_channel(address, options=options)
        )
        from tritonclient.grpc import service_pb2_grpc

        self._stub = service_pb2_grpc.GRPCInferenceServiceStub(self._channel)
        self._request = grpc_request(plan)
        self._metadata = tuple((k.lower(), v) for k, v in plan.headers.items())

    def close(self) -> None:
        self._channel.close()

    def infer(self) -> str:
        response = self._stub.ModelInfer(self._request, timeout=self.plan.timeout_s, metadata=self._metadata)
        return text_of(response, self.plan.contract.text_output)


def _thread_level(client: BlockingGrpcClient, plan: LoadPlan, concurrency: int) -> tuple[LevelResult, str | None]:
    window = _Window.after_warmup(plan)

    def worker() -> None:
        while (t0 := time.perf_counter()) < window.end:
            try:
                client.infer()  # bounded by the plan's timeout
            except Exception as exc:
                window.record(t0, exc)
                continue
            window.record(t0, None)

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return window.result(plan, concurrency)


async def _task_level(client: AsyncHttpClient, plan: LoadPlan, concurrency: int) -> tuple[LevelResult, str | None]:
    window = _Window.after_warmup(plan)

    async def worker() -> None:
        while (t0 := time.perf_counter()) < window.end:
            try:
                await client.infer()  # bounded by the plan's timeout
            except Exception as exc:
                window.record(t0, exc)
                continue
            window.record(t0, None)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return window.result(plan, concurrency)


async def run_levels(plan: LoadPlan, progress: Callable[[str], None] = lambda _msg: None) -> list[LevelResult]:
    """Check the model answers once, then measure each concurrency level in turn.

    Raises ``RuntimeError`` with the server's answer when even the first request fails.
    """
    results: list[LevelResult] = []
    first = "did not answer a first request"

    def report(concurrency: int, result: LevelResult, first_error: str | None) -> None:
        if first_error:
            progress(f"concurrency {concurrency}: {result.errors} failed request(s), first: {first_error}")
        results.append(result)

    def announce(concurrency: int) -> None:
        progress(f"concurrency {concurrency}: {plan.warmup_s:g} s warm-up + {plan.duration_s:g} s window")

    if plan.endpoint.protocol is Protocol.GRPC:
        client = BlockingGrpcClient(plan)
        try:
            try:
                await asyncio.to_thread(client.infer)
            except Exception as exc:
                raise RuntimeError(f"model {plan.model!r} at {plan.endpoint.url} {first}: {_named(exc)}") from exc
            for concurrency in plan.concurrencies:
                announce(concurrency)
                report(concurrency, *await asyncio.to_thread(_thread_level, client, plan, concurrency))
        finally:
            client.close()
        return results
    async with AsyncHttpClient(plan) as http:
        try:
            await http.infer()
        except Exception as exc:
            raise RuntimeError(f"model {plan.model!r} at {plan.endpoint.url} {first}: {_named(exc)}") from exc
        for concurrency in plan.concurrencies:
            announce(concurrency)
            report(concurrency, *await _task_level(http, plan, concurrency))
    return results


def _named(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"
