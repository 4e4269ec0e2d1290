"""``tritonft verify``: re-check a converted ``<N>-gpu`` directory against its manifest (sizes + sha256), and with
``--generate`` also that the reference generates from it what it should (:mod:`tritonft.reference.check`).

An encoder's ``OUT/onnx`` directory is checked the same way (:mod:`tritonft.encoder.verify`): ``model.onnx``
against its manifest, and with ``--generate`` the probe's judgement of what ONNX Runtime answers from it."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tritonft.reference.check import ExpectedCase


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("directory", type=Path, help="the converted OUT/<N>-gpu directory (or an encoder's OUT/onnx)")
    parser.add_argument(
        "--generate",
        action="store_true",
        help="also run the CPU reference of FT's model step on the files: the probe's prompts must pass the "
        "probe's judgement (T5: BLEU; GPT: a non-degenerate continuation), or --expected-tokens must be reproduced; "
        "for an encoder, ONNX Runtime answers the probe's texts and the probe's judgement applies (width, unit norm, "
        "similarity order; a classifier's labels and scores)",
    )
    parser.add_argument(
        "--expected-tokens",
        type=Path,
        help="JSON of cases: prompt token ids, greedy or beam (width, length penalty), optional end id, the ids each "
        "beam must generate; implies --generate and replaces the judgement",
    )
    parser.add_argument(
        "--tokenizer",
        type=Path,
        help="directory with the model's tokenizer files for the judged prompts (default: DIRECTORY/../tokenizer)",
    )
    parser.add_argument(
        "--bleu-threshold", type=float, default=None, help="T5 judgement threshold (default: the probe's)"
    )


def run(args: argparse.Namespace) -> int:
    from tritonft.convert.verify import verify
    from tritonft.encoder.verify import is_encoder_conversion
    from tritonft.errors import UserError
    from tritonft.reference.check import load_expected

    if is_encoder_conversion(args.directory):
        return encoder_check(args)

    # A bad --expected-tokens file is reported before minutes of hashing and loading weights.
    expected = None if args.expected_tokens is None else load_expected(args.expected_tokens)
    report = verify(args.directory)
    if not report.ok:
        raise UserError(f"{args.directory} does not match its manifest; re-run `tritonft convert`", report.problems)
    print(f"ok: {args.directory}: {report.files} files, {report.bytes} bytes match manifest.json")
    if args.generate or expected is not None:
        return generate_check(args, expected)
    return 0


def generate_check(args: argparse.Namespace, expected: tuple[int, list[ExpectedCase]] | None) -> int:
    import time

    from tritonft.errors import UserError
    from tritonft.probe.expectations import DEFAULT_BLEU_THRESHOLD
    from tritonft.reference import build_model, load_checkpoint
    from tritonft.reference.check import expected_token_problems, judgement_problems

    started = time.monotonic()
    model = build_model(load_checkpoint(args.directory))
    if expected is not None:
        max_new, cases = expected
        problems = expected_token_problems(model, max_new, cases)
        if problems:
            raise UserError(
                f"{args.directory} does not generate the tokens of {args.expected_tokens} "
                f"({len(problems)} of {len(cases)} cases differ): the conversion is wrong",
                problems,
            )
        summary = f"all {len(cases)} cases of {args.expected_tokens} reproduced token for token"
    else:
        tokenizer = args.tokenizer or args.directory.resolve().parent / "tokenizer"
        threshold = DEFAULT_BLEU_THRESHOLD if args.bleu_threshold is None else args.bleu_threshold
        summary, problems = judgement_problems(model, tokenizer, threshold)
        if problems:
            raise UserError(
                f"{args.directory} does not generate what a working {model.family} model does: the conversion "
                "(or the model) is broken",
                problems,
            )
    print(f"ok: generation from {args.directory}: {summary} ({time.monotonic() - started:.1f} s on the CPU reference)")
    return 0


def encoder_check(args: argparse.Namespace) -> int:
    import time

    from tritonft.encoder.verify import judge_encoder, verify_encoder_files
    from tritonft.errors import UserError

    if args.expected_tokens is not None:
        raise UserError(
            f"--expected-tokens is for FasterTransformer conversions; {args.directory} is an encoder's: use --generate"
        )
    report = verify_encoder_files(args.directory)
    if not report.ok:
        raise UserError(f"{args.directory} does not match its manifest; re-run `tritonft convert`", report.problems)
    print(f"ok: {args.directory}: model.onnx ({report.bytes} bytes) matches manifest.json")
    if not args.generate:
        return 0
    started = time.monotonic()
    tokenizer = args.tokenizer or args.directory.resolve().parent / "tokenizer"
    judged = judge_encoder(args.directory, tokenizer)
    verdict = judged.verdict
    if not verdict.ok:
        raise UserError(
            f"{args.directory} does not answer like a working encoder: the conversion (or the model) is broken",
            [verdict.detail],
        )
    print(
        f"ok: answers of {args.directory}: {verdict.detail} ({len(judged.texts)} texts, "
        f"{time.monotonic() - started:.1f} s in ONNX Runtime)"
    )
    return 0
