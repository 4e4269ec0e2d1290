"""``tritonft probe``: the post-deploy checks from a shell or CI; exit 0 when every check passed, 1 otherwise.

Example after ``pulumi up``::

    tritonft probe --url "$(pulumi stack output endpoint)" --model t5 --family t5 --json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from tritonft import option_file
from tritonft.errors import UserError
from tritonft.probe.contract import TextContract
from tritonft.probe.endpoint import Protocol
from tritonft.probe.expectations import DEFAULT_BLEU_THRESHOLD, Sample
from tritonft.probe.report import ProbeReport
from tritonft.probe.runner import (
    DEFAULT_CALL_TIMEOUT_S,
    DEFAULT_LATENCY_REQUESTS,
    ModelTarget,
    ProbeConfig,
    run_probe,
)
from tritonft.spec import Family

CLI_DEADLINE_S = 120.0


def add_target_arguments(parser: argparse.ArgumentParser, *, gateway_only: bool = False) -> None:
    """Endpoint, protocol and tensor-contract flags shared with ``tritonft bench``; with ``gateway_only`` (the
    probe's) ``--url`` may be left out for a model reached through the OpenAI gateway alone."""
    parser.add_argument(
        "--url",
        required=not gateway_only,
        default="",
        help="endpoint: http(s)://host[:port][/prefix], grpc(s)://host[:port] or host[:port]"
        + (
            "; left out: the models are judged through --gateway only (a FasterTransformer or vLLM model's Triton "
            "has no route at the edge)"
            if gateway_only
            else ""
        ),
    )
    parser.add_argument(
        "--protocol",
        choices=[p.value for p in Protocol],
        default=None,
        help="transport; inferred from the URL scheme, HTTP for a bare host:port",
    )
    parser.add_argument(
        "--input-name", default="text_input", help="BYTES input tensor that receives the prompt (default text_input)"
    )
    parser.add_argument(
        "--output-name", default="text_output", help="BYTES output tensor that holds the answer (default text_output)"
    )
    parser.add_argument(
        "--header-from-env",
        action="append",
        default=[],
        metavar="NAME=ENV_VAR",
        help="send header NAME with the value of environment variable ENV_VAR (e.g. Authorization=PROBE_TOKEN); "
        "read from the environment so secrets stay out of the process list; repeatable",
    )


def headers_from_env(specs: list[str]) -> dict[str, str]:
    """``["Authorization=TOKEN_VAR"]`` -> ``{"Authorization": os.environ["TOKEN_VAR"]}``; UserError names the fix."""
    headers: dict[str, str] = {}
    for spec in specs:
        name, sep, var = spec.partition("=")
        if not sep or not name.strip() or not var.strip():
            raise UserError(f"--header-from-env {spec!r} must look like NAME=ENV_VAR")
        value = os.environ.get(var.strip())
        if value is None:
            raise UserError(f"--header-from-env {spec!r}: environment variable {var.strip()} is not set")
        headers[name.strip()] = value
    return headers


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_target_arguments(parser, gateway_only=True)
    parser.add_argument(
        "--model", action="append", default=[], metavar="NAME", help="served model name; repeat to check several"
    )
    parser.add_argument(
        "--spec",
        action="append",
        default=[],
        type=Path,
        metavar="SPEC.json",
        help="a model spec (ModelSpec JSON, as the conversion Job gets it): checks that model with its family and the "
        "exact tensor contract of the ensemble tritonft renders for it (an encoder: its embeddings' width, norm and "
        "similarity order, or its labels); repeatable, combines with --model",
    )
    parser.add_argument(
        "--reference",
        action="store_true",
        help="judge each --spec generator (T5, GPT-2, GPT-J; a Llama/Qwen2 served by vLLM) against the reference of "
        "its original weights that its served model carries (its reference Job, or a vLLM model's Job, computed it), "
        "as a stack's probe and judge do; a model that carries none fails",
    )
    parser.add_argument(
        "--tokenizer-config",
        action="append",
        default=[],
        metavar="MODEL=PATH",
        help="with --reference, a vLLM model's tokenizer_config.json (the template files beside it read too), as the "
        "gateway's --tokenizer-config: the reference's chats are rendered from it as the gateway renders a chat "
        "(the judge Job reads the version's own, mounted from the store); repeatable",
    )
    parser.add_argument(
        "--family",
        choices=[f.value for f in Family if f.is_fastertransformer],
        default=None,
        help="model family for the answer check (t5: BLEU on the bundled en->de set; gpt2/gptj: non-empty "
        "continuation); without it only a non-empty text answer is required",
    )
    parser.add_argument(
        "--deadline",
        type=float,
        default=CLI_DEADLINE_S,
        metavar="S",
        help=f"overall time budget in seconds, including waiting for the server (default {CLI_DEADLINE_S:g})",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_CALL_TIMEOUT_S,
        metavar="S",
        help=f"timeout of each request in seconds (default {DEFAULT_CALL_TIMEOUT_S:g})",
    )
    parser.add_argument(
        "--requests",
        type=int,
        default=DEFAULT_LATENCY_REQUESTS,
        metavar="N",
        help=f"sequential requests for latency p50/p95 (default {DEFAULT_LATENCY_REQUESTS})",
    )
    parser.add_argument(
        "--bleu-threshold",
        type=float,
        default=DEFAULT_BLEU_THRESHOLD,
        help=f"T5 pass mark, corpus BLEU 0..100 (default {DEFAULT_BLEU_THRESHOLD:g})",
    )
    parser.add_argument(
        "--expected-answers",
        type=Path,
        metavar="FILE.json",
        help='exact answers to require instead of the family\'s judgement: {"MODEL": [{"prompt": "...", '
        '"answer": "..."}, ...]} (for a model whose output is known, e.g. the reference engine on a golden checkpoint)',
    )
    parser.add_argument(
        "--gateway",
        default=None,
        metavar="URL",
        help="also send each model's judged prompts through the OpenAI gateway at URL (its base URL, e.g. "
        "https://host/v1), with the same headers",
    )
    parser.add_argument(
        "--wake",
        action="store_true",
        help="first ask each model through --gateway, before anything else touches it, and time its wake from zero "
        "(request at zero replicas -> first judged answer; for models that scale to zero)",
    )
    parser.add_argument("--json", action="store_true", help="print the full report as JSON instead of text")


def config_from_args(args: argparse.Namespace) -> ProbeConfig:
    try:
        contract = TextContract.simple(args.input_name, args.output_name)
    except ValueError as exc:
        raise UserError(f"--input-name/--output-name: {exc}") from exc
    family = Family(args.family) if args.family else None
    targets = [ModelTarget(name, family, contract) for name in args.model]
    if args.reference and not args.spec:
        raise UserError("--reference: the reference judges the models given by --spec SPEC.json")
    targets += [_target_from_spec(path, reference=args.reference) for path in args.spec]
    targets = with_tokenizer_configs(targets, getattr(args, "tokenizer_config", []))
    if not targets:
        raise UserError("name at least one model: --model NAME or --spec SPEC.json")
    if args.expected_answers is not None:
        targets = with_expected_answers(targets, args.expected_answers)
    if args.wake:
        if args.gateway is None:
            raise UserError("--wake: the wake is timed through the gateway; give its base URL with --gateway URL")
        targets = [replace(t, scales_to_zero=True) for t in targets]
    config = ProbeConfig(
        url=args.url,
        models=tuple(targets),
        protocol=Protocol(args.protocol) if args.protocol else None,
        deadline_s=args.deadline,
        call_timeout_s=args.timeout,
        latency_requests=args.requests,
        bleu_threshold=args.bleu_threshold,
        headers=headers_from_env(args.header_from_env),
        gateway_url=args.gateway,
    )
    flags = {
        "gateway_url": "--gateway",
        "url": "--url",
        "models": "--model",
        "deadline_s": "--deadline",
        "call_timeout_s": "--timeout",
        "latency_requests": "--requests",
        "bleu_threshold": "--bleu-threshold",
    }
    problems = [f"{flags.get(key, key)}: {why}" for key, why in config.problems()]
    if problems:
        raise UserError("invalid probe options", problems)
    return config


def _target_from_spec(path: Path, *, reference: bool = False) -> ModelTarget:
    """The target of a spec file: its rendered contract (an encoder judged with the default similarity triples, or
    on its labels only; with ``reference`` a generator judged against the reference its ensemble carries)."""
    from tritonft.probe.rendered import target_for_spec

    return target_for_spec(option_file.read_spec("--spec", path), reference=reference)


def with_tokenizer_configs(targets: list[ModelTarget], values: list[str]) -> list[ModelTarget]:
    """``targets`` with each ``--tokenizer-config MODEL=PATH``; UserError names a value that names no vLLM target."""
    paths: dict[str, str] = {}
    for value in values:
        name, sep, path = value.partition("=")
        if not sep or not name or not path:
            raise UserError(f"--tokenizer-config {value}: give MODEL=PATH (the model's tokenizer_config.json)")
        if not any(t.name == name and t.vllm for t in targets):
            vllm = [t.name for t in targets if t.vllm]
            raise UserError(
                f"--tokenizer-config {value}: no --spec is a vLLM model named {name!r} ({', '.join(vllm) or 'none'})"
            )
        if not Path(path).is_file():
            raise UserError(f"--tokenizer-config {value}: {path} is not a file")
        paths[name] = path
    return [replace(t, tokenizer_config=paths[t.name]) if t.name in paths else t for t in targets]


def with_expected_answers(targets: list[ModelTarget], path: Path) -> list[ModelTarget]:
    """``targets`` with the exact answers of ``path`` (see ``--expected-answers``); UserError naming the problem."""
    shape = '{"MODEL": [{"prompt": "...", "answer": "..."}, ...]}'
    raw = option_file.read_json("--expected-answers", path)
    names = [t.name for t in targets]
    if not isinstance(raw, dict) or not raw:
        raise UserError(f"--expected-answers {path}: expected {shape}")
    expected: dict[str, tuple[Sample, ...]] = {}
    for model, cases in raw.items():
        if model not in names:
            raise UserError(f"--expected-answers {path}: model {model!r} is not probed (probed: {', '.join(names)})")
        if not isinstance(cases, list) or not cases or not all(_is_case(c) for c in cases):
            raise UserError(f"--expected-answers {path}: {model!r} must be a non-empty list like {shape}")
        expected[model] = tuple(Sample(c["prompt"], c["answer"]) for c in cases)
    return [replace(t, expected=expected.get(t.name, ())) for t in targets]


def _is_case(case: Any) -> bool:
    return isinstance(case, dict) and isinstance(case.get("prompt"), str) and isinstance(case.get("answer"), str)


def format_report(report: ProbeReport) -> str:
    """Human-readable report: one line per check, then one line per model."""
    server = f" ({report.server.get('name')} {report.server.get('version', '')})" if report.server else ""
    lines = [f"probe {report.endpoint} [{report.protocol}]{server}"]
    for c in report.checks:
        mark = "SKIP" if c.degraded else ("PASS" if c.ok else "FAIL")
        lines.append(f"  {mark}  {c.label:<28} {c.detail} ({c.elapsed_s:.2f} s)")
    for m in report.models:
        latency = f", p50 {m.latency.p50_ms:.1f} ms, p95 {m.latency.p95_ms:.1f} ms" if m.latency else ""
        if m.latency and m.first_response_latency:
            first = m.first_response_latency
            latency = (
                f", streamed: to the last response{latency[1:]}; to the first response (time to first token) "
                f"p50 {first.p50_ms:.1f} ms, p95 {first.p95_ms:.1f} ms"
            )
        answer = f", sample answer {m.sample_answer!r}" if m.sample_answer is not None else ""
        lines.append(f"  model {m.name}: {m.status}{latency}{answer}")
    verdict = "OK" if report.ok else "FAILED"
    lines.append(f"{verdict} in {report.elapsed_s:.2f} s")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    report = run_probe(config_from_args(args))
    if args.json:
        print(json.dumps(report.to_dict(), indent=2, ensure_ascii=False))
    else:
        print(format_report(report))
    if not report.ok:
        print(f"probe failed:\n{report.failure_message()}", file=sys.stderr)
    return 0 if report.ok else 1
