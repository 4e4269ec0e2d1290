"""``tritonft``: one console script, one sub-command per module.

Each command module defines ``add_arguments(parser)`` and ``run(args) -> int`` and keeps its top-level imports
light (heavy libraries are imported inside ``run``), so ``tritonft --help`` stays fast and the in-cluster tools
image does not need Pulumi for ``convert``.

These are the runtime's commands. The commands that read a stack (``preflight``) need ``components`` and live above
both halves, in :mod:`stackcli.cli`, whose ``main`` is the installed ``tritonft`` script and passes the whole table
here (``main(argv, commands=...)``); this module never names them, so the runtime stands on nothing of ``components``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Mapping, Sequence

from tritonft import __version__
from tritonft.errors import UserError

COMMANDS: dict[str, tuple[str, str]] = {
    "synth": (
        "tritonft.synth.command",
        "run the Pulumi program offline (mock engine) and write the whole plan to disk",
    ),
    "diff": (
        "tritonft.synth.diff_command",
        "what `pulumi up` would replace, roll or re-run between two synthesized plans (the day-2 check)",
    ),
    "repo": ("tritonft.repo.command", "render and check a model's Triton repository (FT model, tokenizers, ensemble)"),
    "probe": ("tritonft.probe.cli", "check a deployed endpoint: health, contract, a judged inference, latency"),
    "judge": (
        "tritonft.probe.in_cluster",
        "judge a candidate version from inside the cluster (the judge Job's command: the probe, its verdict kept by "
        "Kubernetes); with --config and --endpoint, reproduce that verdict anywhere",
    ),
    "judge-inputs": (
        "tritonft.probe.judge_inputs",
        "write what a synthesized plan gives one model's judge: its Jobs' spec and its judge Job's settings (to "
        "reproduce a verdict)",
    ),
    "bench": (
        "tritonft.bench.cli",
        "sweep a stack's load with AIPerf (OpenAI routes) and perf_analyzer (KServe V2): CSV, JSON, plots",
    ),
    "convert": (
        "tritonft.convert.cmd_convert",
        "convert a Hugging Face T5/GPT-2/GPT-J checkpoint to FasterTransformer, or a BERT encoder to ONNX",
    ),
    "encoder-repo": (
        "tritonft.encoder.command",
        "render and check an encoder's Triton repository (tokenizer model, ONNX model, ensemble) from its conversion",
    ),
    "verify": (
        "tritonft.convert.cmd_verify",
        "re-check a converted <N>-gpu directory against its manifest (--generate: and what it generates)",
    ),
    "reference": (
        "tritonft.reference.command",
        "the judge's reference of a T5/GPT-2/GPT-J/Llama/Qwen2 checkpoint: greedy answers and near-ties of its "
        "original weights",
    ),
    "download": ("tritonft.download", "download the files conversion and tokenization need from the Hugging Face Hub"),
    "startup-budget": (
        "tritonft.rollout.command",
        "where each Triton replica's start-up seconds went (scheduled, init, started, ready; model loads)",
    ),
    "prune-compile-cache": (
        "tritonft.engines.vllm.compile_cache",
        "remove the key directories of a vLLM model's compile cache whose lease no pod has renewed for a day",
    ),
    "gateway": ("tritonft.gateway.command", "serve an OpenAI-compatible HTTP API (/v1/completions) in front of Triton"),
}


def build_parser(
    only: str | None = None, commands: Mapping[str, tuple[str, str]] = COMMANDS
) -> argparse.ArgumentParser:
    """The parser; only the ``only`` command's module is imported and given its arguments (each module costs
    start-up time; ``tritonft --help`` and ``--version`` need none of them)."""
    parser = argparse.ArgumentParser(prog="tritonft", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--version", action="version", version=f"tritonft {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, (module_name, help_text) in commands.items():
        cmd = sub.add_parser(name, help=help_text, description=help_text)
        if name == only:
            module = importlib.import_module(module_name)
            module.add_arguments(cmd)
            cmd.set_defaults(_run=module.run)
    return parser


def main(argv: Sequence[str] | None = None, commands: Mapping[str, tuple[str, str]] = COMMANDS) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    chosen = next((w for w in words if not w.startswith("-")), None)
    args = build_parser(chosen if chosen in commands else None, commands).parse_args(words)
    try:
        return int(args._run(args))
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
