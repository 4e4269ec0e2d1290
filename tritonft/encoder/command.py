"""``tritonft encoder-repo``: render an encoder's Triton repository from its conversion and check it."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--name", required=True, help="the served model's name (the ensemble's; NAME-tokenizer, NAME-onnx)"
    )
    parser.add_argument("--converted", required=True, type=Path, help="the OUT/onnx directory `tritonft convert` wrote")
    parser.add_argument("--tokenizer", required=True, type=Path, help="the Hugging Face directory with tokenizer.json")
    parser.add_argument("--out", required=True, type=Path, help="Triton model repository root to write into")
    parser.add_argument("--max-batch-size", type=int, default=32, help="texts per Triton batch (default 32)")
    parser.add_argument(
        "--max-queue-delay-us", type=int, default=0, help="dynamic batching wait for more requests (default 0)"
    )
    parser.add_argument("--instances", type=int, default=1, help="instances of each model (default 1)")
    parser.add_argument("--gpu", action="store_true", help="place the ONNX model on the GPU (default: CPU)")
    parser.add_argument(
        "--no-tensorrt",
        action="store_true",
        help="with --gpu: no TensorRT execution accelerator (default: TensorRT, FP16 for an fp16 conversion)",
    )
    parser.add_argument(
        "--engine",
        choices=["onnxruntime", "python"],
        default="onnxruntime",
        help="onnxruntime: Triton's ONNX Runtime backend (default); python: the same model.onnx run by the "
        "onnxruntime package in a Python-backend model (a Triton without the ONNX Runtime backend, CPU only)",
    )
    parser.add_argument(
        "--intra-op-threads", type=int, default=0, help="ONNX Runtime threads per instance (0: its default)"
    )


def run(args: argparse.Namespace) -> int:
    from tritonft.encoder.repo import EncoderServing, OnnxEngine, write_encoder_repository
    from tritonft.errors import UserError
    from tritonft.repo.check import check_repository

    serving = EncoderServing(
        args.name,
        max_batch_size=args.max_batch_size,
        max_queue_delay_us=args.max_queue_delay_us,
        instances=args.instances,
        gpu=args.gpu,
        engine=OnnxEngine(args.engine),
        tensorrt=not args.no_tensorrt,
        intra_op_threads=args.intra_op_threads,
    )
    models = write_encoder_repository(serving, args.converted, args.tokenizer, args.out)
    print(f"wrote {', '.join(models)} into {args.out}")
    problems = check_repository(args.out, require_checkpoint=True)
    if problems:
        raise UserError(f"the repository at {args.out} has problems", problems)
    print("checked: no problems")
    return 0
