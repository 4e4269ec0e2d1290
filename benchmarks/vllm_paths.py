"""The same small model under the same AIPerf load through (a) vLLM's own OpenAI server and (b) this project's path.

(a) vLLM's own OpenAI server (``vllm serve``'s ``vllm.entrypoints.openai.api_server``, as a user would run it
instead), AIPerf's ``completions`` endpoint, streamed; (b) the gateway's ``/v1/completions`` in front of Triton +
the project's ``vllm`` backend (``--no-gateway`` leaves it out); (b') Triton's own streamed generate
(``/v2/models/<m>/generate_stream``, AIPerf's ``template`` endpoint), so the Triton + backend part is known. One
server at a time, each timed from its start to READY; then AIPerf (``.tools/aiperf``, the project's AIPerf
environment) at concurrency 1 and 8: ``--requests`` requests per level of ``--input-tokens`` synthetic prompt tokens
and up to ``--max-tokens`` output tokens, greedy (so the same tokens on every path; the tests' random Llama does not
end early), a few warm-up requests first. Figures are
AIPerf's: output tokens/s, time to first token p50/p95, inter-token latency p50 (its tokenizer, the checkpoint's,
counts the streamed text on every path). Medians of ``--runs`` runs; the 1-minute load average before each path is
printed with the figures. Loopback only.

    .venv/bin/python benchmarks/vllm_paths.py /tmp/ckpt/tiny-llama [--requests 32] [--max-tokens 64] [--runs 3]
"""

from __future__ import annotations

import argparse
import contextlib
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
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tritonft import vllm_env
from tritonft.bench.plan import aiperf_launcher
from tritonft.engines.vllm import local
from tritonft.local_triton import free_port

ROOT = Path(__file__).resolve().parents[1]
HOST = "127.0.0.1"
LEVELS = (1, 8)
OPTIONS = replace(local.CPU_OPTIONS, max_model_len=256)
"""The engine arguments of every path (``vllm serve`` is given the same on its command line)."""
AIPERF_PYTHON = ROOT / ".tools" / "aiperf" / "bin" / "python"
FIGURES = {
    "tokens_per_s": ("output_token_throughput", "avg"),
    "ttft_p50_ms": ("time_to_first_token", "p50"),
    "ttft_p95_ms": ("time_to_first_token", "p95"),
    "itl_p50_ms": ("inter_token_latency", "p50"),
}
GENERATE_TEMPLATE = (
    '{"text_input": {{ text|tojson }}, "stream": true, "exclude_input_in_output": true, "sampling_parameters": '
    '"{\\"max_tokens\\": {{ max_tokens }}, \\"temperature\\": 0}"}'
)
"""Triton's generate body for the vLLM backend (AIPerf's ``template`` endpoint, Jinja): the prompt, streamed, and
the sampling parameters as the JSON string NVIDIA's contract takes."""


def aiperf(url: str, endpoint: list[str], concurrency: int, args: argparse.Namespace, out: Path) -> dict[str, float]:
    """One AIPerf run at ``concurrency``; its figures (``profile_export_aiperf.json``)."""
    argv = [*aiperf_launcher(AIPERF_PYTHON), "profile", "--model", "m", "--url", url, *endpoint, "--streaming"]
    argv += ["--tokenizer", str(args.checkpoint.resolve()), "--random-seed", "0"]
    argv += ["--synthetic-input-tokens-mean", str(args.input_tokens), "--synthetic-input-tokens-stddev", "0"]
    argv += ["--output-tokens-mean", str(args.max_tokens), "--output-tokens-stddev", "0"]
    argv += ["--concurrency", str(concurrency), "--request-count", str(args.requests)]
    argv += ["--warmup-request-count", str(concurrency), "--request-timeout-seconds", "300"]
    argv += ["--artifact-dir", str(out), "--ui", "none", "--no-server-metrics", "--no-gpu-telemetry", "--no-auto-plot"]
    with (out.parent / f"{out.name}.log").open("wb") as log:
        subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, check=True, timeout=1800)
    export = json.loads((out / "profile_export_aiperf.json").read_text())
    errors = (export.get("error_request_count") or {}).get("avg") or 0
    if errors:
        raise RuntimeError(f"{url}: AIPerf counted {errors} failed requests (see {out})")
    return {key: float(export[metric][stat]) for key, (metric, stat) in FIGURES.items()}


def measure(url: str, endpoint: list[str], args: argparse.Namespace, name: str) -> dict[int, dict[str, float]]:
    results = {}
    for concurrency in LEVELS:
        runs = [
            aiperf(url, endpoint, concurrency, args, args.work / f"{name}-c{concurrency}-run{i}")
            for i in range(args.runs)
        ]
        results[concurrency] = {key: statistics.median(r[key] for r in runs) for key in FIGURES}
    return results


def completions_endpoint() -> list[str]:
    """OpenAI completions, greedy, ``max_tokens`` (not ``max_completion_tokens``); no ``ignore_eos`` (vLLM's own
    extension, which the gateway refuses by name): every path generates the same greedy tokens."""
    return ["--endpoint-type", "completions", "--use-legacy-max-tokens", "--extra-inputs", "temperature:0"]


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


def load_average() -> float:
    return os.getloadavg()[0]


def vllm_serve(args: argparse.Namespace, env_dir: Path) -> tuple[float, float, dict[int, dict[str, float]]]:
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
        load = load_average()
        return ready, load, measure(f"http://{HOST}:{port}", completions_endpoint(), args, "vllm-serve")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        process.wait(60)
        log.close()


def triton(args: argparse.Namespace) -> dict[str, tuple[float, float, dict[int, dict[str, float]]]]:
    """(b') Triton's streamed generate, and (b) the gateway in front of it."""
    repository = local.render({"m": args.checkpoint}, args.work / "repository", OPTIONS)
    server = local.server(repository, args.work / "tritonserver.log")
    started = time.monotonic()
    server.start()
    ready = time.monotonic() - started
    rows = {}
    try:
        template = args.work / "generate.jinja"
        template.write_text(GENERATE_TEMPLATE)
        endpoint = ["--endpoint-type", "template", "--custom-endpoint", "/v2/models/m/generate_stream"]
        endpoint += ["--extra-inputs", f"payload_template:{template}", "--extra-inputs", "response_field:text_output"]
        load = load_average()
        rows["(b') triton generate_stream"] = (
            ready,
            load,
            measure(f"http://{server.http_url}", endpoint, args, "triton"),
        )
        if not args.no_gateway:
            rows["(b) gateway -> triton"] = gateway(args, server.grpc_url, ready)
    finally:
        server.stop()
    return rows


def gateway(
    args: argparse.Namespace, grpc_url: str, triton_ready: float
) -> tuple[float, float, dict[int, dict[str, float]]]:
    """(b): ``tritonft gateway`` in front of the running Triton for the model ``m`` (its spec from the checkpoint,
    ``tritonft.engines.vllm.local.spec_for``, started as ``python -m tritonft.engines.vllm.local --gateway`` starts
    it); its ready time is Triton's plus the gateway's own start to ``/health/ready``."""
    spec_path = args.work / "m.spec.json"
    spec_path.write_text(local.spec_for("m", args.checkpoint, OPTIONS).to_json())
    port = free_port()
    command = local.gateway_command(grpc_url, port, spec_path, "m", local.chat_config(args.checkpoint))
    log = open(args.work / "gateway.log", "wb")  # noqa: SIM115 (closed after the gateway stops)
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        ready = triton_ready + wait_ready(f"http://{HOST}:{port}/health/ready", process, 120)
        load = load_average()
        return ready, load, measure(f"http://{HOST}:{port}", completions_endpoint(), args, "gateway")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        process.wait(60)
        log.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", type=Path)
    parser.add_argument("--requests", type=int, default=32, help="requests per AIPerf run")
    parser.add_argument("--input-tokens", type=int, default=32)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-gateway", action="store_true", help="leave out (b), the gateway in front of Triton")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (AIPerf's exports, logs)")
    args = parser.parse_args()
    args.work = Path(tempfile.mkdtemp(prefix="vllm-paths-"))
    env_dir = vllm_env.ensure_environment()
    rows = triton(args)
    rows["(a) vllm serve"] = vllm_serve(args, env_dir)
    print(
        f"AIPerf: {args.requests} requests x {args.input_tokens} prompt tokens -> {args.max_tokens} output tokens per "
        f"level, streamed, greedy; medians of {args.runs} runs"
    )
    print("| path | ready s | load | c | output tok/s | TTFT p50 ms | TTFT p95 ms | ITL p50 ms |")
    print("|---|---|---|---|---|---|---|---|")
    for name, (ready, load, levels) in rows.items():
        for c, r in levels.items():
            print(
                f"| {name} | {ready:.0f} | {load:.1f} | {c} | {r['tokens_per_s']:.0f} | {r['ttft_p50_ms']:.1f} | "
                f"{r['ttft_p95_ms']:.1f} | {r['itl_p50_ms']:.2f} |"
            )
    if args.keep:
        print(f"work directory: {args.work}")
    else:
        shutil.rmtree(args.work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
