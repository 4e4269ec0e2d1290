"""The probe's two latencies for a streaming (decoupled) model on the real Triton: to the first response (time to
first token) and to the last (the whole answer), over HTTP ``generate_stream`` and gRPC ``ModelStreamInfer``.

The model is the ``dev`` stack's gpt2 with ``streaming: true``, rendered by ``tritonft repo``, its FT step stood in for
by the stand-in answering the prompt's tokens reversed, paced ``TOKEN_INTERVAL_S`` apart (a real generation takes its
time per token). Each run is one probe of ``REQUESTS`` timed requests per transport.

Usage: .venv/bin/python benchmarks/probe_streaming.py [RUNS] [REQUESTS] [TOKEN_INTERVAL_S]
Prints, per transport, the median over RUNS of the probe's p50/p95 to the first and to the last response.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.system.realtriton.repos import render_with_cli, stack_specs
from tests.tritonft.repo.conftest import train_gpt_tokenizer
from tritonft.local_triton import LocalTriton, prepare_runtime
from tritonft.probe import ModelTarget, ProbeConfig, run_probe
from tritonft.repo.naming import RepoNames
from tritonft.spec import Family
from tritonft.standin import set_behaviour, standin_all


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    requests = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    interval = float(sys.argv[3]) if len(sys.argv) > 3 else 0.02
    base = Path(tempfile.mkdtemp(prefix="probe-streaming-"))
    (gpt2,) = [s for s in stack_specs("dev") if s.family is Family.GPT2]
    spec = replace(gpt2, name="gpt2-stream", decoupled=True, max_input_len=64, max_output_len=32)
    repository = base / "repo"
    render_with_cli(spec, repository, train_gpt_tokenizer(base / "tokenizer"), base)
    standin_all(repository, generation="reverse")
    set_behaviour(repository / RepoNames.of(spec).ft, token_interval_s=interval)
    server = LocalTriton(prepare_runtime(), (repository,), log_path=base / "tritonserver.log")
    server.start()
    try:
        print(f"{runs} run(s) x {requests} requests, a token every {interval * 1000:.0f} ms")
        print("| transport | first p50 ms | first p95 ms | last p50 ms | last p95 ms |")
        print("|---|---|---|---|---|")
        for url in (f"http://{server.http_url}", f"grpc://{server.grpc_url}"):
            figures: list[tuple[float, float, float, float]] = []
            for _ in range(runs):
                target = ModelTarget(spec.name, spec.family, streaming=True)
                report = run_probe(ProbeConfig(url, (target,), deadline_s=120, latency_requests=requests))
                model = report.model(spec.name)
                if not report.ok or model.latency is None or model.first_response_latency is None:
                    raise SystemExit(f"probe failed: {report.failure_message()}")
                first, last = model.first_response_latency, model.latency
                figures.append((first.p50_ms, first.p95_ms, last.p50_ms, last.p95_ms))
            medians = [statistics.median(column) for column in zip(*figures, strict=True)]
            print(f"| {url.split(':', 1)[0]} | " + " | ".join(f"{m:.1f}" for m in medians) + " |")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
