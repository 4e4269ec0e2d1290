"""``tritonft bench``: a load sweep of a deployed stack with the standard tools, results as CSV, JSON and plots.

After ``pulumi up``::

    pulumi stack output --json > outputs.json
    tritonft bench --stack-outputs outputs.json --chat gpt2 --completions gpt2 --embeddings minilm --kserve gpt2 \\
        --tokenizer ./gpt2-hf --concurrency 1,2,4,8 --header-from-env Authorization=BENCH_AUTH --out bench/

AIPerf measures the gateway's OpenAI routes, perf_analyzer the models' KServe V2 endpoints; every figure in
``OUT/bench.csv`` and ``OUT/bench.json`` is the tool's own. ``--in-cluster`` writes the Kubernetes Job that runs
the same command next to the Services instead (:mod:`tritonft.bench.job`).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tritonft import option_file
from tritonft.errors import UserError
from tritonft.probe.cli import headers_from_env

DEFAULT_LEVELS = "1,2,4,8"
DEFAULT_REQUESTS = 50
DEFAULT_OUT = Path("bench-results")
ROUTE_FLAGS = {"completions": "--completions", "chat": "--chat", "embeddings": "--embeddings", "kserve": "--kserve"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    target = parser.add_argument_group("target (from the stack's outputs or given)")
    target.add_argument(
        "--stack-outputs",
        type=Path,
        metavar="FILE.json",
        help="`pulumi stack output --json` saved to a file ('-' reads stdin): the gateway from openaiBaseUrl, each "
        "model's KServe V2 endpoint from endpoints; without a route flag every model of `models` is measured on "
        "its KServe V2 endpoint",
    )
    target.add_argument("--gateway", metavar="URL", help="the gateway's base URL (e.g. https://host/v1)")
    target.add_argument(
        "--triton", metavar="URL", help="a KServe V2 endpoint (http(s)://host:port or grpc(s)://host:port) for --kserve"
    )
    for route, flag in ROUTE_FLAGS.items():
        what = {
            "completions": "POST /v1/completions through the gateway (AIPerf)",
            "chat": "POST /v1/chat/completions streamed through the gateway (AIPerf: TTFT, inter-token latency)",
            "embeddings": "POST /v1/embeddings through the gateway (AIPerf)",
            "kserve": "the model's KServe V2 endpoint on Triton (perf_analyzer)",
        }[route]
        target.add_argument(flag, action="append", default=[], metavar="MODEL", help=f"measure {what}; repeatable")
    target.add_argument(
        "--header-from-env",
        action="append",
        default=[],
        metavar="NAME=ENV_VAR",
        help="send header NAME with the value of environment variable ENV_VAR (e.g. Authorization=BENCH_AUTH); "
        "never on a command line: AIPerf gets it through its environment, perf_analyzer refuses credentials",
    )
    target.add_argument(
        "--header-from-file",
        action="append",
        default=[],
        metavar="NAME=FILE",
        help="send header NAME with the contents of FILE (e.g. a mounted Secret; trailing newline dropped); repeatable",
    )
    target.add_argument("--ca-file", type=Path, metavar="PEM", help="CA bundle to verify the endpoints' TLS with")

    load = parser.add_argument_group("load")
    levels = load.add_mutually_exclusive_group()
    levels.add_argument("--concurrency", help=f"concurrency levels to sweep (default {DEFAULT_LEVELS})")
    levels.add_argument("--request-rate", metavar="RATES", help="request rates (req/s) to sweep instead")
    length = load.add_mutually_exclusive_group()
    length.add_argument(
        "--requests",
        type=int,
        metavar="N",
        help=f"AIPerf: requests per level (default {DEFAULT_REQUESTS}); perf_analyzer: requests per measurement window",
    )
    length.add_argument("--duration", type=float, metavar="S", help="seconds per level (AIPerf) / per window (PA)")
    load.add_argument("--warmup-requests", type=int, default=2, metavar="N", help="AIPerf warm-up requests (2)")
    load.add_argument("--output-tokens", type=int, default=16, metavar="N", help="max_tokens of each request (16)")
    load.add_argument("--input-tokens", type=int, default=32, metavar="N", help="AIPerf's synthetic prompt length (32)")
    load.add_argument("--timeout", type=float, default=60.0, metavar="S", help="timeout of each request (60)")
    load.add_argument(
        "--goodput",
        metavar="SLOS",
        help='AIPerf goodput SLOs, e.g. "time_to_first_token:200 request_latency:500" (ms): the requests/s that met '
        "every one",
    )

    inputs = parser.add_argument_group("inputs")
    inputs.add_argument(
        "--tokenizer",
        metavar="DIR",
        help="the tokenizer AIPerf builds its prompts with (needed for the gateway's routes): a local directory "
        "(the model's Hugging Face files), or `builtin` (tiktoken's o200k_base, which AIPerf downloads once); "
        "token counts are the server's `usage` either way (--use-server-token-count)",
    )
    inputs.add_argument(
        "--prompts",
        type=Path,
        metavar="FILE.jsonl",
        help='prompts for AIPerf, one {"text": "..."} per line (instead of synthetic ones); the first one is '
        "perf_analyzer's",
    )
    inputs.add_argument("--prompt", help="perf_analyzer's prompt (default: the first of --prompts, else a sentence)")
    inputs.add_argument("--input-name", default="text_input", help="the KServe V2 text input (text_input)")

    output = parser.add_argument_group("output and tools")
    output.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"results directory (default {DEFAULT_OUT})")
    output.add_argument("--title", default=None, help="plot titles (default: the stack's environment or 'bench')")
    output.add_argument("--aiperf", type=Path, metavar="PATH", help="the aiperf command (default .tools/aiperf)")
    output.add_argument(
        "--perf-analyzer", type=Path, metavar="PATH", help="perf_analyzer (default .tools/perf, then PATH)"
    )
    output.add_argument(
        "--perf-analyzer-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="an extra perf_analyzer argument, e.g. --perf-analyzer-arg=--stability-percentage=50; repeatable",
    )

    cluster = parser.add_argument_group("in the cluster")
    cluster.add_argument(
        "--collect",
        type=Path,
        metavar="LOG",
        help="write the results (CSV, JSON, plots) of an --in-cluster Job from its log (kubectl logs job/NAME > LOG), "
        "or of an earlier sweep from its bench.json",
    )
    cluster.add_argument("--print-results", action="store_true", help=argparse.SUPPRESS)
    cluster.add_argument(
        "--in-cluster",
        action="store_true",
        help="do not measure from here: write the Kubernetes Job that runs this sweep next to the Services "
        "(--job-out), to apply with kubectl",
    )
    cluster.add_argument("--job-out", type=Path, metavar="FILE.yaml", help="where --in-cluster writes the Job")
    cluster.add_argument("--namespace", help="the Job's namespace (default: the stack output namespace)")
    cluster.add_argument("--image", help="the Job's image: one with tritonft, AIPerf and perf_analyzer")
    cluster.add_argument("--job-name", default="tritonft-bench", help="the Job's name (tritonft-bench)")
    cluster.add_argument(
        "--secret-header",
        action="append",
        default=[],
        metavar="NAME=SECRET/KEY",
        help="in the Job, send header NAME with the value of key KEY of Secret SECRET (mounted as a file); repeatable",
    )


@dataclass(frozen=True)
class Target:
    """The endpoints and the workloads' models, resolved from the stack's outputs and the flags."""

    gateway: str | None
    triton: Mapping[str, str]
    """Model -> its KServe V2 endpoint."""
    routes: Mapping[str, tuple[str, ...]]
    environment: str | None = None
    namespace: str | None = None


def read_stack_outputs(path: Path) -> dict[str, Any]:
    if str(path) == "-":
        text = sys.stdin.read()
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise UserError(f"--stack-outputs -: stdin is not JSON ({exc}); pipe `pulumi stack output --json`") from exc
    else:
        data = option_file.read_json("--stack-outputs", path)
    if not isinstance(data, dict):
        raise UserError("--stack-outputs: expected the JSON object `pulumi stack output --json` prints")
    return data


def resolve_target(args: argparse.Namespace, outputs: Mapping[str, Any]) -> Target:
    """Flags over stack outputs; every problem at once (UserError)."""
    problems: list[str] = []
    routes = {route: tuple(getattr(args, route)) for route in ROUTE_FLAGS}
    endpoints = outputs.get("endpoints") if isinstance(outputs.get("endpoints"), dict) else {}
    assert isinstance(endpoints, dict)
    if not any(routes.values()):
        models = outputs.get("models")
        if isinstance(models, list) and models:
            routes["kserve"] = tuple(str(m) for m in models)
        else:
            problems.append(
                "name what to measure: --completions/--chat/--embeddings/--kserve MODEL (or pass "
                "--stack-outputs of a stack with models)"
            )
    gateway = args.gateway or outputs.get("openaiBaseUrl")
    if (routes["completions"] or routes["chat"] or routes["embeddings"]) and not gateway:
        problems.append(
            "the OpenAI routes need the gateway: --gateway URL or --stack-outputs with openaiBaseUrl "
            "(a stack with gateway: true and an ingress)"
        )
    triton: dict[str, str] = {}
    for model in routes["kserve"]:
        url = args.triton or endpoints.get(model)
        if not url:
            problems.append(
                f"--kserve {model}: no KServe V2 endpoint; pass --triton URL (the stack output "
                f"endpoints has {'no entry' if model not in endpoints else 'null'} for it: no ingress)"
            )
        else:
            triton[model] = str(url)
    if problems:
        raise UserError("tritonft bench: cannot tell what to measure", problems)
    env, ns = outputs.get("environment"), outputs.get("namespace")
    return Target(
        gateway=str(gateway) if gateway else None,
        triton=triton,
        routes=routes,
        environment=str(env) if env else None,
        namespace=str(ns) if ns else None,
    )


def _positive(flag: str, value: float | None) -> None:
    if value is not None and value <= 0:
        raise UserError(f"{flag} must be positive, got {value:g}")


def run(args: argparse.Namespace) -> int:
    from tritonft.bench.plan import (
        AiperfInputs,
        LoadMode,
        PerfAnalyzerInputs,
        Route,
        SweepSettings,
        Workload,
        gateway_base,
        parse_goodput,
        parse_levels,
        perf_analyzer_data,
        points,
    )

    if args.collect is not None:
        return collect(args)
    outputs = read_stack_outputs(args.stack_outputs) if args.stack_outputs is not None else {}
    target = resolve_target(args, outputs)
    for flag, value in (
        ("--requests", args.requests),
        ("--duration", args.duration),
        ("--timeout", args.timeout),
        ("--output-tokens", args.output_tokens),
        ("--input-tokens", args.input_tokens),
    ):
        _positive(flag, value)
    mode = LoadMode.REQUEST_RATE if args.request_rate else LoadMode.CONCURRENCY
    try:
        levels = (
            parse_levels("--request-rate", args.request_rate, integers=False)
            if args.request_rate
            else parse_levels("--concurrency", args.concurrency or DEFAULT_LEVELS, integers=True)
        )
        goodput = parse_goodput(args.goodput) if args.goodput else ()
        base = gateway_base(target.gateway) if target.gateway else ""
    except ValueError as exc:
        raise UserError(str(exc)) from exc
    settings = SweepSettings(
        mode=mode,
        levels=levels,
        requests=None if args.duration is not None else (args.requests or DEFAULT_REQUESTS),
        duration_s=args.duration,
        warmup_requests=args.warmup_requests,
        output_tokens=args.output_tokens,
        input_tokens=args.input_tokens,
        timeout_s=args.timeout,
        goodput=goodput,
        perf_analyzer_args=tuple(args.perf_analyzer_arg),
    )
    workloads = [
        Workload(Route(route), m, base) for route in ("completions", "chat", "embeddings") for m in target.routes[route]
    ]
    workloads += [Workload(Route.KSERVE, m, target.triton[m]) for m in target.routes["kserve"]]
    if args.in_cluster:
        from tritonft.bench.job import write_job

        return write_job(args, target.gateway, target.triton, target.namespace)
    uses_aiperf = any(w.route is not Route.KSERVE for w in workloads)
    if uses_aiperf and args.tokenizer is None:
        raise UserError(
            "--tokenizer DIR is needed for the gateway's routes: AIPerf builds its prompts with a tokenizer (the "
            "model's Hugging Face directory with tokenizer.json; or builtin, which AIPerf downloads once)"
        )
    if args.tokenizer not in (None, "builtin") and not Path(args.tokenizer).is_dir():
        raise UserError(
            f"--tokenizer {args.tokenizer}: not a directory; pass the model's tokenizer directory or builtin"
        )
    if args.prompts is not None and not args.prompts.is_file():
        raise UserError(f"--prompts {args.prompts}: no such file")
    headers = {**headers_from_env(args.header_from_env), **headers_from_files(args.header_from_file)}
    from tritonft.bench.runner import BenchError, RunContext, check_gateway, check_triton, find_tools, run_sweep
    from tritonft.bench.runner import stderr_progress as progress

    try:
        tools = find_tools(args.aiperf, args.perf_analyzer)
        if uses_aiperf:
            check_gateway(
                base, sorted({w.model for w in workloads if w.route is not Route.KSERVE}), headers, args.ca_file
            )
        workloads = [
            replace(w, decoupled=check_triton(w.base_url, w.model, headers, args.ca_file))
            if w.route is Route.KSERVE
            else w
            for w in workloads
        ]
    except BenchError as exc:
        raise UserError(str(exc)) from exc
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    perf_inputs = None
    if any(w.route is Route.KSERVE for w in workloads):
        data = out / "raw" / "perf_analyzer_input.json"
        data.parent.mkdir(parents=True, exist_ok=True)
        data.write_text(perf_analyzer_data(_prompt(args), args.input_name))
        perf_inputs = PerfAnalyzerInputs(data, args.input_name)
    ctx = RunContext(
        tools=tools,
        settings=settings,
        out=out,
        headers=headers,
        aiperf_inputs=AiperfInputs(args.tokenizer, args.prompts) if args.tokenizer is not None else None,
        perf_inputs=perf_inputs,
        ca_file=args.ca_file,
    )
    plan = points(workloads, levels)
    progress(f"tritonft bench: {len(plan)} runs ({len(workloads)} workloads x {len(levels)} levels) into {out}")
    failure: BenchError | None = None
    try:
        results = run_sweep(plan, ctx, progress)
    except BenchError as exc:
        failure, results = exc, exc.measured
    title = args.title or target.environment or "bench"
    meta = {"title": title, "mode": mode.value, "levels": list(levels), "settings": _settings_meta(settings)}
    written = write_results(results, out, title, meta)
    from tritonft.bench.results import format_table, to_json

    if results:
        print(format_table(results))
    for path in written:
        progress(f"wrote {path}")
    if args.print_results and results:
        from tritonft.bench.job import results_line

        print(results_line(json.loads(to_json(results, meta))), flush=True)
    if failure is not None:
        raise UserError(f"tritonft bench: {failure}")
    return 0


def collect(args: argparse.Namespace) -> int:
    """``--collect LOG``: an in-cluster Job's results, written here as a local sweep's."""
    from tritonft.bench.job import read_results_line
    from tritonft.bench.results import format_table, from_json

    if not args.collect.is_file():
        raise UserError(f"--collect {args.collect}: no such file (save it with kubectl logs job/NAME > FILE)")
    payload = read_results_line(args.collect.read_text(errors="replace"))
    results = from_json(payload)
    meta = payload.get("meta") if isinstance(payload.get("meta"), dict) else {}
    assert isinstance(meta, dict)
    title = args.title or str(meta.get("title") or "bench")
    args.out.mkdir(parents=True, exist_ok=True)
    written = write_results(results, args.out, title, {**meta, "collected_from": str(args.collect)})
    print(format_table(results))
    for path in written:
        print(f"wrote {path}", file=sys.stderr)
    return 0


def headers_from_files(specs: list[str]) -> dict[str, str]:
    """``["Authorization=/run/secrets/auth"]`` -> ``{"Authorization": <the file's text>}``; UserError names the fix."""
    headers: dict[str, str] = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name.strip() or not path.strip():
            raise UserError(f"--header-from-file {spec!r} must look like NAME=FILE")
        try:
            headers[name.strip()] = Path(path.strip()).read_text().rstrip("\r\n")
        except OSError as exc:
            raise UserError(f"--header-from-file {spec!r}: cannot read {path.strip()} ({exc.strerror})") from exc
    return headers


def _settings_meta(settings: Any) -> dict[str, Any]:
    from dataclasses import asdict

    return {k: v for k, v in asdict(settings).items() if k != "levels"}


def _prompt(args: argparse.Namespace) -> str:
    if args.prompt:
        return str(args.prompt)
    if args.prompts is not None:
        for line in args.prompts.read_text().splitlines():
            if line.strip():
                text = json.loads(line).get("text")
                if isinstance(text, str) and text:
                    return text
    return "The quick brown fox jumps over the lazy dog."


def write_results(results: list[Any], out: Path, title: str, meta: Mapping[str, Any]) -> list[Path]:
    """``bench.csv``, ``bench.json`` and the plots (PNG and SVG) in ``out``; returns the paths written."""
    from tritonft.bench.plots import streaming_latency, throughput_latency
    from tritonft.bench.results import to_csv, to_json

    if not results:
        return []
    written: list[Path] = []

    def put(name: str, data: bytes) -> None:
        path = out / name
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
        written.append(path)

    put("bench.csv", to_csv(results).encode())
    put("bench.json", to_json(results, meta).encode())
    for fmt in ("png", "svg"):
        put(f"throughput_latency.{fmt}", throughput_latency(results, title, fmt))
        streamed = streaming_latency(results, title, fmt)
        if streamed is not None:
            put(f"streaming_latency.{fmt}", streamed)
    return written
