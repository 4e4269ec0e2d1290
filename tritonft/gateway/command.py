"""``tritonft gateway``: serve the OpenAI-compatible API in front of a Triton server."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

from tritonft import option_file
from tritonft.errors import UserError
from tritonft.gateway.limits import MAX_BODY_BYTES

if TYPE_CHECKING:
    from tritonft.gateway.config import GatewayConfig
    from tritonft.gateway.embeddings import EmbeddingModel


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--triton-url",
        action="append",
        required=True,
        metavar="[MODEL=]HOST:PORT",
        help="Triton's gRPC endpoint for every model, or MODEL=HOST:PORT for one model (repeat; a deployed stack "
        "runs one Triton per model)",
    )
    parser.add_argument("--port", type=int, required=True, help="port to listen on")
    parser.add_argument("--host", default="0.0.0.0", help="address to listen on (default: all)")
    parser.add_argument(
        "--spec", action="append", default=[], type=Path, metavar="SPEC.json", help="a served model's spec (repeat)"
    )
    parser.add_argument(
        "--tokenizer-config",
        action="append",
        default=[],
        metavar="MODEL=tokenizer_config.json",
        help="a vLLM model's tokenizer_config.json (repeat): its chat template serves /v1/chat/completions for it, "
        "rendered as transformers' apply_chat_template renders it",
    )
    parser.add_argument(
        "--embedding-model",
        action="append",
        default=[],
        metavar="NAME[:MAX_BATCH]",
        help="an encoder ensemble to serve under /v1/embeddings (repeat); MAX_BATCH is its max_batch_size, the most "
        "texts per Triton call (default 32)",
    )
    parser.add_argument(
        "--scales-to-zero",
        action="append",
        default=[],
        metavar="MODEL",
        help="a model whose Triton may have no replica (KEDA scale to zero; repeat): it does not make the gateway "
        "unready, and a request for it meanwhile gets 503 with Retry-After (the request is what wakes it)",
    )
    parser.add_argument(
        "--deadline",
        type=float,
        default=60.0,
        help="seconds a request may take (default 60); a vLLM model's requests get this plus its context times its "
        "spec's vllm.time_per_output_token_s (the longest answer it may generate)",
    )
    parser.add_argument(
        "--max-body-bytes", type=int, default=MAX_BODY_BYTES, help="largest request body (default 1 MiB)"
    )
    parser.add_argument(
        "--coalesce",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="send concurrent greedy or seeded completions of a model with the same parameters to Triton as one "
        "batched call (default on; --no-coalesce sends one call per prompt)",
    )
    parser.add_argument(
        "--calls-in-flight",
        type=int,
        default=2,
        metavar="N",
        help="with --coalesce: calls per model and parameter set sent at once before further requests wait to be "
        "merged (default 2)",
    )
    parser.add_argument(
        "--api-key-expires",
        action="append",
        default=[],
        metavar="KEY_ID=YYYY-MM-DD",
        help="an API key (its id, as the edge names it in x-tritonft-client) answered 401 from that day (UTC) on "
        "(repeat)",
    )
    parser.add_argument(
        "--max-in-flight-per-client",
        type=int,
        default=0,
        metavar="N",
        help="requests one API client (the x-tritonft-client the edge sets from its key) may have in flight at once "
        "here, streams included; one more is answered 429 with Retry-After. Requests without the header are not "
        "counted (default 0: no limit)",
    )


def load_config(args: argparse.Namespace) -> GatewayConfig:
    from tritonft.gateway.config import GatewayConfig, ServedModel

    if not args.spec and not args.embedding_model:
        raise UserError("--spec / --embedding-model: give at least one model to serve")
    if args.deadline <= 0 or args.max_body_bytes <= 0 or args.calls_in_flight <= 0:
        raise UserError("--deadline, --max-body-bytes and --calls-in-flight must be positive")
    in_flight = getattr(args, "max_in_flight_per_client", 0)
    if in_flight < 0:
        raise UserError(f"--max-in-flight-per-client {in_flight}: give 0 (no limit) or a positive number")
    specs = [option_file.read_spec("--spec", path) for path in args.spec]
    configs = tokenizer_configs(getattr(args, "tokenizer_config", []), {s.name: s.family.is_vllm for s in specs})
    models = [ServedModel.from_spec(spec, configs.get(spec.name, ""), args.deadline) for spec in specs]
    embedders = [embedding_model(value) for value in args.embedding_model]
    names = [m.name for m in models] + [m.name for m in embedders]
    if len(set(names)) != len(names):
        raise UserError(f"a model name is served twice: {', '.join(names)}")
    default, routes = triton_routes(args.triton_url, names)
    unknown = [name for name in args.scales_to_zero if name not in names]
    if unknown:
        raise UserError(f"--scales-to-zero {', '.join(unknown)}: no --spec serves such a model ({', '.join(names)})")
    return GatewayConfig(
        default,
        tuple(models),
        args.max_body_bytes,
        args.deadline,
        routes,
        frozenset(args.scales_to_zero),
        args.coalesce,
        args.calls_in_flight,
        tuple(embedders),
        key_expiries=key_expiries(getattr(args, "api_key_expires", [])),
        max_in_flight_per_client=in_flight,
    )


def key_expiries(values: list[str]) -> dict[str, date]:
    """``--api-key-expires KEY_ID=YYYY-MM-DD`` values by key id."""
    out: dict[str, date] = {}
    for value in values:
        key_id, _, day = value.partition("=")
        try:
            out[key_id] = date.fromisoformat(day)
        except ValueError:
            raise UserError(f"--api-key-expires {value!r}: give KEY_ID=YYYY-MM-DD") from None
        if not key_id:
            raise UserError(f"--api-key-expires {value!r}: give KEY_ID=YYYY-MM-DD")
    return out


def tokenizer_configs(values: list[str], served: dict[str, bool]) -> dict[str, str]:
    """``--tokenizer-config MODEL=PATH`` values -> model -> the tokenizer configuration with the chat template
    transformers would use, from ``PATH`` and the template files beside it (``chat_template.jinja``,
    ``additional_chat_templates/``: :func:`tritonft.engines.vllm.chat.with_template_files`), as JSON text;
    UserError names the value and the fix. ``served``: each served model and whether vLLM serves it."""
    from tritonft.engines.vllm.chat import ChatTemplateError, read_template_files, template_of, with_template_files

    out: dict[str, str] = {}
    for value in values:
        name, sep, path = value.partition("=")
        option = f"--tokenizer-config {value}"
        if not sep or not path:
            raise UserError(f"{option}: give MODEL=PATH (the model's tokenizer_config.json)")
        if not served.get(name, False):
            vllm = [n for n, is_vllm in served.items() if is_vllm]
            raise UserError(f"{option}: no --spec serves a vLLM model named {name!r} ({', '.join(vllm) or 'none'})")
        config = option_file.read_json("--tokenizer-config", Path(path))
        try:
            config = with_template_files(
                config if isinstance(config, dict) else {}, *read_template_files(Path(path).parent)
            )
            template_of(config)
        except ChatTemplateError as exc:
            raise UserError(f"{option}: {exc}") from exc
        out[name] = json.dumps(config)
    return out


def embedding_model(value: str) -> EmbeddingModel:
    """``NAME[:MAX_BATCH]`` -> the served embedding model; UserError names the fix."""
    from tritonft.gateway.embeddings import EmbeddingModel

    name, _, size = value.partition(":")
    if not name or (size and (not size.isdigit() or int(size) < 1)):
        raise UserError(f"--embedding-model {value}: give NAME or NAME:MAX_BATCH (a positive integer)")
    return EmbeddingModel(name, int(size) if size else 32)


def triton_routes(values: list[str], served: list[str]) -> tuple[str, dict[str, str]]:
    """``--triton-url`` values -> (the endpoint for every model or "", model -> endpoint); UserError names the fix."""
    defaults = [v for v in values if "=" not in v]
    routes: dict[str, str] = {}
    for value in values:
        name, sep, url = value.partition("=")
        if not sep:
            continue
        if name not in served:
            raise UserError(f"--triton-url {value}: no --spec serves a model named {name!r} ({', '.join(served)})")
        if not url or name in routes:
            raise UserError(f"--triton-url {value}: give one HOST:PORT per model, as MODEL=HOST:PORT")
        routes[name] = url
    if len(defaults) > 1:
        raise UserError(f"--triton-url: one endpoint for every model, got {', '.join(defaults)}; use MODEL=HOST:PORT")
    unrouted = [name for name in served if name not in routes]
    if unrouted and not defaults:
        raise UserError(f"--triton-url: no Triton endpoint for {', '.join(unrouted)}; add HOST:PORT or MODEL=HOST:PORT")
    return (defaults[0] if defaults else ""), routes


def run(args: argparse.Namespace) -> int:
    import uvicorn

    from tritonft.gateway.app import build_app

    config = load_config(args)
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(message)s")
    uvicorn.run(
        build_app(config),
        host=args.host,
        port=args.port,
        http="httptools",
        loop="uvloop",
        access_log=False,
        log_level="warning",
        # The ingress' X-Forwarded-* headers are not trusted anyway (forwarded_allow_ips is loopback only), and the
        # middleware that reads them wraps every request.
        proxy_headers=False,
        server_header=False,
    )
    return 0
