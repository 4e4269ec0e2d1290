"""Where the ensemble's c=1 overhead over the model step goes: variants of the tokenizer models side by side on ONE
Triton, measured interleaved (perf_analyzer, gRPC, concurrency 1), with Triton's per-model statistics.

The served repository holds the ``dev`` stack's ``gpt2`` as rendered (its pre/post code from this checkout), plus
one ensemble per variant, each with its own stand-in step:

* ``--code NAME=REF``: the preprocessing/postprocessing ``model.py`` and ``tokenization.py`` of git ref ``REF``
  (e.g. ``before=f5126a3``), to compare code changes under the same load;
* ``--floor``: ``floor``, pre/post models that answer precomputed tensors for the benchmark prompt and do no
  per-request work at all (``benchmarks/floor_models/``): what the two Python-backend hops and the ensemble cost
  without any of our code;
* ``--no-batching NAME``: serve that ensemble's tokenizer models without their dynamic batcher;
* ``--bls``: the benchmark-only BLS variant of ``triton_bench.py``.

Every round measures each target once, in a fixed order, then the step alone. Prints each round, the medians, each
target's p50 minus the step's p50 (the overhead), and the server-side per-request means per model.

Usage: .venv/bin/python benchmarks/overhead_ab.py [--rounds 10] [--seconds 1] [--pin] [--code before=f5126a3]
           [--floor] [--bls] [--no-batching NAME]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from google.protobuf import text_format  # type: ignore[import-untyped]  # no types-protobuf in the lock

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.triton_bench import (
    add_bls_model,
    benchmark_inputs,
    model_stats,
    per_request_us,
    perf_analyzer,
    perf_analyzer_binary,
    print_phases,
)
from tests.system.realtriton.repos import serve_ready_repository, stack_specs
from tests.tritonft.repo.conftest import train_gpt_tokenizer
from tritonft.local_triton import LocalTriton, prepare_runtime
from tritonft.repo.naming import RepoNames
from tritonft.spec import Family
from tritonft.standin import read_config

ROOT = Path(__file__).resolve().parents[1]
FLOOR = ROOT / "benchmarks" / "floor_models"
ROLES = ("preprocessing", "postprocessing")


def code_files(ref: str) -> dict[str, bytes]:
    """Each role's model.py and the tokenization module at git ref ``ref``."""

    def show(path: str) -> bytes:
        return subprocess.run(["git", "-C", str(ROOT), "show", f"{ref}:{path}"], capture_output=True, check=True).stdout

    files = {f"{role}/model.py": show(f"model_repo/shared/{role}/1/model.py") for role in ROLES}
    tokenization = show("tritonft/repo/tokenization.py")
    files.update({f"{role}/tritonft_tokenization.py": tokenization for role in ROLES})
    return files


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--pin", action="store_true", help="server on CPU 0, perf_analyzer on CPU 1")
    parser.add_argument("--code", action="append", default=[], metavar="NAME=REF")
    parser.add_argument("--floor", action="store_true")
    parser.add_argument("--bls", action="store_true")
    parser.add_argument("--no-batching", action="append", default=[], metavar="NAME")
    args = parser.parse_args()
    binary, env = perf_analyzer_binary()
    work = Path(tempfile.mkdtemp(prefix="tritonft-overhead-"))
    tokenizer_dir = train_gpt_tokenizer(work / "tokenizer")
    [spec] = [s for s in stack_specs("dev") if s.name == "gpt2"]
    variants: dict[str, dict[str, bytes]] = {}
    for item in args.code:
        name, ref = item.split("=", 1)
        variants[name] = code_files(ref)
    if args.floor:
        variants["floor"] = {f"{role}/model.py": (FLOOR / f"{role}.py").read_bytes() for role in ROLES}
    specs = [spec, *(replace(spec, name=name) for name in variants)]
    repository = serve_ready_repository(specs, work / "repo", {Family.GPT2: tokenizer_dir})
    for name, files in variants.items():
        names = RepoNames.of(replace(spec, name=name))
        for role, model in zip(ROLES, (names.preprocessing, names.postprocessing), strict=True):
            for file in ("model.py", "tritonft_tokenization.py"):
                if f"{role}/{file}" in files:
                    (repository / model / "1" / file).write_bytes(files[f"{role}/{file}"])
    for name in args.no_batching:
        names = RepoNames.of(replace(spec, name=name))
        for model in (names.preprocessing, names.postprocessing):
            config = read_config(repository / model / "config.pbtxt")
            config.ClearField("dynamic_batching")
            (repository / model / "config.pbtxt").write_text(text_format.MessageToString(config))
    targets = [spec.name, *variants]
    if args.bls:
        targets.append(add_bls_model(repository, RepoNames.of(spec)))
    ensemble_data, step_data, step_shapes = benchmark_inputs(work, tokenizer_dir)
    step = RepoNames.of(spec).ft
    plan = [(target, ensemble_data, ["text_input:1"]) for target in targets]
    plan.append((step, step_data, step_shapes))
    p50s: dict[str, list[float]] = {}
    phases: dict[str, list[dict[str, dict[str, float]]]] = {}
    if args.pin:
        os.sched_setaffinity(0, {0})
    with LocalTriton(prepare_runtime(), repository, log_path=work / "tritonserver.log") as server:
        if args.pin:
            os.sched_setaffinity(0, {1})
        print(f"tritonserver pid {server.pid}; targets {[t for t, _, _ in plan]}", flush=True)
        for run in range(1, args.rounds + 1):
            for target, data, shapes in plan:
                before = model_stats(server)
                figures = perf_analyzer(
                    binary, env, server=server, model=target, data=data, shapes=shapes, level=1, seconds=args.seconds
                )
                phases.setdefault(target, []).append(per_request_us(before, model_stats(server)))
                p50s.setdefault(target, []).append(figures["p50"])
                print(
                    f"round {run} {target:<10} {figures['rps']:7.1f} infer/s  p50 {figures['p50']:6.3f} ms", flush=True
                )
    medians = {target: statistics.median(values) for target, values in p50s.items()}
    print(f"\nmedians over {args.rounds} rounds ({args.seconds:g} s windows, c=1, gRPC):")
    for target, _, _ in plan:
        overhead = "" if target == step else f"  overhead over the step {medians[target] - medians[step]:.3f} ms"
        print(f"{target:<10} p50 {medians[target]:.3f} ms{overhead}")
    print("\nserver-side per-request means, µs (medians over rounds):")
    print_phases(phases, 10)
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
