"""``tritonft bench`` in one run on this machine: one FasterTransformer-path model (the golden GPT-2 converted at
TP 2, its FT step run on CPU by the reference engine, streaming), the real all-MiniLM-L6-v2 encoder (ONNX Runtime in
the Python backend) and the gateway in front of both, on the bundled real Triton (``tests/system/realtriton/
bench_stack.py`` builds them, as ``tests/system/realtriton/test_bench_tools.py`` does).

Measured by the standard tools through ``python -m tritonft bench`` (the command a user runs): AIPerf for the
gateway's ``/v1/chat/completions`` (streamed), ``/v1/completions`` and ``/v1/embeddings``; perf_analyzer for both
models' KServe V2 endpoints over gRPC (the streaming generator over a gRPC stream). Prompts: six in-vocabulary words
(the golden model's word tokenizer), 8 output tokens. Results (CSV, JSON, PNG/SVG plots, each tool's raw output)
in ``--out``; the load average before and after is printed (the machine is shared).

perf_analyzer's stability check is relaxed (``--stability-percentage=1000``: its windows never agree within 10% on
the shared cores), so it reports the mean of its last three windows. Goodput: the requests/s that met ``--goodput``
(AIPerf's SLOs; default a 100 ms request latency).

Usage: .venv/bin/python benchmarks/standard_bench.py [--out DIR] [--concurrency 1,2,4] [--requests 30] [--goodput S]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.system.realtriton.bench_stack import (  # noqa: E402
    EMBEDDER,
    GENERATOR,
    render_generator,
    write_prompts,
    write_tolerant_word_tokenizer,
)
from tests.system.realtriton.golden import TP  # noqa: E402
from tests.tritonft.encoder.checkpoints import extract_minilm  # noqa: E402
from tests.tritonft.gateway.server import GatewayProcess  # noqa: E402
from tests.tritonft.reference.checkpoints import VARIANTS  # noqa: E402
from tritonft.cli import main as tritonft  # noqa: E402
from tritonft.encoder.repo import EncoderServing, OnnxEngine, write_encoder_repository  # noqa: E402
from tritonft.local_triton import LocalTriton, prepare_runtime  # noqa: E402


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "standard")
    parser.add_argument("--concurrency", default="1,2,4")
    parser.add_argument("--requests", type=int, default=30)
    parser.add_argument("--goodput", default="request_latency:100", help="AIPerf SLOs (default request_latency:100)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tritonft-bench-standard-") as tmp:
        work = Path(tmp)
        variant = next(v for v in VARIANTS if v.name == "gpt2")
        hf = variant.save(work / "hf-gpt2")
        assert tritonft(["convert", "--input", str(hf), "--output", str(work / "ft"), "--tp", str(TP)]) == 0
        generator, encoder, scratch = work / "generator", work / "encoder", work / "scratch"
        for directory in (generator, encoder, scratch):
            directory.mkdir()
        spec = render_generator(work / "ft" / f"{TP}-gpu", generator, scratch)
        minilm = extract_minilm(work / "all-MiniLM-L6-v2")
        assert tritonft(["convert", "--input", str(minilm), "--output", str(work / "minilm")]) == 0
        serving = EncoderServing(EMBEDDER, max_batch_size=16, engine=OnnxEngine.PYTHON)
        write_encoder_repository(serving, work / "minilm" / "onnx", minilm, encoder)
        prompts = write_prompts(work / "prompts.jsonl", count=32)
        tokenizer = write_tolerant_word_tokenizer(128, work / "aiperf-tokenizer")
        with LocalTriton(prepare_runtime(), (generator, encoder), log_path=work / "tritonserver.log") as triton:
            gateway = GatewayProcess(triton.grpc_url, [spec], work, ["--embedding-model", f"{EMBEDDER}:16"]).start()
            try:
                print(f"load average before: {load()}", flush=True)
                command = [sys.executable, "-m", "tritonft", "bench", "--gateway", f"{gateway.url}/v1"]
                command += ["--triton", f"grpc://{triton.grpc_url}", "--chat", GENERATOR, "--completions", GENERATOR]
                command += ["--embeddings", EMBEDDER, "--kserve", GENERATOR, "--kserve", EMBEDDER]
                command += ["--concurrency", args.concurrency, "--requests", str(args.requests)]
                command += ["--output-tokens", "8", "--prompts", str(prompts), "--tokenizer", str(tokenizer)]
                command += ["--goodput", args.goodput]
                # perf_analyzer's windows never agree within its default 10% on the shared 2 cores (as in
                # triton_bench.py): it reports the mean of its last 3 windows instead of failing
                command += ["--perf-analyzer-arg=--stability-percentage=1000"]
                command += ["--title", "reference GPT-2 + all-MiniLM-L6-v2 + gateway (CPU)", "--out", str(args.out)]
                code = subprocess.run(command, check=False).returncode
                print(f"load average after: {load()}", flush=True)
            finally:
                gateway.stop()
    return code


if __name__ == "__main__":
    sys.exit(main())
