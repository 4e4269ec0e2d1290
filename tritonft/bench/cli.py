"""``tritonft bench --url URL --model NAME --concurrency 1,2,4,8 --duration 30 [--csv F] [--plot F.png]``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tritonft.errors import UserError
from tritonft.probe.cli import add_target_arguments, headers_from_env
from tritonft.probe.contract import TextContract
from tritonft.probe.endpoint import parse_endpoint
from tritonft.probe.expectations import load_translation_set

MAX_CONCURRENCY = 1024


def parse_concurrency(text: str) -> tuple[int, ...]:
    """``"1,2,4,8"`` -> ``(1, 2, 4, 8)``; every level a positive integer, no duplicates."""
    levels: list[int] = []
    for part in text.split(","):
        item = part.strip()
        if not item.isdigit() or not 1 <= int(item) <= MAX_CONCURRENCY:
            raise UserError(
                f"--concurrency {text!r}: {item!r} is not an integer in 1..{MAX_CONCURRENCY}; use e.g. 1,2,4,8"
            )
        if int(item) in levels:
            raise UserError(f"--concurrency {text!r}: level {item} is listed twice")
        levels.append(int(item))
    return tuple(levels)


def default_prompt() -> str:
    return load_translation_set().samples()[0].prompt


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_target_arguments(parser)
    parser.add_argument("--model", required=True, metavar="NAME", help="served model name")
    parser.add_argument(
        "--concurrency", default="1,2,4,8", help="comma-separated concurrent request counts (default 1,2,4,8)"
    )
    parser.add_argument(
        "--duration", type=float, default=30.0, metavar="S", help="measurement window per level in seconds (30)"
    )
    parser.add_argument(
        "--warmup",
        type=float,
        default=None,
        metavar="S",
        help="unmeasured warm-up before each window (default 10%% of --duration, at most 5 s)",
    )
    parser.add_argument("--timeout", type=float, default=60.0, metavar="S", help="timeout of each request (60)")
    parser.add_argument("--prompt", default=None, help="text sent with every request (default: a T5 translation)")
    parser.add_argument("--csv", type=Path, default=None, metavar="FILE", help="write one CSV row per level")
    parser.add_argument("--plot", type=Path, default=None, metavar="FILE.png", help="write latency vs throughput")


def run(args: argparse.Namespace) -> int:
    import asyncio

    from tritonft.bench.loadgen import LoadPlan, run_levels
    from tritonft.bench.results import format_table, write_csv, write_plot

    try:
        endpoint = parse_endpoint(args.url, args.protocol)
        contract = TextContract.simple(args.input_name, args.output_name)
    except ValueError as exc:
        raise UserError(f"--url/--protocol/--input-name/--output-name: {exc}") from exc
    if args.duration <= 0:
        raise UserError(f"--duration must be positive, got {args.duration}")
    if args.timeout <= 0:
        raise UserError(f"--timeout must be positive, got {args.timeout}")
    warmup = min(5.0, args.duration * 0.1) if args.warmup is None else args.warmup
    if warmup < 0:
        raise UserError(f"--warmup must not be negative, got {args.warmup}")
    if args.plot is not None and args.plot.suffix.lower() != ".png":
        raise UserError(f"--plot {args.plot}: the plot is a PNG; name the file *.png")
    plan = LoadPlan(
        endpoint=endpoint,
        model=args.model,
        contract=contract,
        prompt=args.prompt if args.prompt is not None else default_prompt(),
        concurrencies=parse_concurrency(args.concurrency),
        duration_s=args.duration,
        warmup_s=warmup,
        timeout_s=args.timeout,
        headers=headers_from_env(args.header_from_env),
    )
    try:
        results = asyncio.run(run_levels(plan, progress=lambda msg: print(msg, file=sys.stderr, flush=True)))
    except RuntimeError as exc:
        raise UserError(str(exc)) from exc
    print(format_table(results))
    if args.csv is not None:
        write_csv(results, args.csv)
        print(f"wrote {args.csv}", file=sys.stderr)
    if args.plot is not None:
        write_plot(results, args.plot, title=f"{args.model} @ {endpoint.url}")
        print(f"wrote {args.plot}", file=sys.stderr)
    return 0 if all(r.requests > 0 for r in results) else 1
