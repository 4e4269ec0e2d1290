"""Serve local Hugging Face checkpoints through the real Triton with the real vLLM engine, on this machine (CPU).

The repository is the one a stack renders (``config.pbtxt`` with ``backend: "vllm"`` + ``1/model.json``), with the
model path pointing at the local directory and the CPU's engine settings (float32, eager); Triton runs it with the
project's Python-based ``vllm`` backend (:mod:`tritonft.engines.vllm.triton_model`) in the vLLM environment
(:mod:`tritonft.vllm_env`, built on first use). The tests' path, and a user's::

    python -m tritonft.engines.vllm.local CHECKPOINT_DIR [--name NAME] [--max-model-len N]

prints the HTTP, gRPC and metrics endpoints once the model is ready and serves until interrupted.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from tritonft import vllm_env
from tritonft.engines.vllm.repository import repository_files, write_repository
from tritonft.engines.vllm.rules import VllmOptions, problems, read_checkpoint
from tritonft.local_triton import LocalTriton, TritonError

CPU_OPTIONS = VllmOptions(dtype="float32", max_num_seqs=16, enforce_eager=True, gpu_memory_utilization=0.9)
"""The engine arguments on this machine's CPU: float32 (the goldens' precision), no compilation."""
READY_TIMEOUT_S = 900.0
"""``import vllm`` alone takes 30-100 s on two busy cores; each model's stub imports it."""


def read_model(directory: Path) -> tuple[dict[str, object], dict[str, object] | None]:
    config = json.loads((directory / "config.json").read_text())
    tokenizer_path = directory / "tokenizer_config.json"
    tokenizer = json.loads(tokenizer_path.read_text()) if tokenizer_path.is_file() else None
    return config, tokenizer


def render(checkpoints: Mapping[str, Path], out: Path, options: VllmOptions = CPU_OPTIONS) -> Path:
    """Write a repository serving each ``name -> checkpoint directory`` (refusing what vLLM would refuse)."""
    files: dict[str, bytes] = {}
    for name, directory in checkpoints.items():
        config, tokenizer = read_model(directory)
        checkpoint = read_checkpoint(config, tokenizer)
        found = problems(options, checkpoint, None, key=name)
        if found:
            raise ValueError(f"{directory}: " + "; ".join(found))
        files |= repository_files(name, options, str(directory.resolve()), checkpoint)
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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", type=Path, help="a Hugging Face checkpoint directory (config.json, weights)")
    parser.add_argument("--name", help="the served model's name (default: the directory's name)")
    parser.add_argument("--max-model-len", type=int, help="longest prompt + answer (default: the model's own)")
    parser.add_argument("--work-dir", type=Path, help="where the repository and the log go (default: a temp dir)")
    args = parser.parse_args(argv)
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="tritonft-vllm-"))
    name = args.name or args.checkpoint.resolve().name
    options = replace(CPU_OPTIONS, max_model_len=args.max_model_len)
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
    stop = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))
    try:
        while not stop["now"] and local.process is not None and local.process.poll() is None:
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        local.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
