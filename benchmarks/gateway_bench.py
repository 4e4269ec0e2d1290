"""Seed 003's before/after in one run: the ensemble called directly over gRPC vs through ``tritonft gateway``.

The served repository is the ``dev`` stack's ``gpt2`` rendered by ``tritonft.repo`` with a small trained byte-level
BPE tokenizer, the FT step stood in for (``tritonft.standin``), on the bundled real Triton
(``tritonft.local_triton``). The gateway runs as the container runs it (``python -m tritonft gateway``, one
uvicorn process). Direct: ``tritonclient.grpc.aio`` with the same inputs the gateway sends (greedy, 16 tokens).
Through the gateway: ``POST /v1/completions`` with ``httpx2`` (the transport of the ``openai`` client), keep-alive.

Closed loop per concurrency level (1 and 8): ``c`` workers send back to back for ``--seconds``; per run the p50/p95
latency and the throughput of both paths, then medians over ``--runs``: added p50/p95 (ms) and the throughput
ratio gateway/direct.

Usage: .venv/bin/python benchmarks/gateway_bench.py [--runs 3] [--seconds 5] [--concurrency 1,8]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx2 as httpx

from tests.gateway.server import GatewayProcess
from tests.realtriton.repos import serve_ready_repository, stack_specs
from tests.repo.conftest import train_gpt_tokenizer
from tritonft.gateway.config import ServedModel
from tritonft.gateway.mapping import ensemble_request
from tritonft.gateway.triton import ensemble_inputs
from tritonft.local_triton import LocalTriton, prepare_runtime
from tritonft.spec import Family

PROMPT = "The quick brown fox jumps over the lazy dog."
MODEL = "gpt2"
BODY = {"model": MODEL, "prompt": PROMPT, "max_tokens": 16, "temperature": 0}

Call = Callable[[], Awaitable[None]]


async def closed_loop(call: Call, concurrency: int, seconds: float) -> tuple[float, float, float]:
    """(p50 ms, p95 ms, requests/s) of ``concurrency`` workers calling back to back for ``seconds``."""
    latencies: list[float] = []
    stop = time.monotonic() + seconds

    async def worker() -> None:
        while time.monotonic() < stop:
            started = time.perf_counter()
            await call()
            latencies.append((time.perf_counter() - started) * 1000)

    for _ in range(3):  # warm-up
        await call()
    began = time.monotonic()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.monotonic() - began
    q = statistics.quantiles(latencies, n=100)
    return q[49], q[94], len(latencies) / elapsed


async def measure(
    triton: LocalTriton, gateway: GatewayProcess, levels: list[int], seconds: float
) -> dict[int, dict[str, float]]:
    from tritonclient.grpc import aio

    served = ServedModel(MODEL, Family.GPT2, streaming=False, max_output_len=128, max_input_len=512)
    request = ensemble_request(BODY, served)
    direct_client = aio.InferenceServerClient(triton.grpc_url)
    http = httpx.AsyncClient(base_url=gateway.url, timeout=30, limits=httpx.Limits(max_connections=64))

    async def direct() -> None:
        result = await direct_client.infer(MODEL, ensemble_inputs(request, PROMPT))
        assert result.as_numpy("text_output") is not None

    async def through() -> None:
        answer = await http.post("/v1/completions", json=BODY)
        assert answer.status_code == 200, answer.text

    out: dict[int, dict[str, float]] = {}
    try:
        for level in levels:
            d50, d95, dtp = await closed_loop(direct, level, seconds)
            g50, g95, gtp = await closed_loop(through, level, seconds)
            out[level] = {"d50": d50, "d95": d95, "dtp": dtp, "g50": g50, "g95": g95, "gtp": gtp}
    finally:
        await direct_client.close()
        await http.aclose()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--concurrency", default="1,8")
    args = parser.parse_args()
    levels = [int(x) for x in args.concurrency.split(",")]
    with tempfile.TemporaryDirectory(prefix="gateway-bench-") as scratch:
        root = Path(scratch)
        spec = next(s for s in stack_specs("dev") if s.name == MODEL)
        tokenizer = train_gpt_tokenizer(root / "tok")
        repo = serve_ready_repository([spec], root / "repo", {Family.GPT2: tokenizer})
        with LocalTriton(prepare_runtime(), (repo,), log_path=root / "triton.log") as triton:
            gateway = GatewayProcess(triton.grpc_url, [spec], root).start()
            try:
                runs = [asyncio.run(measure(triton, gateway, levels, args.seconds)) for _ in range(args.runs)]
            finally:
                gateway.stop()
    print("run  c  direct p50/p95 ms  req/s  | gateway p50/p95 ms  req/s")
    for index, run in enumerate(runs, 1):
        for level, r in run.items():
            print(
                f"{index:>3} {level:>2}  {r['d50']:7.2f} {r['d95']:7.2f} {r['dtp']:7.1f} |"
                f" {r['g50']:7.2f} {r['g95']:7.2f} {r['gtp']:7.1f}"
            )
    print("medians over runs:")
    for level in levels:
        added50 = statistics.median(r[level]["g50"] - r[level]["d50"] for r in runs)
        added95 = statistics.median(r[level]["g95"] - r[level]["d95"] for r in runs)
        ratio = statistics.median(r[level]["gtp"] / r[level]["dtp"] for r in runs)
        print(f"c={level}: added p50 {added50:+.2f} ms, added p95 {added95:+.2f} ms, throughput ratio {ratio:.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
