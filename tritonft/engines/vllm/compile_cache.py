"""A vLLM model's compile cache on the store: which directory a pod compiles into, and which ones may go.

vLLM 0.27.1 keeps torch.compile's artifacts under ``$VLLM_CACHE_ROOT/torch_compile_cache/<hash>`` and sends
Inductor's and Triton's kernel caches under the same root (``compilation/compiler_interface.py:476-480``). Each model
has one directory of the store for them, ``compile-cache/<model>``, made by its Job and mounted writable in its
Triton pods; inside it a pod's ``VLLM_CACHE_ROOT`` is ``<model dir>/<key>``, where the key (:func:`cache_key`) covers
what decides the compiled code and nothing else:

- **the server image's identity** (``components.platform.compile_identity``): NGC's base image (its digest when the
  stack pins it) and the bytes of every file the project's Dockerfile copies into it (the backend's patch). Not the
  pushed image's digest: a rebuild of the same base and files (every CI run: no reproducible builds) is the same
  vLLM, torch and Triton, and finds what the last one compiled;
- **the model's revision** (its weights' shapes and config);
- **the engine arguments that shape the graphs** (:func:`compiled_engine_args`): all of ``model.json`` but the ones
  vLLM's own configuration hash leaves out (:data:`NOT_COMPILED`).

A directory of the model that no pod has used for :data:`UNUSED_FOR_S` (its lease, :data:`LEASE`, renewed by the
pods' probes every 10 s while they run, is older; a directory without one counts from its own change time) is
pruned by the model's Job (:func:`prune`, ``tritonft prune-compile-cache``). That never
removes one a running pod uses: the stable version's pods renew their lease all through a promotion, and a pod's
start (which does not renew it) is bounded by its start-up budget, far shorter than a day.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import time
from pathlib import Path

from tritonft.engines.vllm.engine import checkpoint_of, model_path, options_of
from tritonft.engines.vllm.repository import engine_args
from tritonft.errors import UserError
from tritonft.spec import ModelSpec

KEY_LENGTH = 16
"""Hex digits of a key (64 bits: collisions between a model's handful of directories are out of reach)."""
NOT_COMPILED = frozenset(
    {
        "model",  # the store path of the revision, which the key has itself
        "tokenizer",  # vLLM 0.27.1 config/model.py:410-425 (ModelConfig.compute_hash's ignored_factors)
        "served_model_name",  # ditto
        "gpu_memory_utilization",  # config/cache.py:214-220 (CacheConfig.compute_hash: the KV cache's size only)
        "enable_prefix_caching",  # ditto
        "disable_log_stats",  # the stat loggers, outside the model's graphs
    }
)
"""``model.json``'s engine arguments that do not change the compiled code. Every other argument (tensor parallelism,
``max_model_len``, ``max_num_seqs`` (which bounds the CUDA graphs' batch sizes), ``dtype``, ``enforce_eager``, the
load format, one added later) is in the key: when unsure, a new directory compiles once."""
LEASE = ".in-use"
"""The file in a key's directory whose change time says when a pod last used it (touched by the pods' probes)."""
LEASE_ENV = "VLLM_CACHE_ROOT"
"""The pods' variable naming their key's directory (vLLM's own), where the probes renew the lease."""
UNUSED_FOR_S = 24 * 3600
"""How long a directory of the model must have gone unused before its Job removes it: a running pod renews its lease
every 10 s; a start (which does not) is bounded by the model's start-up budget (prod's Llama 3.1 8B: minutes)."""
PRUNING = ".pruning-"
"""A directory being removed is first renamed to ``.pruning-<name>`` (atomic): a pod that starts on its key then
makes a new one instead of writing into one being deleted; a Job interrupted mid-removal finishes it next time."""


def compiled_engine_args(spec: ModelSpec) -> dict[str, object]:
    """The engine arguments of ``spec``'s ``model.json`` that shape vLLM's compiled graphs (all but
    :data:`NOT_COMPILED`)."""
    args = engine_args(options_of(spec), model_path(spec), checkpoint_of(spec), served_name=spec.name)
    return {name: value for name, value in sorted(args.items()) if name not in NOT_COMPILED}


def cache_key(spec: ModelSpec, image_identity: str) -> str:
    """The directory of ``spec``'s compile cache a pod of the server image ``image_identity`` compiles into: a digest
    of the image's identity, the model's revision and :func:`compiled_engine_args`."""
    if not image_identity:
        raise ValueError(f"model {spec.name!r}: the compile cache's key needs the server image's identity")
    material = {"image": image_identity, "revision": spec.revision, "engine": compiled_engine_args(spec)}
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:KEY_LENGTH]


def last_used(directory: Path) -> float:
    """When a pod last used ``directory``: its lease's change time, or the directory's own when it has none (a
    directory vLLM made before any probe ran)."""
    lease = directory / LEASE
    try:
        return max(lease.stat().st_mtime, directory.stat().st_mtime)
    except FileNotFoundError:
        return directory.stat().st_mtime


def stale(model_dir: Path, now: float, unused_for_s: float = UNUSED_FOR_S) -> list[str]:
    """The directories of ``model_dir`` (one model's compile cache) unused for more than ``unused_for_s`` at ``now``,
    and any a removal left half done, by name."""
    names = []
    for entry in sorted(model_dir.iterdir()):
        if not entry.is_dir() or entry.is_symlink():
            continue
        if entry.name.startswith(PRUNING) or now - last_used(entry) > unused_for_s:
            names.append(entry.name)
    return names


def prune(model_dir: Path, now: float, unused_for_s: float = UNUSED_FOR_S) -> list[str]:
    """Remove :func:`stale` directories of ``model_dir``, each renamed out of its key's way first; the removed names."""
    removed = []
    for name in stale(model_dir, now, unused_for_s):
        target = model_dir / name
        if not name.startswith(PRUNING):
            renamed = model_dir / f"{PRUNING}{name}"
            shutil.rmtree(renamed, ignore_errors=True)
            try:
                target.rename(renamed)
            except FileNotFoundError:  # another Job of the model got there first
                continue
            target = renamed
        shutil.rmtree(target, ignore_errors=True)
        removed.append(name)
    return removed


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model_dir", type=Path, help="the model's compile cache, /models/compile-cache/<model>")
    parser.add_argument(
        "--unused-for", type=float, default=UNUSED_FOR_S, help="seconds a directory must have gone unused (a day)"
    )


def run(args: argparse.Namespace) -> int:
    """``tritonft prune-compile-cache``: what a vLLM model's Job runs before anything else."""
    model_dir: Path = args.model_dir
    if not model_dir.is_dir():
        raise UserError(f"{model_dir}: no such directory (the model's compile cache; the Job makes it first)")
    try:
        removed = prune(model_dir, time.time(), args.unused_for)
    except OSError as exc:  # a directory the Job's user cannot move: the store's ownership is wrong, say so
        raise UserError(
            f"{model_dir}: cannot remove an unused compile cache directory ({exc}); the model's compile cache must "
            "belong to the workloads' user: fix its ownership on the store or delete the directory"
        ) from exc
    for name in removed:
        print(f"triton-ft: removed the compile cache {model_dir}/{name} (unused for {args.unused_for:g} s)")
    return 0
