"""perf_analyzer on a real Triton, through the ensemble and on the model step alone, in one run.

The served repository is the ``dev`` stack's ``gpt2`` rendered by ``tritonft.repo`` with a small trained byte-level
BPE tokenizer; the FasterTransformer step is the Python stand-in (``tritonft.standin``: an echo, whose dynamic
batcher waits up to the spec's 1 ms). Triton is the one ``nvidia-pytriton`` bundles (``tritonft.local_triton``);
perf_analyzer 2.48 comes from ``scripts/setup/perf_analyzer.sh`` (as ``tritonft bench`` runs it). gRPC.

Per run and concurrency (1, 4, 16): perf_analyzer through the ensemble and on the model step alone (the floor; its
inputs are the prompt's tokens). Prints every run and the medians over runs and the ensemble's p50 overhead over the
step. (Until issue 34 this also measured ``tritonft bench``'s own load generator against perf_analyzer: it reached
0.80-0.86 of perf_analyzer's throughput, and ``tritonft bench`` now runs perf_analyzer itself.)

``--pin`` puts the server (tritonserver and its Python stubs) on CPU 0 and the clients on CPU 1, as a client on its
own machine would be.

``--no-tokenizer-batching`` serves the Python models without their dynamic batcher (one request per execution, as
before the tokenizer work was batched); ``--tokenizer-instances N`` sets their instance count: the A/B switches.
``--bls`` also measures, interleaved with the rest, a benchmark-only variant (``bls_model.py``, never shipped): one
Python model doing preprocessing, a BLS call to the model step and postprocessing, with the ensemble's contract
(dynamic batcher on, ``--bls-instances N`` instances).

At concurrency 1 each run also times the **Python gRPC floor**: the generated tritonclient stub called in a loop
with one prebuilt request (no tritonft code), the least any Python gRPC client pays per request (the floor the
retired Python load generator could not pass).

The summary gives, per concurrency, medians over runs of each tool, then the **paired** figures: for each run the
Python floor/perf_analyzer ratio (c=1) and the ensemble's p50 minus the step's p50, measured minutes apart on one
server, then their median and range over runs (the machine drifts by more than the differences measured: pairs
within a run cancel most of it).

For every perf_analyzer measurement at concurrency 1 the server's own per-model statistics are read before and after
(``/v2/models/stats``), and their per-request means (queue, compute input/infer/output, total) are printed as medians
over runs: where the ensemble's time goes, model by model.

Usage: .venv/bin/python benchmarks/triton_bench.py [--runs 3] [--seconds 4] [--concurrency 1,4,16] [--pin]
           [--no-tokenizer-batching] [--tokenizer-instances N] [--bls] [--bls-instances N]
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from google.protobuf import text_format  # type: ignore[import-untyped]  # no types-protobuf in the lock

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.system.realtriton.repos import serve_ready_repository, stack_specs
from tests.tritonft.repo.conftest import train_gpt_tokenizer
from tritonft.local_triton import LocalTriton, prepare_runtime
from tritonft.probe.stats import percentile
from tritonft.repo.naming import RepoNames
from tritonft.spec import Family
from tritonft.standin import read_config

ROOT = Path(__file__).resolve().parents[1]
PROMPT = "The quick brown fox jumps over the lazy dog."
MODEL = "gpt2"
STAT_PHASES = ("queue", "compute_input", "compute_infer", "compute_output", "success")
"""Triton's per-model duration counters; ``success`` is the whole request inside the server."""


def add_bls_model(repository: Path, names: RepoNames, instances: int = 1) -> str:
    """The benchmark-only BLS variant ``<model>-bls``: the preprocessing model's files (tokenizer, tokenization
    module), parameters and dynamic batcher, the ensemble's inputs and outputs, ``bls_model.py`` as its code,
    ``instances`` CPU instances. Returns its name."""
    name = f"{names.ensemble}-bls"
    shutil.copytree(repository / names.preprocessing, repository / name)
    shutil.copyfile(ROOT / "benchmarks" / "bls_model.py", repository / name / "1" / "model.py")
    config = read_config(repository / name / "config.pbtxt")
    ensemble = read_config(repository / names.ensemble / "config.pbtxt")
    config.name = name
    config.instance_group[0].count = instances
    del config.input[:]
    config.input.extend(ensemble.input)
    del config.output[:]
    config.output.extend(ensemble.output)
    config.parameters["bls_step"].string_value = names.ft
    (repository / name / "config.pbtxt").write_text(text_format.MessageToString(config))
    return name


def benchmark_inputs(work: Path, tokenizer_dir: Path) -> tuple[Path, Path, list[str]]:
    """perf_analyzer's input files for the ensemble (the prompt) and for the step alone (the prompt's tokens, as
    preprocessing makes them), and the step's ``--shape`` arguments."""
    from tokenizers import Tokenizer

    ids = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json")).encode(PROMPT).ids
    ensemble_data = work / "ensemble.json"
    ensemble_data.write_text(json.dumps({"data": [{"text_input": [PROMPT]}]}))
    step_data = work / "step.json"
    step_data.write_text(
        json.dumps({"data": [{"input_ids": ids, "input_lengths": [len(ids)], "request_output_len": [len(ids)]}]})
    )
    return ensemble_data, step_data, [f"input_ids:{len(ids)}", "request_output_len:1"]


def print_phases(phases: dict[str, list[dict[str, dict[str, float]]]], width: int) -> None:
    """The per-model phase means of every measured target (medians over its runs), one row per model."""
    print(f"{'measured':<{width}} {'model':<24} " + " ".join(f"{p:>14}" for p in (*STAT_PHASES[:-1], "total")))
    for target, runs in phases.items():
        for model in sorted(runs[0]):
            cells = [statistics.median(r[model][p] for r in runs if model in r) for p in STAT_PHASES]
            print(f"{target:<{width}} {model:<24} " + " ".join(f"{c:>14.1f}" for c in cells))


def model_stats(server: LocalTriton) -> dict[str, dict[str, int]]:
    """Every model's cumulative request count and phase durations (ns), from Triton's statistics extension."""
    with urllib.request.urlopen(f"http://{server.http_url}/v2/models/stats", timeout=30) as answer:
        data: dict[str, Any] = json.load(answer)
    return {
        entry["name"]: {
            "count": int(entry["inference_stats"]["success"]["count"]),
            **{phase: int(entry["inference_stats"][phase]["ns"]) for phase in STAT_PHASES},
        }
        for entry in data["model_stats"]
    }


def per_request_us(before: dict[str, dict[str, int]], after: dict[str, dict[str, int]]) -> dict[str, dict[str, float]]:
    """Mean µs per request of each phase, for the models that served requests between the two snapshots."""
    means = {}
    for name, now in after.items():
        count = now["count"] - before.get(name, {}).get("count", 0)
        if count > 0:
            means[name] = {phase: (now[phase] - before[name][phase]) / count / 1000 for phase in STAT_PHASES}
    return means


def perf_analyzer_binary() -> tuple[Path, dict[str, str]]:
    done = subprocess.run(
        ["bash", str(ROOT / "benchmarks" / "setup_perf_analyzer.sh")], capture_output=True, text=True, check=True
    )
    binary = Path(done.stdout.strip().splitlines()[-1])
    libs = next((ROOT / ".tools" / "perf").glob("lib/python3*/site-packages/nvidia/cuda_runtime/lib"))
    env = dict(os.environ, LD_LIBRARY_PATH=f"{libs}:{os.environ.get('LD_LIBRARY_PATH', '')}")
    return binary, env


def perf_analyzer(
    binary: Path,
    env: dict[str, str],
    *,
    server: LocalTriton,
    model: str,
    data: Path,
    shapes: list[str],
    level: int,
    seconds: float,
) -> dict[str, float]:
    """One perf_analyzer measurement: throughput (infer/s) and p50/p99 (ms)."""
    with tempfile.NamedTemporaryFile(suffix=".csv") as report:
        args = [
            str(binary),
            "-m",
            model,
            "-u",
            server.grpc_url,
            "-i",
            "grpc",
            "--input-data",
            str(data),
            "--concurrency-range",
            f"{level}:{level}",
            "--measurement-interval",
            str(int(seconds * 1000)),
            # perf_analyzer's 3 windows never agree within its default 10% on a shared 2-core machine; the
            # medians over runs carry the noise instead.
            "--stability-percentage",
            "1000",
            "--max-trials",
            "6",
            "-f",
            report.name,
        ]
        args += [f"--shape={shape}" for shape in shapes]
        done = subprocess.run(args, capture_output=True, text=True, env=env, check=False, timeout=600)
        if done.returncode != 0:
            raise RuntimeError(f"perf_analyzer failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
        row = next(csv.DictReader(io.StringIO(Path(report.name).read_text())))
    return {
        "rps": float(row["Inferences/Second"]),
        "p50": float(row["p50 latency"]) / 1000,
        "p99": float(row["p99 latency"]) / 1000,
    }


def grpc_request(prompt: str) -> Any:
    """The ensemble's ``ModelInferRequest`` for ``prompt``, built once and sent as is (as perf_analyzer does)."""
    import numpy as np
    from tritonclient.grpc import service_pb2
    from tritonclient.utils import serialize_byte_tensor

    text = np.array([[prompt.encode("utf-8")]], dtype=np.object_)
    tensor = service_pb2.ModelInferRequest.InferInputTensor(name="text_input", datatype="BYTES", shape=[1, 1])
    return service_pb2.ModelInferRequest(
        model_name=MODEL,
        inputs=[tensor],
        outputs=[service_pb2.ModelInferRequest.InferRequestedOutputTensor(name="text_output")],
        raw_input_contents=[serialize_byte_tensor(text).item()],
    )


def python_grpc_floor(server: LocalTriton, seconds: float) -> dict[str, float]:
    """The generated gRPC stub called in a closed loop with one prebuilt request: infer/s and p50/p99 (ms)."""
    import grpc  # type: ignore[import-untyped]  # no types-grpcio in the lock
    from tritonclient.grpc import service_pb2_grpc

    request = grpc_request(PROMPT)
    with grpc.insecure_channel(server.grpc_url) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        warm_until = time.perf_counter() + min(1.0, seconds / 4)
        while time.perf_counter() < warm_until:
            stub.ModelInfer(request)
        latencies = []
        end = time.perf_counter() + seconds
        while (t0 := time.perf_counter()) < end:
            stub.ModelInfer(request)
            latencies.append((time.perf_counter() - t0) * 1000)
    return {"rps": len(latencies) / seconds, "p50": percentile(latencies, 50), "p99": percentile(latencies, 99)}


def paired(per_run: list[float]) -> str:
    """Median and range of per-run paired values."""
    return f"{statistics.median(per_run):.3f} (runs {min(per_run):.3f}..{max(per_run):.3f})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--concurrency", default="1,4,16")
    parser.add_argument("--no-tokenizer-batching", action="store_true")
    parser.add_argument("--tokenizer-instances", type=int, default=1)
    parser.add_argument("--pin", action="store_true", help="server on CPU 0, clients on CPU 1")
    parser.add_argument("--bls", action="store_true", help="also measure the benchmark-only BLS variant")
    parser.add_argument("--bls-instances", type=int, default=1, help="instances of the BLS variant")
    args = parser.parse_args()
    levels = [int(x) for x in args.concurrency.split(",")]
    binary, env = perf_analyzer_binary()
    work = Path(tempfile.mkdtemp(prefix="tritonft-bench-"))
    tokenizer_dir = train_gpt_tokenizer(work / "tokenizer")
    [spec] = [s for s in stack_specs("dev") if s.name == MODEL]
    repository = serve_ready_repository([spec], work / "repo", {Family.GPT2: tokenizer_dir})
    for model in (RepoNames.of(spec).preprocessing, RepoNames.of(spec).postprocessing):
        config = read_config(repository / model / "config.pbtxt")
        if args.no_tokenizer_batching:
            config.ClearField("dynamic_batching")
        config.instance_group[0].count = args.tokenizer_instances
        (repository / model / "config.pbtxt").write_text(text_format.MessageToString(config))
    bls = add_bls_model(repository, RepoNames.of(spec), args.bls_instances) if args.bls else None
    ensemble_data, step_data, step_shapes = benchmark_inputs(work, tokenizer_dir)
    step = RepoNames.of(spec).ft
    rows: dict[tuple[str, int], list[dict[str, float]]] = {}
    phases: dict[str, list[dict[str, dict[str, float]]]] = {}
    if args.pin:
        os.sched_setaffinity(0, {0})  # inherited by tritonserver and the stubs it starts while loading
    with LocalTriton(prepare_runtime(), repository, log_path=work / "tritonserver.log") as server:
        if args.pin:
            os.sched_setaffinity(0, {1})  # this process (the Python floor) and the perf_analyzer it starts
            print("pinned: server on CPU 0, clients on CPU 1", flush=True)
        print(
            f"tritonserver pid {server.pid}, gRPC {server.grpc_url}; prompt {PROMPT!r} ({step_shapes[0]})", flush=True
        )
        print(
            f"tokenizer models: dynamic batching {'off' if args.no_tokenizer_batching else 'on'}, "
            f"{args.tokenizer_instances} instance(s)",
            flush=True,
        )

        def measure(tool: str, model: str, data: Path, shapes: list[str], level: int) -> dict[str, float]:
            before = model_stats(server)
            figures = perf_analyzer(
                binary, env, server=server, model=model, data=data, shapes=shapes, level=level, seconds=args.seconds
            )
            if level == 1:
                phases.setdefault(tool, []).append(per_request_us(before, model_stats(server)))
            return figures

        for run in range(1, args.runs + 1):
            for level in levels:
                ensemble = "perf_analyzer ensemble"
                measured = {ensemble: measure(ensemble, MODEL, ensemble_data, ["text_input:1"], level)}
                if level == 1:
                    measured["python grpc floor ensemble"] = python_grpc_floor(server, args.seconds)
                if bls is not None:
                    variant = "perf_analyzer BLS variant"
                    measured[variant] = measure(variant, bls, ensemble_data, ["text_input:1"], level)
                measured["perf_analyzer model step"] = measure(
                    "perf_analyzer model step", step, step_data, step_shapes, level
                )
                for tool, figures in measured.items():
                    rows.setdefault((tool, level), []).append(figures)
                    print(
                        f"run {run} c={level:<2} {tool:<27} {figures['rps']:8.1f} infer/s  "
                        f"p50 {figures['p50']:6.2f} ms  p99 {figures['p99']:6.2f} ms",
                        flush=True,
                    )
    print(f"\nmedians over {args.runs} runs ({args.seconds:g} s windows, gRPC):")
    print(f"{'tool':<27} {'c':>3} {'infer/s':>9} {'p50 ms':>8} {'p99 ms':>8}")
    medians = {}
    for (tool, level), per_run in sorted(rows.items(), key=lambda item: (item[0][1], item[0][0])):
        med = {k: statistics.median(f[k] for f in per_run) for k in ("rps", "p50", "p99")}
        medians[(tool, level)] = med
        print(f"{tool:<27} {level:>3} {med['rps']:>9.1f} {med['p50']:>8.2f} {med['p99']:>8.2f}")
    if phases:
        print("\nserver-side per-request means at c=1, µs (Triton's /v2/models/stats; medians over runs):")
        print_phases(phases, 26)
    print("\npaired per run (median, range over runs):")
    for level in levels:

        def series(tool: str, key: str, level: int = level) -> list[float]:
            return [figures[key] for figures in rows[(tool, level)]]

        perf, step_p50 = series("perf_analyzer ensemble", "rps"), series("perf_analyzer model step", "p50")
        overheads = [e - s for e, s in zip(series("perf_analyzer ensemble", "p50"), step_p50, strict=True)]
        if level == 1:
            floors = [f / p for f, p in zip(series("python grpc floor ensemble", "rps"), perf, strict=True)]
            print(f"c={level:<2} python grpc floor/perf_analyzer throughput {paired(floors)}")
        print(f"c={level:<2} ensemble p50 overhead over the step, ms {paired(overheads)}")
        if bls is not None:
            bls_overheads = [b - s for b, s in zip(series("perf_analyzer BLS variant", "p50"), step_p50, strict=True)]
            print(f"c={level:<2} BLS variant p50 overhead over the step, ms {paired(bls_overheads)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
