"""The recorded queue/compute ratio (what the HPA and KEDA scale on) beside perf_analyzer's server-side queue and
compute times, on a real Triton under perf_analyzer's load, at concurrency 1, 4 and 16.

Served: the ``staging`` stack's ``t5-3b`` rendered by ``tritonft.repo`` with a small trained T5 tokenizer; the FT
step is the Python stand-in (an echo; ``--step-sleep-ms`` makes each of its batches take that long, as a GPU step
would). Prometheus is Debian's, scraping Triton's metrics port every ``--scrape`` (default the rendered
ServiceMonitor's 15 s) with the target labels the ServiceMonitor gives, and the stack's PrometheusRule loaded as
rendered (its recording group evaluates every 15 s, ``rate(...[1m])``).

Per run and concurrency, perf_analyzer drives the ensemble for 3 windows of ``--window`` seconds (its stability
check relaxed: the medians over runs carry the noise); then the script reads

- perf_analyzer: per composing model (the models the ratio sums: preprocessing, FT step, postprocessing) the
  average queue and compute-infer time per request and its request rate -> sum of queue / sum of compute;
- Prometheus: the recorded ``triton:queue_compute:ratio`` of the pod at the end of the measurement (the last rule
  evaluation: rates over the minute before it), and the same two counters over exactly perf_analyzer's
  measurement (``increase`` over its windows) to separate window placement from any other difference.

Prints every run, then the medians over runs and their relative difference, the ensemble's own queue and compute
times as perf_analyzer reports them, and the load average (1 min) before and after each measurement.

Usage: .venv/bin/python benchmarks/ratio_bench.py [--runs 3] [--window 25] [--concurrency 1,4,16]
           [--step-sleep-ms 0] [--scrape 15s]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.triton_bench import perf_analyzer_binary
from components.common.triton import RATIO_RECORD
from components.serving.monitoring import series_selector
from tests.system.realtriton.prometheus import LocalPrometheus, service_monitor_target_labels
from tests.system.realtriton.repos import stack_specs
from tests.system.realtriton.signal_plan import MODEL, POD, STACK, synthesized_plan
from tests.tritonft.repo.conftest import train_t5_tokenizer
from tritonft.local_triton import LocalTriton, prepare_runtime
from tritonft.repo.naming import RepoNames
from tritonft.repo.render import write_repository
from tritonft.standin import set_behaviour, standin_all

PROMPT = "translate English to German: The house is wonderful."
REPORT = "report.csv"


@dataclass(frozen=True)
class ServerTimes:
    """perf_analyzer's server-side figures for one model: average µs per request and requests/s."""

    queue_us: float
    compute_infer_us: float
    rps: float


def read_row(path: Path) -> ServerTimes:
    row = next(csv.DictReader(path.read_text().splitlines()))
    return ServerTimes(float(row["Server Queue"]), float(row["Server Compute Infer"]), float(row["Inferences/Second"]))


def perf_analyzer(
    binary: Path, env: dict[str, str], *, server: LocalTriton, data: Path, level: int, window_s: float, cwd: Path
) -> tuple[ServerTimes, dict[str, ServerTimes], float, float]:
    """One measurement of the ensemble: its own times, each composing model's, and the Unix times the
    measurement windows began (about) and ended."""
    for old in cwd.glob(f"*{REPORT}"):
        old.unlink()
    args = [str(binary), "-m", MODEL, "-u", server.grpc_url, "-i", "grpc", "--input-data", str(data)]
    args += ["--shape=text_input:1", "--concurrency-range", f"{level}:{level}"]
    args += ["--measurement-interval", str(int(window_s * 1000)), "--stability-percentage", "1000"]
    args += ["--max-trials", "3", "-f", REPORT]
    started = time.time()
    done = subprocess.run(args, capture_output=True, text=True, env=env, cwd=cwd, check=False, timeout=900)
    ended = time.time()
    if done.returncode != 0:
        raise RuntimeError(f"perf_analyzer failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    composing = {
        path.name.removesuffix(f".{REPORT}").rsplit("_v", 1)[0]: read_row(path) for path in cwd.glob(f"*_v*.{REPORT}")
    }
    return read_row(cwd / REPORT), composing, max(started, ended - 3 * window_s), ended


def perf_analyzer_ratio(composing: dict[str, ServerTimes]) -> float:
    """Sum over the models of queue time / sum of compute-infer time (each model's averages weighted by its
    request rate, as Triton's cumulative counters weigh them)."""
    queue = sum(t.queue_us * t.rps for t in composing.values())
    compute = sum(t.compute_infer_us * t.rps for t in composing.values())
    return queue / compute if compute else 0.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--window", type=float, default=25.0, help="seconds per perf_analyzer window (3 of them)")
    parser.add_argument("--concurrency", default="1,4,16")
    parser.add_argument("--step-sleep-ms", type=float, default=0.0)
    parser.add_argument("--scrape", default="15s", help="Prometheus scrape interval (rule groups keep their own)")
    args = parser.parse_args()
    levels = [int(x) for x in args.concurrency.split(",")]
    binary, env = perf_analyzer_binary()
    work = Path(tempfile.mkdtemp(prefix="tritonft-ratio-bench-"))
    plan = synthesized_plan(work / "plan", {})
    (spec,) = [s for s in stack_specs(STACK) if s.name == MODEL]
    names = RepoNames.of(spec)
    repository = work / "repo"
    write_repository(spec, repository, tokenizer_dir=train_t5_tokenizer(work / "tokenizer"), model_root=str(repository))
    (step,) = standin_all(repository)
    if args.step_sleep_ms:
        set_behaviour(repository / step, sleep_s=args.step_sleep_ms / 1000)
    data = work / "ensemble.json"
    data.write_text(json.dumps({"data": [{"text_input": [PROMPT]}]}))
    rules = work / "rules.yaml"
    rules.write_text(yaml.safe_dump(plan.rule["spec"], sort_keys=False))
    labels = service_monitor_target_labels(plan.monitor, plan.service, plan.deployment, POD)
    (endpoint,) = plan.monitor["spec"]["endpoints"]
    sel = series_selector(plan.namespace, plan.job) + f',pod="{POD}",model!="{names.ensemble}"'
    rows: dict[int, list[dict[str, float]]] = {}
    with LocalTriton(prepare_runtime(), repository, log_path=work / "tritonserver.log") as server:
        prometheus = LocalPrometheus(
            work, [rules], [(f"127.0.0.1:{server.metrics_port}", endpoint["path"], labels)], interval=args.scrape
        )
        prometheus.start()
        try:
            print(
                f"tritonserver pid {server.pid}, prometheus {prometheus.url} (scrape {args.scrape}); "
                f"stand-in step sleep {args.step_sleep_ms:g} ms/batch; {args.window:g} s windows",
                flush=True,
            )
            for run in range(1, args.runs + 1):
                for level in levels:
                    load_before = os.getloadavg()[0]
                    ensemble, composing, began, ended = perf_analyzer(
                        binary, env, server=server, data=data, level=level, window_s=args.window, cwd=work
                    )
                    load_after = os.getloadavg()[0]
                    assert set(composing) == {names.preprocessing, names.ft, names.postprocessing}, composing
                    recorded = {
                        s["metric"]["pod"]: float(s["value"][1])
                        for s in prometheus.query(
                            f"{RATIO_RECORD}{{{series_selector(plan.namespace, plan.job)}}}", at=ended
                        )
                    }
                    span = f"{max(1, round(ended - began))}s"
                    exact = prometheus.query(
                        f"sum(increase(nv_inference_queue_duration_us{{{sel}}}[{span}]))\n"
                        f"/ sum(increase(nv_inference_compute_infer_duration_us{{{sel}}}[{span}]))",
                        at=ended,
                    )
                    figures = {
                        "perf_analyzer": perf_analyzer_ratio(composing),
                        "recorded": recorded.get(POD, float("nan")),
                        "same window": float(exact[0]["value"][1]) if exact else float("nan"),
                        "ensemble queue us": ensemble.queue_us,
                        "ensemble compute us": ensemble.compute_infer_us,
                        "rps": ensemble.rps,
                        "load before": load_before,
                        "load after": load_after,
                    }
                    rows.setdefault(level, []).append(figures)
                    per_model = "; ".join(
                        f"{name.removeprefix(MODEL + '-') or 'ft'} q {t.queue_us:.0f} c {t.compute_infer_us:.0f}"
                        for name, t in sorted(composing.items())
                    )
                    print(
                        f"run {run} c={level:<2} {ensemble.rps:7.1f} infer/s  perf_analyzer ratio "
                        f"{figures['perf_analyzer']:.3f}  recorded {figures['recorded']:.3f}  same window "
                        f"{figures['same window']:.3f}  ({per_model} us)  load {load_before:.2f}->{load_after:.2f}",
                        flush=True,
                    )
        finally:
            prometheus.stop()
    print(f"\nmedians over {args.runs} runs (3 x {args.window:g} s windows per measurement):")
    print(
        f"{'c':>3} {'infer/s':>8} {'perf_analyzer':>14} {'recorded':>9} {'diff':>7} {'same window':>12} "
        f"{'ens. queue us':>14} {'ens. compute us':>16} {'load 1m':>12}"
    )
    for level, per_run in rows.items():
        med = {k: statistics.median(r[k] for r in per_run) for k in per_run[0]}
        diff = (med["recorded"] - med["perf_analyzer"]) / med["perf_analyzer"] if med["perf_analyzer"] else 0.0
        loads = [r[k] for r in per_run for k in ("load before", "load after")]
        print(
            f"{level:>3} {med['rps']:>8.1f} {med['perf_analyzer']:>14.3f} {med['recorded']:>9.3f} {diff:>+7.1%} "
            f"{med['same window']:>12.3f} {med['ensemble queue us']:>14.0f} {med['ensemble compute us']:>16.0f} "
            f"{min(loads):>5.2f}-{max(loads):<5.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
