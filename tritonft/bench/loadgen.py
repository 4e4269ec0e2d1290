"""Closed-loop async load: ``concurrency`` workers each send the next request as soon as the last one answers
(perf_analyzer's concurrency mode), using tritonclient's asyncio clients (aiohttp for HTTP, grpc.aio for gRPC).

A request counts when it *started* inside the measurement window (after the warm-up); requests still in flight
when the window closes are awaited so their latency is measured and the server is left idle for the next level.
"""

from __future__ import annotations

import asyncio
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


class AsyncTextClient:
    """One aio client, shared by every worker of a level (both transports multiplex concurrent requests).

    gRPC sends one request message built once (like perf_analyzer) straight through the generated stub, so the
    client spends its CPU on the transport, not on rebuilding the same protobuf: on a machine where client and
    server share the cores, that keeps the measurement about the server.
    """

    def __init__(self, plan: LoadPlan) -> None:
        self.plan = plan
        self._client: Any = None
        self._channel: Any = None
        self._request: Any = None
        self._metadata: tuple[tuple[str, str], ...] = tuple((k.lower(), v) for k, v in plan.headers.items())

    async def __aenter__(self) -> AsyncTextClient:
        if self.plan.endpoint.protocol is Protocol.HTTP:
            import tritonclient.http.aio as http_aio

            self._client = http_aio.InferenceServerClient(
                self.plan.endpoint.address,
                ssl=self.plan.endpoint.ssl,
                conn_timeout=self.plan.timeout_s,
                conn_limit=max(self.plan.concurrencies) + 1,
            )
        else:
            import grpc  # type: ignore[import-untyped]  # no types-grpcio in the lock
            import numpy as np
            from tritonclient.grpc import service_pb2, service_pb2_grpc
            from tritonclient.utils import serialize_byte_tensor

            options = [("grpc.max_send_message_length", 2**31 - 1), ("grpc.max_receive_message_length", 2**31 - 1)]
            address = self.plan.endpoint.address
            self._channel = (
                grpc.aio.secure_channel(address, grpc.ssl_channel_credentials(), options=options)
                if self.plan.endpoint.ssl
                else grpc.aio.insecure_channel(address, options=options)
            )
            self._client = service_pb2_grpc.GRPCInferenceServiceStub(self._channel)
            text = np.array([[self.plan.prompt.encode("utf-8")]], dtype=np.object_)
            self._request = service_pb2.ModelInferRequest(
                model_name=self.plan.model,
                inputs=[
                    service_pb2.ModelInferRequest.InferInputTensor(
                        name=self.plan.contract.text_input, datatype="BYTES", shape=[1, 1]
                    )
                ],
                outputs=[service_pb2.ModelInferRequest.InferRequestedOutputTensor(name=self.plan.contract.text_output)],
                raw_input_contents=[serialize_byte_tensor(text).item()],
            )
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._channel is not None:
            await self._channel.close()
        else:
            await self._client.close()

    async def infer(self) -> str:
        import numpy as np

        plan = self.plan
        batch = np.array([[plan.prompt.encode("utf-8")]], dtype=np.object_)
        if plan.endpoint.protocol is Protocol.HTTP:
            import tritonclient.http.aio as http_aio

            http_in = http_aio.InferInput(plan.contract.text_input, [1, 1], "BYTES")
            http_in.set_data_from_numpy(batch, binary_data=False)  # MLServer has no binary tensor extension
            call = self._client.infer(
                plan.model,
                [http_in],
                outputs=[http_aio.InferRequestedOutput(plan.contract.text_output, binary_data=False)],
                headers={"Content-Type": "application/json", **plan.headers},
            )
            result = await asyncio.wait_for(call, timeout=plan.timeout_s)
        else:
            return await self._infer_grpc()
        answer = result.as_numpy(plan.contract.text_output)
        if answer is None:
            raise RuntimeError(f"response has no output {plan.contract.text_output!r}")
        return str(answer.reshape(-1)[0])

    async def _infer_grpc(self) -> str:
        from tritonclient.utils import deserialize_bytes_tensor

        response = await self._client.ModelInfer(self._request, timeout=self.plan.timeout_s, metadata=self._metadata)
        names = [output.name for output in response.outputs]
        if self.plan.contract.text_output not in names:
            raise RuntimeError(f"response has no output {self.plan.contract.text_output!r}")
        raw = response.raw_output_contents[names.index(self.plan.contract.text_output)]
        return str(deserialize_bytes_tensor(raw).reshape(-1)[0])


async def _level(client: AsyncTextClient, plan: LoadPlan, concurrency: int) -> tuple[LevelResult, str | None]:
    loop_start = time.perf_counter()
    window_start = loop_start + plan.warmup_s
    window_end = window_start + plan.duration_s
    latencies: list[float] = []
    errors = 0
    first_error: str | None = None

    async def worker() -> None:
        nonlocal errors, first_error
        while (t0 := time.perf_counter()) < window_end:
            try:
                await client.infer()  # bounded by the plan's timeout
            except Exception as exc:
                if t0 >= window_start:
                    errors += 1
                    first_error = first_error or f"{type(exc).__name__}: {exc}"
                continue
            if t0 >= window_start:
                latencies.append(time.perf_counter() - t0)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return LevelResult.from_latencies(concurrency, latencies, errors, plan.duration_s), first_error


async def run_levels(plan: LoadPlan, progress: Callable[[str], None] = lambda _msg: None) -> list[LevelResult]:
    """Check the model answers once, then measure each concurrency level in turn.

    Raises ``RuntimeError`` with the server's answer when even the first request fails.
    """
    results: list[LevelResult] = []
    async with AsyncTextClient(plan) as client:
        try:
            await client.infer()
        except Exception as exc:
            raise RuntimeError(
                f"model {plan.model!r} at {plan.endpoint.url} did not answer a first request: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        for concurrency in plan.concurrencies:
            progress(f"concurrency {concurrency}: {plan.warmup_s:g} s warm-up + {plan.duration_s:g} s window")
            result, first_error = await _level(client, plan, concurrency)
            if first_error:
                progress(f"concurrency {concurrency}: {result.errors} failed request(s), first: {first_error}")
            results.append(result)
    return results
