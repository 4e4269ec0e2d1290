"""``tritonft synth --stack NAME [--out DIR]``: the real program under the mock engine, written to disk."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--stack", required=True, help="stack name: reads stacks/Pulumi.<NAME>.yaml")
    parser.add_argument("--out", type=Path, help="output directory (default: build/synth/<NAME>)")
    parser.add_argument(
        "--project-dir", type=Path, help="directory holding Pulumi.yaml (default: nearest above the current one)"
    )
    parser.add_argument("--quiet", action="store_true", help="print only the totals line")
    parser.add_argument(
        "--assume-secret",
        action="append",
        default=[],
        metavar="KEY",
        help="plan as if the secret stack key KEY were set, as CI sets it before each deploy (e.g. hfToken from "
        "HF_TOKEN); its value is never read (repeatable)",
    )


def run(args: argparse.Namespace) -> int:
    from tritonft.synth.model_repos import write_model_repositories
    from tritonft.synth.run import synthesize

    result = synthesize(
        args.stack,
        out=args.out,
        project_dir=args.project_dir,
        extras=(write_model_repositories,),
        assume_secrets=tuple(args.assume_secret),
    )
    print(result.summary_text(totals_only=args.quiet))
    return 0
