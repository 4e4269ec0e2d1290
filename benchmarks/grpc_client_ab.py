"""A/B of the two ways a Python load generator can drive Triton's gRPC endpoint: blocking-stub threads vs grpc.aio.

The served repository is the one ``benchmarks/triton_bench.py`` serves (the ``dev`` stack's ``gpt2``, FT step
stood in for, on the bundled real Triton); both clients send the same prebuilt ``ModelInferRequest``
(``tritonft.bench.loadgen.grpc_request``) in a closed loop of ``c`` workers for ``--seconds``, interleaved per
repetition so that a busy neighbour hurts both alike. Prints every window and the medians of p50 and throughput.
``--pin`` puts the server on CPU 0 and the clients on CPU 1.

Usage: .venv/bin/python benchmarks/grpc_client_ab.py [--reps 7] [--seconds 2] [--concurrency 1,16] [--pin]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import grpc  # type: ignore[import-untyped]  # no types-grpcio in the lock
from tritonclient.grpc import service_pb2_grpc

from tests.system.realtriton.repos import serve_ready_repository, stack_specs
from tests.tritonft.repo.conftest import train_gpt_tokenizer
from tritonft.bench.loadgen import LoadPlan, grpc_request
from tritonft.local_triton import LocalTriton, prepare_runtime
from tritonft.probe.contract import TextContract
from tritonft.probe.endpoint import parse_endpoint
from tritonft.spec import Family

PROMPT = "The quick brown fox jumps over the lazy dog."


def blocking(address: str, request: object, concurrency: int, seconds: float) -> tuple[float, float]:
    channel = grpc.insecure_channel(address)
    stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
    stub.ModelInfer(request)
    latencies: list[float] = []
    end = time.perf_counter() + seconds

    def worker() -> None:
        while (t0 := time.perf_counter()) < end:
            stub.ModelInfer(request)
            latencies.append(time.perf_counter() - t0)

    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    channel.close()
    return len(latencies) / seconds, statistics.median(latencies) * 1000


async def aio(address: str, request: object, concurrency: int, seconds: float) -> tuple[float, float]:
    channel = grpc.aio.insecure_channel(address)
    stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
    await stub.ModelInfer(request)
    latencies: list[float] = []
    end = time.perf_counter() + seconds

    async def worker() -> None:
        while (t0 := time.perf_counter()) < end:
            await stub.ModelInfer(request)
            latencies.append(time.perf_counter() - t0)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    await channel.close()
    return len(latencies) / seconds, statistics.median(latencies) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--concurrency", default="1,16")
    parser.add_argument("--pin", action="store_true", help="server on CPU 0, clients on CPU 1")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tritonft-grpc-ab-"))
    tokenizer_dir = train_gpt_tokenizer(work / "tokenizer")
    [spec] = [s for s in stack_specs("dev") if s.name == "gpt2"]
    repository = serve_ready_repository([spec], work / "repo", {Family.GPT2: tokenizer_dir})
    if args.pin:
        os.sched_setaffinity(0, {0})
    with LocalTriton(prepare_runtime(), repository, log_path=work / "tritonserver.log") as server:
        if args.pin:
            os.sched_setaffinity(0, {1})
        plan = LoadPlan(
            endpoint=parse_endpoint(f"grpc://{server.grpc_url}"),
            model="gpt2",
            contract=TextContract.simple(),
            prompt=PROMPT,
            concurrencies=(1,),
            duration_s=args.seconds,
            warmup_s=0,
            timeout_s=30,
        )
        request = grpc_request(plan)
        for level in (int(c) for c in args.concurrency.split(",")):
            rows: dict[str, list[tuple[float, float]]] = {"blocking threads": [], "grpc.aio": []}
            for rep in range(1, args.reps + 1):
                rows["blocking threads"].append(blocking(server.grpc_url, request, level, args.seconds))
                rows["grpc.aio"].append(asyncio.run(aio(server.grpc_url, request, level, args.seconds)))
                print(
                    f"c={level:<2} rep {rep}: "
                    + " | ".join(f"{name} {r[-1][0]:7.1f}/s p50 {r[-1][1]:6.2f} ms" for name, r in rows.items()),
                    flush=True,
                )
            for name, runs in rows.items():
                rps = statistics.median(r[0] for r in runs)
                p50 = statistics.median(r[1] for r in runs)
                print(f"c={level:<2} median {name:<16} {rps:7.1f} infer/s  p50 {p50:6.2f} ms", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
