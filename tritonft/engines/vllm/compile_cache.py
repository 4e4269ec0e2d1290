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

A key's directory that no pod has used for :data:`UNUSED_FOR_S` (its lease, :data:`LEASE`, renewed every
:data:`RENEW_PERIOD_S` by a loop the pod's command starts beside Triton, :func:`renewing_lease`, is older) is pruned by
the model's Job (:func:`prune`, ``tritonft prune-compile-cache``). Only a directory named as :func:`cache_key` names
one (:data:`KEY_FORMAT`) and carrying a lease is ever pruned: the old layout's ``compile-cache/<model>/<revision>``
(mounted by ``subPath`` by pods of before the key, which write no lease) and a key whose pod has not made its lease yet
stay, whatever their age. The lease is renewed off the probes' path: a stalled store never slows or fails a probe.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
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
"""The file in a key's directory whose change time says when a pod last used it (touched by :data:`RENEW_SCRIPT`)."""
KEY_FORMAT = re.compile(rf"[0-9a-f]{{{KEY_LENGTH}}}")
"""A key's directory name, as :func:`cache_key` makes it: the only names :func:`prune` removes (with its own
``.pruning-<key>`` leftovers)."""
LEASE_ENV = "VLLM_CACHE_ROOT"
"""The pods' variable naming their key's directory (vLLM's own), where the probes renew the lease."""
UNUSED_FOR_S = 24 * 3600
"""How long a key's directory must have gone unused before its Job removes it: a running pod renews its lease every
:data:`RENEW_PERIOD_S`; a start (before vLLM made the directory) is bounded by the model's start-up budget (prod's
Llama 3.1 8B: minutes). A ``replicasMin: 0`` model idle (no pod) for longer loses its cache: it compiles cold once."""
RENEW_PERIOD_S = 60
"""How often a pod renews its lease (a day is 1440 periods: an outage of the store of hours costs nothing)."""
RENEW_WAIT_S = 10
"""How long the renewal loop waits for one write before it counts it failed (the write goes on in its thread; no
second one starts while it is stuck: at most one blocked thread per pod)."""
REPORT_EVERY = 30
"""After the first failed renewal in a row, every how many more the loop reports again (30 minutes)."""
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


def is_key(name: str) -> bool:
    """Whether ``name`` is a key's directory (:data:`KEY_FORMAT`) or one :func:`prune` left half removed."""
    return KEY_FORMAT.fullmatch(name.removeprefix(PRUNING)) is not None


def last_used(directory: Path) -> float | None:
    """When a pod last used the key's ``directory``: its lease's change time (or the directory's own, if later);
    None when it has no lease (a pod of the old layout's, or one whose first renewal has not run): never pruned."""
    try:
        return max((directory / LEASE).stat().st_mtime, directory.stat().st_mtime)
    except FileNotFoundError:
        return None


def stale(model_dir: Path, now: float, unused_for_s: float = UNUSED_FOR_S) -> list[str]:
    """The key directories of ``model_dir`` (one model's compile cache) whose lease is older than ``unused_for_s`` at
    ``now``, and any a removal left half done, by name. Nothing else: not a directory of another name (the old
    layout's ``<revision>``), nor a key without a lease (the loop makes the directory with its lease, so
    that is only a key whose pod died within its first seconds: harmless, a few bytes)."""
    names = []
    for entry in sorted(model_dir.iterdir()):
        if not entry.is_dir() or entry.is_symlink() or not is_key(entry.name):
            continue
        if entry.name.startswith(PRUNING):
            names.append(entry.name)
            continue
        used = last_used(entry)
        if used is not None and now - used > unused_for_s:
            names.append(entry.name)
    return names


RENEW_SCRIPT = """\
import os, sys, threading, time
root, period, wait = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
every, rounds = int(sys.argv[4]), int(sys.argv[5])
lease = os.path.join(root, "@LEASE@")

def renew(outcome):
    try:
        os.makedirs(root, exist_ok=True)  # before vLLM does: a key's directory has its lease from its pod's start
        with open(lease, "a"):
            pass
        os.utime(lease)
        outcome.append("")
    except OSError as exc:
        outcome.append(str(exc) or type(exc).__name__)

def report(text):
    print("triton-ft: compile cache lease %s: %s" % (lease, text), file=sys.stderr, flush=True)

failures, worker, done = 0, None, 0
while rounds == 0 or done < rounds:
    if worker is None or not worker.is_alive():  # never a second write beside a stuck one
        outcome = []
        worker = threading.Thread(target=renew, args=(outcome,), daemon=True)
        worker.start()
    worker.join(wait)
    error = outcome[0] if outcome else "the store did not answer within %g s" % wait
    if error:
        failures += 1
        if failures == 1 or failures % every == 0:
            report("renewal failed %d times in a row (%s); a day without one and the model's Job prunes this "
                   "cache (the pod then compiles cold at its next start)" % (failures, error))
    else:
        if failures:
            report("renewed again after %d failures" % failures)
        failures = 0
    done += 1
    if rounds == 0 or done < rounds:
        time.sleep(period)
""".replace("@LEASE@", LEASE)
"""The pod's lease renewal (``argv``: the key's directory, period, wait, report every, rounds (0: forever)): every
period it touches the lease in a thread and waits for it at most ``wait`` s; a failed or stuck write is reported on
the container's stderr (``kubectl logs``) at its first and every ``every``-th in a row, and its recovery. Standard
library only (the image's ``python3``); it never exits on an error."""

LAUNCHER = 'python3 -c "$1" "$2" "$3" "$4" "$5" "$6" & shift 6; exec "$@"'
"""Starts :data:`RENEW_SCRIPT` in the background and then replaces the shell with the server (its PID, its signals)."""


def renewing_lease(
    server: list[str],
    root: str,
    *,
    period_s: float = RENEW_PERIOD_S,
    wait_s: float = RENEW_WAIT_S,
    report_every: int = REPORT_EVERY,
    rounds: int = 0,
) -> list[str]:
    """The container command running ``server`` with the lease of the compile cache ``root`` (the pod's
    ``VLLM_CACHE_ROOT``) renewed beside it (:data:`RENEW_SCRIPT`, ``rounds`` times, 0: for as long as the pod runs)."""
    if not server or not root:
        raise ValueError("the lease's renewal needs the server's command and the compile cache's directory")
    args = [root, f"{period_s:g}", f"{wait_s:g}", str(report_every), str(rounds)]
    return ["/bin/sh", "-c", LAUNCHER, "tritonft-lease", RENEW_SCRIPT, *args, *server]


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
        "--unused-for", type=float, default=UNUSED_FOR_S, help="seconds a key's lease must have gone unrenewed (a day)"
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
