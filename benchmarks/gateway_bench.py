"""Seed 003's before/after in one run: the ensemble called directly over gRPC vs through ``tritonft gateway``.

The served repository is the ``dev`` stack's ``gpt2`` rendered by ``tritonft.repo`` with a small trained byte-level
BPE tokenizer, the FT step stood in for (``tritonft.standin``), on the bundled real Triton
(``tritonft.local_triton``). The gateway runs as the container runs it (``python -m tritonft gateway``, one
uvicorn process). Same request both ways: greedy, 16 tokens.

The clients are the cheapest of each protocol, so that on a machine where client, gateway and Triton share the
cores the comparison is about the gateway, not about client libraries: direct, the ``ModelInferRequest`` the
gateway sends, built once and sent through Triton's generated gRPC stub on one ``grpc.aio`` channel (what
perf_analyzer and ``tritonft.bench`` do); through the gateway, the ``POST /v1/completions`` request bytes built
once and written on one keep-alive HTTP/1.1 connection per worker (asyncio streams). Both answers are decoded
and checked. The client's CPU time per request is printed for both paths (and the gateway's own), so the cost
the two clients take from the shared cores can be compared. (The ``openai`` client, httpx, costs ~2 ms of CPU
per request here: it would measure the client library, not the gateway.)

Closed loop per concurrency level (1 and 8): ``c`` workers send back to back for ``--seconds``; per run the p50/p95
latency and the throughput of both paths, then medians over ``--runs``: added p50/p95 (ms) and the throughput
ratio gateway/direct.

The gateway measured is the shipped default configuration (request coalescing on, ``--calls-in-flight 2``);
``--compare ARGS`` also starts a gateway with extra arguments (e.g. ``--compare=--no-coalesce``) and measures it
in every run, interleaved with the default one (the order of the gateways rotates from run to run). At the end:
how many Triton calls each gateway made for how many prompts (its ``/metrics``), the goal lines of the issue for
the default gateway, and the load average at the start and the end (the machine is shared).

Usage: .venv/bin/python benchmarks/gateway_bench.py [--runs 3] [--seconds 5] [--concurrency 1,8] [--compare ARGS]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import shlex
import statistics
import sys
import tempfile
import time
import urllib.request
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import orjson

from tests.system.realtriton.repos import serve_ready_repository, stack_specs
from tests.tritonft.gateway.server import GatewayProcess
from tests.tritonft.repo.conftest import train_gpt_tokenizer
from tritonft.gateway.config import ServedModel
from tritonft.gateway.mapping import ensemble_request
from tritonft.gateway.triton import answer_texts, infer_request
from tritonft.local_triton import LocalTriton, prepare_runtime
from tritonft.spec import Family

PROMPT = "The quick brown fox jumps over the lazy dog."
MODEL = "gpt2"
BODY = {"model": MODEL, "prompt": PROMPT, "max_tokens": 16, "temperature": 0}
WARMUP = 20

Call = Callable[[], Awaitable[None]]


@dataclass(frozen=True)
class Level:
    p50: float
    p95: float
    rps: float
    client_cpu_ms: float
    """CPU time of the bench process (the client) per request."""
    server_cpu_ms: float
    """CPU time of the watched process (the gateway; nothing for the direct path) per request."""


def process_cpu_s(pid: int | None) -> float:
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def own_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def closed_loop(call: Call, concurrency: int, seconds: float, watched: int | None) -> Level:
    """``concurrency`` workers calling back to back for ``seconds``: latency quantiles, throughput, CPU/request."""
    latencies: list[float] = []
    stop = time.monotonic() + seconds

    async def worker() -> None:
        while time.monotonic() < stop:
            started = time.perf_counter()
            await call()
            latencies.append((time.perf_counter() - started) * 1000)

    for _ in range(WARMUP):
        await call()
    own, other, began = own_cpu_s(), process_cpu_s(watched), time.monotonic()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.monotonic() - began
    n = len(latencies)
    own, other = (own_cpu_s() - own) * 1000 / n, (process_cpu_s(watched) - other) * 1000 / n
    q = statistics.quantiles(latencies, n=100)
    return Level(q[49], q[94], n / elapsed, own, other)


class KeepAliveHttp:
    """One prebuilt HTTP/1.1 request, sent on a pool of keep-alive connections (one per concurrent caller)."""

    def __init__(self, host: str, port: int, path: str, body: bytes) -> None:
        self.host, self.port = host, port
        head = f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
        self.request = f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body
        self.idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

    async def post(self) -> Any:
        """The JSON answer; raises unless the status is 200."""
        reader, writer = self.idle.pop() if self.idle else await asyncio.open_connection(self.host, self.port)
        writer.write(self.request)
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")
        )
        body = await reader.readexactly(length)
        if not head.startswith(b"HTTP/1.1 200 "):
            raise RuntimeError(f"the gateway answered {head.splitlines()[0]!r}: {body!r}")
        self.idle.append((reader, writer))
        return orjson.loads(body)

    def close(self) -> None:
        """Close the idle connections (uvicorn closes keep-alive connections idle for 5 s)."""
        for _, writer in self.idle:
            writer.close()
        self.idle.clear()


async def measure(
    triton: LocalTriton, gateways: list[GatewayProcess], levels: list[int], seconds: float, rotate: int
) -> dict[int, list[Level]]:
    """Per concurrency level: the direct path, then each gateway in turn (interleaved, same conditions), starting
    with gateway ``rotate`` (modulo their number) so that no variant is always the one measured first."""
    import grpc  # type: ignore[import-untyped]  # no types-grpcio in the lock
    from tritonclient.grpc import service_pb2_grpc

    served = ServedModel(MODEL, Family.GPT2, streaming=False, max_output_len=128, max_input_len=512)
    message = infer_request(ensemble_request(BODY, served), PROMPT)
    channel = grpc.aio.insecure_channel(triton.grpc_url)
    stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
    https = [KeepAliveHttp("127.0.0.1", g.port, "/v1/completions", orjson.dumps(BODY)) for g in gateways]

    async def direct() -> None:
        texts = answer_texts(await stub.ModelInfer(message, timeout=30))
        assert texts and texts[0], texts

    def through(http: KeepAliveHttp) -> Call:
        async def call() -> None:
            answer = await http.post()
            assert answer["choices"][0]["text"], answer

        return call

    out: dict[int, list[Level]] = {}
    try:
        for level in levels:
            measured = {}
            for step in range(len(gateways)):
                index = (rotate + step) % len(gateways)
                gateway, http = gateways[index], https[index]
                pid = gateway.process.pid if gateway.process else None
                measured[index] = await closed_loop(through(http), level, seconds, pid)
                http.close()
            out[level] = [await closed_loop(direct, level, seconds, None), *(measured[i] for i in sorted(measured))]
    finally:
        await channel.close()
        for http in https:
            http.close()
    return out


def scrape_calls(gateway: GatewayProcess) -> tuple[float, float]:
    """(Triton calls, rows) the gateway has sent so far, from its ``/metrics``."""
    with urllib.request.urlopen(f"{gateway.url}/metrics", timeout=5) as answer:
        text = answer.read().decode()
    values: dict[str, float] = {}
    for line in text.splitlines():
        for name in ("tritonft_gateway_triton_call_rows_count", "tritonft_gateway_triton_call_rows_sum"):
            if line.startswith(name + "{"):
                values[name] = values.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
    return values.get("tritonft_gateway_triton_call_rows_count", 0.0), values.get(
        "tritonft_gateway_triton_call_rows_sum", 0.0
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--concurrency", default="1,8")
    parser.add_argument(
        "--compare",
        action="append",
        default=[],
        metavar="ARGS",
        help="also measure a gateway started with these extra arguments (e.g. --no-coalesce), interleaved with the "
        "default one in every run (repeat for more variants)",
    )
    args = parser.parse_args()
    levels = [int(x) for x in args.concurrency.split(",")]
    variants = ["default", *args.compare]
    load = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="gateway-bench-") as scratch:
        root = Path(scratch)
        spec = next(s for s in stack_specs("dev") if s.name == MODEL)
        tokenizer = train_gpt_tokenizer(root / "tok")
        repo = serve_ready_repository([spec], root / "repo", {Family.GPT2: tokenizer})
        with LocalTriton(prepare_runtime(), (repo,), log_path=root / "triton.log") as triton:
            gateways = []
            try:
                for index, variant in enumerate(variants):
                    workdir = root / f"gateway-{index}"
                    workdir.mkdir()
                    extra = [] if variant == "default" else shlex.split(variant)
                    gateways.append(GatewayProcess(triton.grpc_url, [spec], workdir, extra).start())
                runs = [asyncio.run(measure(triton, gateways, levels, args.seconds, run)) for run in range(args.runs)]
                calls = [scrape_calls(g) for g in gateways]
            finally:
                for gateway in gateways:
                    gateway.stop()
    for variant, (count, rows) in zip(variants, calls, strict=True):
        per_call = rows / max(count, 1)
        print(f"gateway {variant}: {count:.0f} Triton calls carried {rows:.0f} prompts ({per_call:.2f} per call)")
    print("run  c gateway | direct p50/p95 ms  req/s  client-cpu | gateway p50/p95 ms  req/s  client-cpu gateway-cpu")
    for index, run in enumerate(runs, 1):
        for level, (d, *through) in run.items():
            for variant, g in zip(variants, through, strict=True):
                print(
                    f"{index:>3} {level:>2} {variant:<7} | {d.p50:7.2f} {d.p95:7.2f} {d.rps:7.1f}"
                    f" {d.client_cpu_ms:7.3f} ms | {g.p50:7.2f} {g.p95:7.2f} {g.rps:7.1f}"
                    f" {g.client_cpu_ms:7.3f} ms {g.server_cpu_ms:7.3f} ms"
                )
    goals: list[str] = []
    for position, variant in enumerate(variants, 1):
        print(f"medians over runs, gateway {variant}:")
        for level in levels:
            pairs = [(run[level][0], run[level][position]) for run in runs]
            added50 = statistics.median(g.p50 - d.p50 for d, g in pairs)
            added95 = statistics.median(g.p95 - d.p95 for d, g in pairs)
            ratio = statistics.median(g.rps / d.rps for d, g in pairs)
            gateway_cpu = statistics.median(g.server_cpu_ms for _, g in pairs)
            print(
                f"c={level}: added p50 {added50:+.2f} ms, added p95 {added95:+.2f} ms, throughput ratio {ratio:.1%}"
                f" (gateway CPU {gateway_cpu:.3f} ms/request)"
            )
            if variant == "default" and level == 1:
                goals.append(f"c=1 added p50 <= 2 ms: {'met' if added50 <= 2 else 'NOT met'} ({added50:+.2f} ms)")
            if variant == "default" and level == 8:
                goals.append(f"c=8 throughput >= 90% of direct: {'met' if ratio >= 0.9 else 'NOT met'} ({ratio:.1%})")
    print("goals (default gateway):", "; ".join(goals))
    print(f"load average at the start {load[0]:.2f}, at the end {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
