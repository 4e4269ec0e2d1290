"""``tritonft diff OLD NEW``: what ``pulumi up`` would replace, roll or re-run going from one synthesized plan to
another (``tritonft synth --out``), with the provider rule behind each replacement. Exits 1 when a stateful or
expensive resource (claim, file system, cluster, node group, subnet, ...) would be replaced or deleted.

The day-2 check of a routine change (``docs/day2.md``)::

    git stash && tritonft synth --stack prod --assume-secret hfToken --out build/day2/base --quiet && git stash pop
    tritonft synth --stack prod --assume-secret hfToken --out build/day2/head --quiet
    tritonft diff build/day2/base build/day2/head
"""

from __future__ import annotations

import argparse
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("old", type=Path, help="the plan before the change (a `tritonft synth --out` directory)")
    parser.add_argument("new", type=Path, help="the plan after the change")


def run(args: argparse.Namespace) -> int:
    from tritonft.synth.plandiff import Report, load_plan, plan_diff

    report = Report.of(plan_diff(load_plan(args.old), load_plan(args.new)))
    print(report.text())
    return 1 if report.harmful else 0
