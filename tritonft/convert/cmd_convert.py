"""``tritonft convert``: a Hugging Face checkpoint -> its serving engine's files (FasterTransformer: ``OUT/<N>-gpu/``).

The engine is the one of the family (``--family``, else ``config.json`` ``model_type``): :mod:`tritonft.engines`.
Encoders (``model_type: bert``) -> ``OUT/onnx/model.onnx`` by the ONNX Runtime engine (:mod:`tritonft.encoder.convert`).
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

from tritonft.errors import UserError
from tritonft.spec import Family, WeightDType


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--input", required=True, type=Path, help="Hugging Face model directory (config.json + weights)"
    )
    parser.add_argument("--output", required=True, type=Path, help="directory that receives <TP>-gpu/")
    parser.add_argument(
        "--tp", type=int, help="tensor-parallel size the weights are split for (FasterTransformer families: required)"
    )
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
    encoder = parser.add_argument_group("encoders (family bert: written to OUT/onnx/)")
    encoder.add_argument(
        "--task",
        choices=["embed", "classify"],
        help="what the model answers (default: classify for a *ForSequenceClassification checkpoint, else embed)",
    )
    encoder.add_argument(
        "--pooling",
        choices=["mean", "cls"],
        help="embedding pooling (default: the checkpoint's sentence-transformers Pooling module, else mean)",
    )
    encoder.add_argument(
        "--normalize",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="L2-normalise embeddings (default: yes when the checkpoint has a sentence-transformers Normalize "
        "module or no sentence-transformers files at all)",
    )
    encoder.add_argument(
        "--optimize",
        action="store_true",
        help="also run ONNX Runtime's transformer optimizer (fused Attention, SkipLayerNormalization, BiasGelu: "
        "seed 004's 'ONNX Runtime (optimized)'); kept only when it answers like the plain graph",
    )
    encoder.add_argument(
        "--max-seq-length",
        type=int,
        help="longest input in tokens (default: sentence_bert_config.json max_seq_length, else "
        "max_position_embeddings); longer inputs are refused when served",
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


@contextmanager
def _sigterm_unwinds() -> Iterator[None]:
    """SIGTERM (how Kubernetes stops a Job) unwinds the conversion while it runs; the caller's own handling of
    SIGTERM is back afterwards (a process that converts in-process, such as a test run, keeps its own)."""
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _encoder_options(args: argparse.Namespace) -> dict[str, object]:
    """The encoder group's options the user set (an unset one is left to the checkpoint)."""
    options = {
        "task": args.task,
        "pooling": args.pooling,
        "normalize": args.normalize,
        "max_seq_length": args.max_seq_length,
        "optimize": args.optimize or None,
    }
    return {key: value for key, value in options.items() if value is not None}


def run(args: argparse.Namespace) -> int:
    with _sigterm_unwinds():
        return _convert(args)


def _convert(args: argparse.Namespace) -> int:
    from tritonft.engines import ONNXRUNTIME, engine_for_checkpoint
    from tritonft.engines.base import ConvertRequest

    family = Family(args.family) if args.family else None
    engine = engine_for_checkpoint(args.input, family)
    options = _encoder_options(args)
    if engine is ONNXRUNTIME:
        tp = 1 if args.tp is None else args.tp
    else:
        from tritonft.convert.model import load_config

        model_type = load_config(args.input).get("model_type")
        if options:
            flags = ", ".join(f"--{key.replace('_', '-')}" for key in options)
            raise UserError(f"{flags}: encoder options (family bert), not for a {model_type!r} model; drop them")
        if args.tp is None:
            raise UserError(f"--tp is required to convert a {model_type!r} model for FasterTransformer")
        tp = args.tp
    request = ConvertRequest(
        input_dir=args.input,
        output_dir=args.output,
        tp=tp,
        dtype=WeightDType(args.dtype),
        family=family,
        workers=args.workers,
        fsync=args.fsync,
        source_hash=args.source_hash,
        options=options,
    )
    started = time.monotonic()
    outcome = engine.convert(request)
    for note in outcome.notes:
        print(f"note: {note}", file=sys.stderr)
    if outcome.skipped:
        print(outcome.summary)
    else:
        print(f"{outcome.summary} in {time.monotonic() - started:.1f}s")
    return 0
