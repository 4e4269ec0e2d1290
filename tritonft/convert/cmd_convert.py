"""``tritonft convert``: a Hugging Face checkpoint -> its serving engine's files (FasterTransformer: ``OUT/<N>-gpu/``).

The engine is the one of the family (``--family``, else ``config.json`` ``model_type``): :mod:`tritonft.engines`.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path
from types import FrameType

from tritonft.spec import Family, WeightDType


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--input", required=True, type=Path, help="Hugging Face model directory (config.json + weights)"
    )
    parser.add_argument("--output", required=True, type=Path, help="directory that receives <TP>-gpu/")
    parser.add_argument("--tp", required=True, type=int, help="tensor-parallel size the weights are split for")
    parser.add_argument(
        "--dtype",
        choices=[d.value for d in WeightDType],
        default=WeightDType.FP32.value,
        help="element type of the .bin files (weight_data_type); the GPU compute type is set separately in "
        "config.pbtxt (default: fp32, what FT's docs use for t5-v1.1/flan-t5)",
    )
    parser.add_argument(
        "--family",
        choices=[f.value for f in Family],
        help="model family (default: from config.json model_type)",
    )
    parser.add_argument("--workers", type=int, default=2, help="conversion threads; memory grows with it (default: 2)")
    parser.add_argument(
        "--source-hash",
        choices=["sha256", "fingerprint"],
        default="sha256",
        help="how manifest.json identifies the input files: sha256 = full content hash, computed while converting "
        "(~0.5 s of CPU per GB; a rerun after the inputs were merely touched is still a no-op); fingerprint = size, "
        "mtime and safetensors-header hash (no extra read; a rerun after the inputs were touched converts again)",
    )
    parser.add_argument(
        "--fsync",
        action="store_true",
        help="fsync every file before the final rename (survives power loss; slower). Without it a killed "
        "process still never leaves a partial <TP>-gpu directory",
    )


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)  # unwinds like Ctrl-C, so the partial directory is removed


def run(args: argparse.Namespace) -> int:
    from tritonft.engines import engine_for_checkpoint
    from tritonft.engines.base import ConvertRequest

    signal.signal(signal.SIGTERM, _terminate)  # Kubernetes stops Jobs with SIGTERM
    family = Family(args.family) if args.family else None
    request = ConvertRequest(
        input_dir=args.input,
        output_dir=args.output,
        tp=args.tp,
        dtype=WeightDType(args.dtype),
        family=family,
        workers=args.workers,
        fsync=args.fsync,
        source_hash=args.source_hash,
    )
    started = time.monotonic()
    outcome = engine_for_checkpoint(args.input, family).convert(request)
    for note in outcome.notes:
        print(f"note: {note}", file=sys.stderr)
    if outcome.skipped:
        print(outcome.summary)
    else:
        print(f"{outcome.summary} in {time.monotonic() - started:.1f}s")
    return 0
