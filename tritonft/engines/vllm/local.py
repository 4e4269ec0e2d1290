"""Serve local Hugging Face checkpoints through the real Triton with the real vLLM engine, on this machine (CPU).

The repository is the one a stack renders (``config.pbtxt`` with ``backend: "vllm"`` + ``1/model.json``), with the
model path pointing at the local directory and the CPU's engine settings (float32, eager); Triton runs it with the
project's Python-based ``vllm`` backend (:mod:`tritonft.engines.vllm.triton_model`) in the vLLM environment
(:mod:`tritonft.vllm_env`, built on first use). The tests' path, and a user's::

    python -m tritonft.engines.vllm.local CHECKPOINT_DIR [--name NAME] [--max-model-len N] [--gateway]

prints the HTTP, gRPC and metrics endpoints once the model is ready and serves until interrupted. With
``--gateway`` it also starts the OpenAI gateway (``tritonft gateway``) in front, given the model's spec and its
``tokenizer_config.json`` (chat through its own template), and prints its base URL (``openai: http://.../v1``).
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from tritonft import vllm_env
from tritonft.engines.vllm.repository import repository_files, write_repository
from tritonft.engines.vllm.rules import VllmOptions, max_model_len, problems, read_checkpoint
from tritonft.local_triton import LocalTriton, TritonError, free_port
from tritonft.spec import Architecture, Family, ModelSpec, VllmSpec

CPU_OPTIONS = VllmOptions(dtype="float32", max_num_seqs=16, enforce_eager=True, gpu_memory_utilization=0.9)
"""The engine arguments on this machine's CPU: float32 (the goldens' precision), no compilation."""
READY_TIMEOUT_S = 900.0
"""``import vllm`` alone takes 30-100 s on two busy cores; each model's stub imports it."""


def read_model(directory: Path) -> tuple[dict[str, object], dict[str, object] | None]:
    config = json.loads((directory / "config.json").read_text())
    tokenizer_path = directory / "tokenizer_config.json"
    tokenizer = json.loads(tokenizer_path.read_text()) if tokenizer_path.is_file() else None
    return config, tokenizer


def spec_for(name: str, directory: Path, options: VllmOptions = CPU_OPTIONS) -> ModelSpec:
    """The model spec of a local checkpoint served with ``options`` (what the gateway is given): its facts from
    ``config.json``; an answer may take what the prompt leaves of ``max_model_len``."""
    config, tokenizer = read_model(directory)
    checkpoint = read_checkpoint(config, tokenizer)
    length = max_model_len(options, checkpoint)
    return ModelSpec(
        name=name,
        family=Family.LLAMA,
        hf_repo=str(directory.resolve()),
        revision="local",
        architecture=Architecture(
            d_model=checkpoint.hidden_size,
            num_heads=checkpoint.num_heads,
            num_layers=checkpoint.num_layers,
            d_ff=checkpoint.intermediate_size,
            vocab_size=checkpoint.vocab_size,
            d_kv=checkpoint.head_dim,
            max_positions=checkpoint.max_positions,
            gated_ffn=True,
            tied_embeddings=checkpoint.tied_embeddings,
        ),
        max_input_len=length,
        max_output_len=max(length - 1, 1),
        decoupled=True,
        vllm=VllmSpec(
            architecture=checkpoint.architecture,
            num_kv_heads=checkpoint.num_kv_heads,
            qkv_bias=checkpoint.qkv_bias,
            checkpoint_dtype=checkpoint.torch_dtype,
            max_model_len=options.max_model_len,
            gpu_memory_utilization=options.gpu_memory_utilization,
            max_num_seqs=options.max_num_seqs,
            dtype=options.dtype,
            enable_prefix_caching=options.enable_prefix_caching,
        ),
    )


def render(
    checkpoints: Mapping[str, Path],
    out: Path,
    options: VllmOptions = CPU_OPTIONS,
    *,
    judge_references: Mapping[str, str] | None = None,
) -> Path:
    """Write a repository serving each ``name -> checkpoint directory`` (refusing what vLLM would refuse); a model
    named in ``judge_references`` carries that reference (JSON) in its ``config.pbtxt``, as its Job renders it."""
    files: dict[str, bytes] = {}
    references = judge_references or {}
    for name, directory in checkpoints.items():
        config, tokenizer = read_model(directory)
        checkpoint = read_checkpoint(config, tokenizer)
        found = problems(options, checkpoint, None, key=name)
        if found:
            raise ValueError(f"{directory}: " + "; ".join(found))
        files |= repository_files(
            name, options, str(directory.resolve()), checkpoint, judge_reference=references.get(name)
        )
    write_repository(files, out)
    return out


def server(
    repository: Path,
    log_path: Path,
    *,
    extra_args: Sequence[str] = (),
    ready_timeout: float = READY_TIMEOUT_S,
    kv_cache_gib: int = vllm_env.KV_CACHE_GIB,
) -> LocalTriton:
    """A :class:`LocalTriton` (not started) for ``repository`` with the vLLM environment and backend."""
    env = vllm_env.ensure_environment()
    runtime = vllm_env.runtime(env)
    return LocalTriton(
        runtime,
        repository,
        log_path=log_path,
        extra_args=extra_args,
        ready_timeout=ready_timeout,
        env=vllm_env.engine_environment({}, kv_cache_gib=kv_cache_gib),
    )


GATEWAY_START_S = 60.0


def gateway_command(grpc_url: str, port: int, spec_path: Path, name: str, tokenizer_config: Path | None) -> list[str]:
    """``tritonft gateway`` in front of the local Triton for the model of ``spec_path`` (chat through its template
    when its ``tokenizer_config.json`` has one), on loopback ``port``."""
    command = [sys.executable, "-m", "tritonft", "gateway", "--triton-url", grpc_url]
    command += ["--host", "127.0.0.1", "--port", str(port), "--spec", str(spec_path)]
    if tokenizer_config is not None:
        command += ["--tokenizer-config", f"{name}={tokenizer_config}"]
    return command


def chat_config(directory: Path) -> Path | None:
    """The checkpoint's ``tokenizer_config.json`` when it has a chat template (in it or in the template files beside
    it, :func:`tritonft.engines.vllm.chat.read_tokenizer_config`)."""
    from tritonft.engines.vllm.chat import read_tokenizer_config

    path = directory / "tokenizer_config.json"
    if not path.is_file():
        return None
    return path if read_tokenizer_config(directory).get("chat_template") else None


def start_gateway(
    local: LocalTriton, name: str, directory: Path, options: VllmOptions, work: Path
) -> tuple[subprocess.Popen[bytes], str]:
    """The gateway in front of ``local`` for the model ``name``, up (its ``/health/live`` answers); its base URL."""
    spec_path = work / f"{name}.spec.json"
    spec_path.write_text(spec_for(name, directory, options).to_json())
    port = free_port()
    log = (work / "gateway.log").open("wb")
    command = gateway_command(local.grpc_url, port, spec_path, name, chat_config(directory))
    process = subprocess.Popen(command, stdout=log, stderr=log)
    log.close()
    deadline = time.monotonic() + GATEWAY_START_S
    while time.monotonic() < deadline and process.poll() is None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health/live", timeout=1):
                return process, f"http://127.0.0.1:{port}/v1"
        except (urllib.error.URLError, OSError):
            time.sleep(0.2)
    process.terminate()
    process.wait()
    raise TritonError(f"the gateway did not come up within {GATEWAY_START_S:g} s; see {work / 'gateway.log'}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", type=Path, help="a Hugging Face checkpoint directory (config.json, weights)")
    parser.add_argument("--name", help="the served model's name (default: the directory's name)")
    parser.add_argument("--max-model-len", type=int, help="longest prompt + answer (default: the model's own)")
    parser.add_argument("--work-dir", type=Path, help="where the repository and the log go (default: a temp dir)")
    parser.add_argument(
        "--gateway",
        action="store_true",
        help="also serve the OpenAI gateway in front (completions, and chat through the model's own template)",
    )
    args = parser.parse_args(argv)
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="tritonft-vllm-"))
    name = args.name or args.checkpoint.resolve().name
    options = replace(CPU_OPTIONS, max_model_len=args.max_model_len)
    gateway: subprocess.Popen[bytes] | None = None
    try:
        repository = render({name: args.checkpoint}, work / "repository", options)
        local = server(repository, work / "tritonserver.log")
        started = time.monotonic()
        local.start()
    except (ValueError, OSError, TritonError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(
        f"model {name} ready in {time.monotonic() - started:.0f} s\n"
        f"http: http://{local.http_url}/v2/models/{name}/generate\n"
        f"grpc: {local.grpc_url}\nmetrics: {local.metrics_url}\nlog: {local.log_path}",
        flush=True,
    )
    if args.gateway:
        try:
            gateway, base_url = start_gateway(local, name, args.checkpoint, options, work)
        except (ValueError, OSError, TritonError) as exc:
            local.stop()
            print(f"error: {exc}", file=sys.stderr)
            return 1
        print(f"openai: {base_url}", flush=True)
    stop = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))
    try:
        while not stop["now"] and local.process is not None and local.process.poll() is None:
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        if gateway is not None:
            gateway.terminate()
            gateway.wait(timeout=30)
        local.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
