"""The same small model under the same load through (a) vLLM's own OpenAI server and (b) Triton + the vLLM backend.

(a) vLLM's own OpenAI server (``vllm serve``'s ``vllm.entrypoints.openai.api_server``, as a user would run it
instead; ``/v1/completions``, streamed)
and (b) the rendered repository on the real Triton with the project's ``vllm`` backend driving the same engine
(``/v2/models/<m>/generate_stream``, Triton's streamed generate): one process at a time, each started and measured
to READY, then ``--requests`` requests of ``--max-tokens`` tokens (``ignore_eos``: every answer has them all) at each
concurrency. Per request: time to first token (first streamed piece), inter-token latency (mean gap between pieces
after the first); per level: output tokens/s over the wall time. Medians of ``--runs`` runs. Loopback only; bounded.

    .venv/bin/python benchmarks/vllm_paths.py /tmp/ckpt/tiny-llama [--requests 32] [--max-tokens 64] [--runs 3]

The gateway (the project's OpenAI path in front of Triton) does not serve vLLM models yet, so (b) stops at Triton.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import itertools
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tritonft import vllm_env
from tritonft.engines.vllm import local
from tritonft.local_triton import free_port

PROMPT = "Serving large language models on Kubernetes with Triton Inference Server"
HOST = "127.0.0.1"


@dataclass(frozen=True)
class Sample:
    ttft_s: float
    itl_s: float
    pieces: int


def stream_request(port: int, path: str, body: dict[str, object]) -> Sample:
    """POST ``body`` and read the server-sent events, timing each ``data:`` line with content."""
    connection = http.client.HTTPConnection(HOST, port, timeout=300)
    started = time.perf_counter()
    connection.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    response = connection.getresponse()
    if response.status != 200:
        raise RuntimeError(f"{path}: HTTP {response.status} {response.read()[:300]!r}")
    times = []
    for raw in response:
        line = raw.strip()
        if not line.startswith(b"data:") or line == b"data: [DONE]":
            continue
        event = json.loads(line[5:])
        text = event.get("text_output")
        if text is None:
            choices = event.get("choices") or [{}]
            text = choices[0].get("text", "")
        if text:
            times.append(time.perf_counter())
    connection.close()
    if not times:
        raise RuntimeError(f"{path}: no streamed text")
    gaps = [b - a for a, b in itertools.pairwise(times)]
    return Sample(times[0] - started, statistics.fmean(gaps) if gaps else 0.0, len(times))


def load(port: int, path: str, body: dict[str, object], requests: int, concurrency: int) -> dict[str, float]:
    started = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        samples = list(pool.map(lambda _: stream_request(port, path, body), range(requests)))
    wall = time.perf_counter() - started
    tokens = requests * int(str(body.get("max_tokens") or json.loads(str(body["sampling_parameters"]))["max_tokens"]))
    ttfts = sorted(s.ttft_s for s in samples)
    return {
        "tokens_per_s": tokens / wall,
        "ttft_p50_ms": 1000 * statistics.median(ttfts),
        "ttft_p95_ms": 1000 * ttfts[min(len(ttfts) - 1, int(0.95 * len(ttfts)))],
        "itl_ms": 1000 * statistics.median(s.itl_s for s in samples),
    }


def wait_ready(url: str, process: subprocess.Popen[bytes], timeout: float) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:
                if answer.status == 200:
                    return time.monotonic() - started
        except OSError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"{url} not ready within {timeout} s")


def measure(port: int, path: str, body: dict[str, object], args: argparse.Namespace) -> dict[int, dict[str, float]]:
    stream_request(port, path, body)  # warm-up
    results = {}
    for concurrency in (1, 8):
        runs = [load(port, path, body, args.requests, concurrency) for _ in range(args.runs)]
        results[concurrency] = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
    return results


def vllm_serve(args: argparse.Namespace, env_dir: Path) -> tuple[float, dict[int, dict[str, float]]]:
    port = free_port()
    command = [
        str(env_dir / "bin" / "python"), "-m", "vllm.entrypoints.openai.api_server", "--model", str(args.checkpoint),
        "--host", HOST, "--port", str(port),
        "--dtype", "float32", "--max-model-len", "256", "--max-num-seqs", "16", "--enforce-eager",
        "--served-model-name", "m", "--distributed-executor-backend", "uni",
    ]  # fmt: skip
    env = vllm_env.engine_environment()
    # vLLM's server as a user runs it on one device: its engine-core process, the model executed in it ("uni"; the
    # default's extra worker process died under this machine's load: shm broadcast "cancelled").
    env.pop("VLLM_ENABLE_V1_MULTIPROCESSING")
    log = open(args.work / "vllm-serve.log", "wb")  # noqa: SIM115 (closed after the server stops)
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        ready = wait_ready(f"http://{HOST}:{port}/health", process, 900)
        body = {"model": "m", "prompt": PROMPT, "max_tokens": args.max_tokens, "temperature": 0, "ignore_eos": True}
        return ready, measure(port, "/v1/completions", {**body, "stream": True}, args)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        process.wait(60)
        log.close()


def triton(args: argparse.Namespace) -> tuple[float, dict[int, dict[str, float]]]:
    options = replace(local.CPU_OPTIONS, max_model_len=256)
    repository = local.render({"m": args.checkpoint}, args.work / "repository", options)
    server = local.server(repository, args.work / "tritonserver.log")
    started = time.monotonic()
    server.start()
    ready = time.monotonic() - started
    try:
        parameters = {"max_tokens": args.max_tokens, "temperature": 0, "ignore_eos": True}
        body = {"text_input": PROMPT, "sampling_parameters": json.dumps(parameters), "stream": True}
        return ready, measure(server.http_port, "/v2/models/m/generate_stream", body, args)
    finally:
        server.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", type=Path)
    parser.add_argument("--requests", type=int, default=32)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    args.work = Path(tempfile.mkdtemp(prefix="vllm-paths-"))
    env_dir = vllm_env.ensure_environment()
    rows = {"(a) vllm serve": vllm_serve(args, env_dir), "(b) triton + vllm backend": triton(args)}
    print(f"{args.requests} requests x {args.max_tokens} tokens per level, medians of {args.runs} runs")
    print("| path | ready s | c | output tok/s | TTFT p50 ms | TTFT p95 ms | ITL ms |\n|---|---|---|---|---|---|---|")
    for name, (ready, levels) in rows.items():
        for c, r in levels.items():
            print(
                f"| {name} | {ready:.0f} | {c} | {r['tokens_per_s']:.0f} | {r['ttft_p50_ms']:.1f} | "
                f"{r['ttft_p95_ms']:.1f} | {r['itl_ms']:.2f} |"
            )
    shutil.rmtree(args.work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
