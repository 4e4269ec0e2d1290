"""``tritonft repo``: render a model's Triton repository (FT model, tokenizer models, ensemble) and check it."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--spec", required=True, type=Path, help="model spec JSON file (ModelSpec.to_json())")
    parser.add_argument(
        "--checkpoint",
        type=Path,
        help="converter output: the directory holding <TP>-gpu/ (or that directory); its config.ini is checked "
        "against the spec and its tokenizer files are shipped unless --tokenizer is given",
    )
    parser.add_argument(
        "--tokenizer", type=Path, help="directory with tokenizer.json, spiece.model or vocab.json+merges.txt"
    )
    parser.add_argument("--out", required=True, type=Path, help="Triton model repository root to write into")
    parser.add_argument(
        "--model-root",
        default="/models",
        help="absolute path at which Triton sees --out (model_checkpoint_path is absolute; default /models)",
    )
    parser.add_argument(
        "--checkpoint-path",
        help="absolute path at which Triton sees the <TP>-gpu weights when they live outside the repository "
        "(default <model-root>/<NAME>-ft/1/<TP>-gpu)",
    )
    parser.add_argument(
        "--engine",
        choices=["fastertransformer", "reference"],
        default="fastertransformer",
        help="what runs the model step: the model's engine backend (default: FasterTransformer for the generators, "
        "ONNX Runtime for the encoders; the server image) or a CPU stand-in of it in a Python-backend model "
        "(FT: tritonft's reference; encoders: the onnxruntime package); for tests and machines without the "
        "backend, never a stack",
    )
    parser.add_argument(
        "--judge-reference",
        type=Path,
        help="the judge's reference of this revision (`tritonft reference` output): the ensemble carries it for the "
        "judge (the generators: FasterTransformer's ensemble, a vLLM model's config.pbtxt)",
    )
    parser.add_argument(
        "--require-checkpoint",
        action="store_true",
        help="also fail when the weights or tokenizer files are not in the repository (use in the conversion Job)",
    )


def run(args: argparse.Namespace) -> int:
    from tritonft import option_file
    from tritonft.engines import engine_for
    from tritonft.engines.base import RepositorySources
    from tritonft.errors import UserError
    from tritonft.repo import check_repository
    from tritonft.repo.engine import Engine

    spec = option_file.read_spec("--spec", args.spec)
    sources = RepositorySources(
        checkpoint_dir=args.checkpoint,
        tokenizer_dir=args.tokenizer,
        model_root=args.model_root,
        checkpoint_path=args.checkpoint_path,
        cpu_stand_in=Engine(args.engine) is Engine.REFERENCE,
        judge_reference=args.judge_reference,
    )
    if args.judge_reference is not None and spec.family.is_encoder:
        raise UserError(f"--judge-reference: {spec.name} is a {spec.family} model; only the generators carry one")
    written = engine_for(spec.family).write_repository(spec, args.out, sources)
    if args.engine == Engine.REFERENCE and spec.family.is_encoder:
        print(f"model step: model.onnx run by the onnxruntime package (Python backend) in {written.models[-2]}")
    elif args.engine == Engine.REFERENCE:
        print(f"model step: tritonft's CPU reference of FasterTransformer (Python backend) in {written.models[0]}")
    print(f"wrote {len(written.files)} files for models {', '.join(written.models)} into {written.root}")
    if written.config_source:
        print(f"checked against {written.config_source}")
    if written.tokenizer:
        print(f"tokenizer files: {', '.join(written.tokenizer)}")
    problems = check_repository(args.out, require_checkpoint=args.require_checkpoint)
    if problems:
        raise UserError(f"the repository in {args.out} has problems", problems)
    print("repository check: OK")
    return 0
