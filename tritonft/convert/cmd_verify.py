"""``tritonft verify``: re-check a converted ``<N>-gpu`` directory against its manifest (sizes + sha256)."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("directory", type=Path, help="the converted OUT/<N>-gpu directory")


def run(args: argparse.Namespace) -> int:
    from tritonft.convert.verify import verify
    from tritonft.errors import UserError

    report = verify(args.directory)
    if not report.ok:
        raise UserError(f"{args.directory} does not match its manifest; re-run `tritonft convert`", report.problems)
    print(f"ok: {args.directory}: {report.files} files, {report.bytes} bytes match manifest.json")
    return 0
