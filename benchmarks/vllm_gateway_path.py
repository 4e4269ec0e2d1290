"""What the OpenAI gateway adds in front of Triton + the vLLM backend: the same server, the same load, both paths.

One real Triton serving the checkpoint with the project's ``vllm`` backend (the real vLLM engine) and one
``tritonft gateway`` in front of it; then, alternately per run, ``--requests`` streamed greedy requests of
``--max-tokens`` tokens at each concurrency (1 and 8) through (b) Triton's ``/v2/models/m/generate_stream`` and (c)
the gateway's ``/v1/completions`` (``stream: true``, ``stream_options.include_usage``). Per request: time to first
token (first piece with text), inter-token latency (mean gap between pieces after the first); per level: output
tokens (the engine's count: ``num_output_tokens`` / ``usage``) per second of wall time. Medians of ``--runs`` runs.
Loopback only; bounded.

    .venv/bin/python benchmarks/vllm_gateway_path.py /tmp/ckpt/tiny-llama [--requests 16] [--max-tokens 32] [--runs 3]
"""

from __future__ import annotations

import argparse
import http.client
import itertools
import json
import shutil
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.tritonft.gateway.server import GatewayProcess
from tritonft.engines.vllm import local

PROMPT = "Serving large language models on Kubernetes with Triton Inference Server"
HOST = "127.0.0.1"


@dataclass(frozen=True)
class Sample:
    ttft_s: float
    itl_s: float
    tokens: int


def stream_request(port: int, path: str, body: dict[str, Any]) -> Sample:
    """POST ``body``, read the server-sent events: when each piece of text came, and the engine's token count."""
    connection = http.client.HTTPConnection(HOST, port, timeout=300)
    started = time.perf_counter()
    connection.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    response = connection.getresponse()
    if response.status != 200:
        raise RuntimeError(f"{path}: HTTP {response.status} {response.read()[:300]!r}")
    times, tokens = [], 0
    for raw in response:
        line = raw.strip()
        if not line.startswith(b"data:") or line == b"data: [DONE]":
            continue
        event = json.loads(line[5:])
        if "text_output" in event:  # Triton's generate_stream: the backend's outputs
            text, tokens = event["text_output"], tokens + int(event.get("num_output_tokens") or 0)
        else:  # the gateway's chunks; the last one has the usage
            text = "".join(c.get("text", "") for c in event.get("choices") or [])
            tokens = int((event.get("usage") or {}).get("completion_tokens") or tokens)
        if text:
            times.append(time.perf_counter())
    connection.close()
    if not times:
        raise RuntimeError(f"{path}: no streamed text")
    gaps = [b - a for a, b in itertools.pairwise(times)]
    return Sample(times[0] - started, statistics.fmean(gaps) if gaps else 0.0, tokens)


def load(port: int, path: str, body: dict[str, Any], requests: int, concurrency: int) -> dict[str, float]:
    started = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        samples = list(pool.map(lambda _: stream_request(port, path, body), range(requests)))
    wall = time.perf_counter() - started
    ttfts = sorted(s.ttft_s for s in samples)
    return {
        "tokens_per_s": sum(s.tokens for s in samples) / wall,
        "ttft_p50_ms": 1000 * statistics.median(ttfts),
        "ttft_p95_ms": 1000 * ttfts[min(len(ttfts) - 1, int(0.95 * len(ttfts)))],
        "itl_ms": 1000 * statistics.median(s.itl_s for s in samples),
        "tokens": float(sum(s.tokens for s in samples)),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", type=Path)
    parser.add_argument("--requests", type=int, default=16)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="vllm-gateway-path-"))
    options = replace(local.CPU_OPTIONS, max_model_len=256)
    server = local.server(local.render({"m": args.checkpoint}, work / "repository", options), work / "triton.log")
    server.start()
    gateway = GatewayProcess(server.grpc_url, [local.spec_for("m", args.checkpoint, options)], work)
    try:
        gateway.start()
        parameters = json.dumps({"max_tokens": args.max_tokens, "temperature": 0})
        paths = {
            "(b) triton + vllm backend": (
                server.http_port,
                "/v2/models/m/generate_stream",
                {
                    "text_input": PROMPT,
                    "sampling_parameters": parameters,
                    "stream": True,
                    "return_num_output_tokens": True,
                },
            ),
            "(c) gateway -> triton + vllm backend": (
                gateway.port,
                "/v1/completions",
                {
                    "model": "m",
                    "prompt": PROMPT,
                    "max_tokens": args.max_tokens,
                    "temperature": 0,
                    "stream": True,
                    "stream_options": {"include_usage": True},
                },
            ),
        }
        for port, path, body in paths.values():
            stream_request(port, path, body)  # warm-up
        results: dict[str, dict[int, list[dict[str, float]]]] = {name: {1: [], 8: []} for name in paths}
        for _ in range(args.runs):
            for concurrency in (1, 8):
                for name, (port, path, body) in paths.items():  # alternately: both paths see the same load
                    results[name][concurrency].append(load(port, path, body, args.requests, concurrency))
    finally:
        gateway.stop()
        server.stop()
    print(f"{args.requests} requests x {args.max_tokens} tokens per level, medians of {args.runs} runs")
    print("| path | c | output tok/s | TTFT p50 ms | TTFT p95 ms | ITL ms |\n|---|---|---|---|---|---|")
    for name, levels in results.items():
        for concurrency, runs in levels.items():
            r = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
            print(
                f"| {name} | {concurrency} | {r['tokens_per_s']:.0f} | {r['ttft_p50_ms']:.1f} | "
                f"{r['ttft_p95_ms']:.1f} | {r['itl_ms']:.2f} |"
            )
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
