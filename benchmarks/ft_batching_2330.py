"""The FT ensemble before and after issue 39's batching changes, on tritonserver 2.33.0 (NGC 23.04, the
FasterTransformer image's server): c=1 latency and c=8 throughput, medians over runs.

Two workloads, each against the repository rendered by the code of ``--before`` (a git ref, default the branch point
on main) and by this checkout, both served at once (one server each) and measured alternately run after run:

* ``t5`` -- the ``dev`` stack's ``t5-small`` (a trained SentencePiece tokenizer), greedy, eight prompts of 1 to 8
  words in turn: before, ``input_ids`` is not ragged, so only requests with prompts of the same token length can
  share an execution of the FT step; after, any can.
* ``gpt2 mixed`` -- the ``dev`` stack's ``gpt2``, the same prompt, in turn the input sets the gateway sends for a
  greedy, a sampled and a seeded request: before, the gateway's sets (greedy: ``max_output_len`` and
  ``runtime_top_k``; sampled: plus ``runtime_top_p`` and ``temperature``; seeded: plus ``random_seed``), after the
  one set it now sends for all three (:func:`tritonft.gateway.mapping.decoding_inputs`).

The FT step is the echo stand-in (``tritonft.standin``): the Triton side of the path (ensemble, both tokenizer
models, the batchers), not FT's GPU time. The load is perf_analyzer's (tritonclient 2.48.0's, ``.tools/perf``):
HTTP (its gRPC requests carry a parameter 2.33.0 refuses), closed loop, its ``--input-data`` entries sent in turn,
its stability check relaxed (the shared machine's windows never agree within 10%), on 127.0.0.1 only. Prints every
run, the medians, the FT step's rows per execution (Triton's statistics over the whole run) and the load average.

Usage: .venv/bin/python benchmarks/ft_batching_2330.py [--runs 3] [--seconds 4] [--before f31506c]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
from dataclasses import dataclass, replace
from io import BytesIO
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.system.realtriton.repos import stack_specs  # noqa: E402
from tests.tritonft.repo.conftest import train_gpt_tokenizer, train_t5_tokenizer  # noqa: E402
from tritonft.bench.results import read_perf_analyzer_csv  # noqa: E402
from tritonft.bench.runner import Tools, find_tools  # noqa: E402
from tritonft.local_triton import FT_IMAGE_SERVER, LocalTriton, prepare_runtime  # noqa: E402
from tritonft.repo.naming import RepoNames  # noqa: E402
from tritonft.spec import Family, ModelSpec  # noqa: E402
from tritonft.standin import standin_all  # noqa: E402

DEFAULT_BEFORE = "f31506c"
"""main when this branch started: the code before the batching changes."""
MAX_TOKENS = 8


@dataclass(frozen=True)
class Workload:
    label: str
    spec: ModelSpec
    before: list[dict[str, list[Any]]]
    after: list[dict[str, list[Any]]]


def t5_entries() -> list[dict[str, list[Any]]]:
    return [
        {"text_input": [" ".join(["word"] * n)], "max_output_len": [MAX_TOKENS], "runtime_top_k": [1]}
        for n in range(1, 9)
    ]


def gpt2_entries(before: bool) -> list[dict[str, list[Any]]]:
    base: dict[str, list[Any]] = {"text_input": ["the quick brown fox"], "max_output_len": [MAX_TOKENS]}
    if before:  # what the gateway sent before (tritonft.gateway.mapping at --before)
        greedy = {**base, "runtime_top_k": [1]}
        sampled = {**base, "runtime_top_k": [0], "runtime_top_p": [0.9], "temperature": [0.8]}
        seeded = {**sampled, "random_seed": [7]}
        return [greedy, sampled, seeded]
    from tritonft.gateway.mapping import Decoding, decoding_inputs

    entries = []
    for temperature, seed in ((0.0, None), (0.8, 123456789), (0.8, 7)):
        decoding = Decoding(max_tokens=MAX_TOKENS, temperature=temperature, top_p=0.9, seed=seed)
        entries.append({**base, **{p.name: [p.value] for p in decoding_inputs(decoding, streaming=False)}})
    return entries


def old_checkout(ref: str, into: Path) -> Path:
    """``ref``'s tree (``git archive``) in ``into``."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref], capture_output=True, check=True).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into


def render(code: Path, spec: ModelSpec, tokenizer: Path, out: Path, scratch: Path) -> None:
    """``tritonft repo`` of the checkout ``code`` (its own renderer and templates), then the stand-in."""
    spec_path = scratch / f"{spec.name}-{out.name}.json"
    spec_path.write_text(spec.to_json())
    command = [sys.executable, "-m", "tritonft", "repo", "--spec", str(spec_path), "--tokenizer", str(tokenizer)]
    command += ["--out", str(out), "--model-root", str(out)]
    env = {**os.environ, "PYTHONPATH": str(code)}
    subprocess.run(command, cwd=code, env=env, check=True, stdout=subprocess.DEVNULL)
    standin_all(out)


def perf_analyzer(
    tools: Tools, server: LocalTriton, model: str, data: Path, *, level: int, seconds: float, report: Path
) -> dict[str, str]:
    if tools.perf_analyzer is None:
        raise SystemExit("no perf_analyzer: bash benchmarks/setup_perf_analyzer.sh")
    # HTTP: perf_analyzer 2.48's gRPC requests carry a ``triton_``-prefixed parameter that 2.33.0 refuses
    # ("parameter keys starting with 'triton_' are reserved for Triton usage").
    command = [str(tools.perf_analyzer), "-m", model, "-u", server.http_url, "-i", "http"]
    command += ["--input-data", str(data), "--shape=text_input:1", "--concurrency-range", f"{level}:{level}"]
    command += ["--measurement-interval", str(round(seconds * 1000)), "--stability-percentage=1000", "-f", str(report)]
    env = {**os.environ, **tools.perf_analyzer_env}
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, env=env)
    return read_perf_analyzer_csv(report.read_text())


def ft_rows_per_execution(server: LocalTriton, model: str) -> float:
    with urllib.request.urlopen(f"http://{server.http_url}/v2/models/{model}/stats", timeout=10) as answer:
        stats = json.loads(answer.read())["model_stats"][0]
    return int(stats["inference_count"]) / max(1, int(stats["execution_count"]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--before", default=DEFAULT_BEFORE, help=f"git ref of the code before ({DEFAULT_BEFORE})")
    args = parser.parse_args()
    specs = {spec.family: spec for spec in stack_specs("dev")}
    runtime = prepare_runtime(release=FT_IMAGE_SERVER)
    tools = find_tools(None, None)
    with tempfile.TemporaryDirectory(prefix="ft-batching-2330-") as tmp:
        work = Path(tmp)
        before_code = old_checkout(args.before, work / "before-code")
        tokenizers = {
            Family.T5: train_t5_tokenizer(work / "t5-tokenizer"),
            Family.GPT2: train_gpt_tokenizer(work / "gpt-tokenizer"),
        }
        workloads = [
            Workload("t5 (8 prompt lengths)", specs[Family.T5], t5_entries(), t5_entries()),
            Workload("gpt2 mixed (greedy/sampled/seeded)", specs[Family.GPT2], gpt2_entries(True), gpt2_entries(False)),
        ]
        servers: dict[str, LocalTriton] = {}
        try:
            for variant, code in (("before", before_code), ("after", ROOT)):
                repo = work / f"repo-{variant}"
                for workload in workloads:
                    spec = replace(workload.spec, max_output_len=max(workload.spec.max_output_len, MAX_TOKENS))
                    render(code, spec, tokenizers[spec.family], repo, work)
                servers[variant] = LocalTriton(runtime, repo, log_path=work / f"triton-{variant}.log")
                servers[variant].start()
            figures: dict[tuple[str, str, int], list[float]] = {}
            for run in range(1, args.runs + 1):
                for workload in workloads:
                    for variant, server in servers.items():
                        data = work / f"data-{variant}-{workload.spec.name}.json"
                        entries = workload.before if variant == "before" else workload.after
                        data.write_text(json.dumps({"data": entries}))
                        name, seconds = workload.spec.name, args.seconds
                        row1 = perf_analyzer(tools, server, name, data, level=1, seconds=seconds, report=work / "1.csv")
                        row8 = perf_analyzer(tools, server, name, data, level=8, seconds=seconds, report=work / "8.csv")
                        p50 = float(row1["p50 latency"]) / 1000
                        rps = float(row8["Inferences/Second"])
                        figures.setdefault((workload.label, variant, 1), []).append(p50)
                        figures.setdefault((workload.label, variant, 8), []).append(rps)
                        print(
                            f"run {run} {workload.label} {variant}: c=1 p50 {p50:.2f} ms, c=8 {rps:.1f} req/s "
                            f"(p50 {float(row8['p50 latency']) / 1000:.2f} ms)",
                            flush=True,
                        )
            windows = f"{args.seconds:g} s windows"
            print(f"\nmedians over {args.runs} runs (tritonserver {FT_IMAGE_SERVER.version}, {windows}):")
            for workload in workloads:
                for variant, server in servers.items():
                    ft = RepoNames.of(workload.spec).ft
                    print(
                        f"  {workload.label} {variant}: c=1 p50 "
                        f"{statistics.median(figures[(workload.label, variant, 1)]):.2f} ms, c=8 "
                        f"{statistics.median(figures[(workload.label, variant, 8)]):.1f} req/s; FT step rows per "
                        f"execution over the runs {ft_rows_per_execution(server, ft):.2f}"
                    )
            print(f"load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
        finally:
            for server in servers.values():
                server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
