"""Write ``OUT/<N>-gpu/`` atomically, idempotently and streaming, with a ``manifest.json`` beside the weights.

How a run proceeds (:func:`convert`):

1. Validate everything (config.json, every safetensors header/byte range, the plan's tensor names and shapes) —
   a failure raises :class:`~tritonft.errors.UserError` before anything is created.
2. Take an exclusive lock ``OUT/.<N>-gpu.lock`` (``flock``), so concurrent runs into the same ``OUT`` serialise;
   under the lock, leftovers of killed runs (``OUT/.<N>-gpu.partial-*``, ``OUT/.<N>-gpu.old-*``) are removed.
3. If ``OUT/<N>-gpu/manifest.json`` already describes this exact conversion (same converter version, family, TP,
   dtype, config.ini and file list, same source files — by size + mtime, else by sha256, see
   :mod:`.sources`) and every file has its recorded size, nothing is done. A ``<N>-gpu`` directory without a
   manifest was not written by this tool and is never replaced.
4. Jobs run on a small thread pool (numpy copies, hashing and file writes release the GIL). Each job maps its
   source tensor(s) (no copy out of the page cache) and produces each file in blocks in one reusable
   per-worker buffer (:mod:`.produce`), hashing every block while it is in cache and writing it with
   ``os.write``; outputs that are plain slices of a source are hashed and written straight from the mapping.
   Memory stays bounded by ``workers x (largest job's mapped sources + buffer)``. The sources are identified
   (hashed) concurrently on another thread.
5. ``config.ini`` and ``manifest.json`` are written last, then the directory is renamed to ``<N>-gpu`` (an older
   conversion is moved aside first and deleted after). A killed run leaves only a ``.partial-*`` sibling.
   Files are not fsynced unless ``fsync`` is asked for.

``manifest.json`` schema (``schema = "tritonft.ft-weights/1"``; all paths relative to the manifest's directory)::

    {
      "schema": "tritonft.ft-weights/1",
      "converter_version": "0.1.0+layout1",   # changes whenever output bytes could change
      "family": "t5" | "gpt2" | "gptj",
      "ft_model_type": "T5" | "GPT" | "GPT-J",  # the Triton backend's model_type parameter
      "ini_section": "encoder" | "gpt" | "gptj",
      "tensor_parallel": 2,                    # the <N> of <N>-gpu; config.pbtxt tensor_para_size must equal it
      "weight_data_type": "fp32" | "fp16",
      "architecture": {...},                   # tritonft.spec.Architecture fields
      "config_ini": {"sha256": "...", "size": 1234},
      "files": {"<name>.bin": {"sha256": "...", "size": 4096, "shape": [64, 16], "dtype": "fp32"}, ...},
      "total_bytes": 123456,                   # sum of the .bin sizes
      "source": {                              # see tritonft.convert.sources
        "hash": "sha256" | "fingerprint",      # whether weight files carry a full sha256
        "files": {
          "config.json": {"size": 1, "mtime_ns": 1, "sha256": "..."},      # small files: always sha256
          "model.safetensors": {"size": 1, "mtime_ns": 1, "header_sha256": "...", "sha256": "..."},
        },                                     # "sha256" of weight files only with hash = "sha256";
                                               # "sha256_from": "download.json" when reused from the download
      },
      "ignored_tensors": {"encoder.embed_tokens.weight": "why it is not converted", ...},
      "dropped_config_keys": ["task_specific_params"]   # config.json keys too long for FT's INI parser
    }
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tritonft import __version__
from tritonft.convert.ini import config_ini
from tritonft.convert.model import CONFIG_FILE, build_plan, detect_family, load_config
from tritonft.convert.plan import Job, Plan
from tritonft.convert.produce import BLOCK_BYTES, file_buffers, full_view
from tritonft.convert.progress import Progress
from tritonft.convert.sources import SourceHash, SourceIdentities, sources_unchanged
from tritonft.convert.staging import (
    locked,
    read_existing_manifest,
    remove_leftovers,
    staged_directory,
    write_text,
)
from tritonft.convert.tensors import Array, Checkpoint, cast, open_checkpoint
from tritonft.spec import Family, WeightDType

SCHEMA = "tritonft.ft-weights/1"
LAYOUT_VERSION = 1
CONVERTER_VERSION = f"{__version__}+layout{LAYOUT_VERSION}"
MANIFEST = "manifest.json"
CONFIG_INI = "config.ini"


@dataclass(frozen=True)
class Request:
    """What to convert: the CLI arguments, validated."""

    input_dir: Path
    output_dir: Path
    tp: int
    dtype: WeightDType = WeightDType.FP32
    family: Family | None = None
    workers: int = 2
    fsync: bool = False
    """fsync every file and the directory before the rename (durable across power loss; slower)."""
    source_hash: SourceHash = SourceHash.SHA256
    """How the manifest identifies the source files (see :mod:`.sources`): full sha256, or a cheap fingerprint."""
    buffer_bytes: int = BLOCK_BYTES
    """Size of each worker's reusable output buffer (widened to one output row when a row is larger)."""
    name: str | None = None
    """Model name recorded in config.ini (default: the input path as given, like the reference converters)."""


@dataclass
class Result:
    target: Path
    manifest: dict[str, Any]
    skipped: bool
    """True when an identical conversion was already in place (nothing written)."""
    notes: list[str] = field(default_factory=list)


def convert(request: Request, progress: Callable[[int, int], Progress] | None = None) -> Result:
    """Run one conversion (see the module docstring). ``progress(total_bytes, total_files)`` makes a reporter."""
    config = load_config(request.input_dir)
    family = detect_family(config, request.family)
    checkpoint = open_checkpoint(request.input_dir)
    plan = build_plan(family, config, checkpoint.shapes, request.tp)
    ini_text, dropped = config_ini(
        family, config, plan.architecture, request.dtype, tp=request.tp, name=request.name or str(request.input_dir)
    )
    sources = [request.input_dir / CONFIG_FILE, *checkpoint.files]
    expected = expected_manifest(plan, request, ini_text, dropped)
    target = request.output_dir / f"{request.tp}-gpu"
    notes = [f"not converted: {name} ({why})" for name, why in plan.ignored.items()]
    notes += [
        f"config.json key {key!r} left out of config.ini (line longer than FT's 200-byte limit)" for key in dropped
    ]

    with locked(request.output_dir, target.name):
        remove_leftovers(request.output_dir, target.name)
        existing = read_existing_manifest(target, MANIFEST, SCHEMA, "tritonft manifest")
        source_hashes = SourceIdentities(request.input_dir, sources, request.source_hash)
        if existing is not None and _up_to_date(existing, expected, target, source_hashes):
            return Result(target, existing, skipped=True, notes=notes)
        source_hashes.start()
        with staged_directory(target, durable=request.fsync, on_abort=source_hashes.abandon) as partial:
            files = _write_jobs(plan, checkpoint, request, partial, progress)
            manifest = {**expected, "files": files}
            manifest["source"] = {"hash": str(request.source_hash), "files": source_hashes.result()}
            manifest["config_ini"] = write_text(partial / CONFIG_INI, ini_text, request.fsync)
            write_text(partial / MANIFEST, json.dumps(manifest, indent=1, sort_keys=False) + "\n", request.fsync)
    return Result(target, manifest, skipped=False, notes=notes)


def expected_manifest(plan: Plan, request: Request, ini_text: str, dropped: list[str]) -> dict[str, Any]:
    """Everything in the manifest that is known before writing (hashes of outputs and sources come later)."""
    return {
        "schema": SCHEMA,
        "converter_version": CONVERTER_VERSION,
        "family": str(plan.family),
        "ft_model_type": plan.family.ft_model_type,
        "ini_section": plan.family.ini_section,
        "tensor_parallel": plan.tp,
        "weight_data_type": str(request.dtype),
        "architecture": asdict(plan.architecture),
        "config_ini": {"sha256": hashlib.sha256(ini_text.encode()).hexdigest(), "size": len(ini_text.encode())},
        "files": {
            out.name: {"size": _nbytes(out.shape, request.dtype), "shape": list(out.shape), "dtype": str(request.dtype)}
            for out in plan.files
        },
        "total_bytes": sum(_nbytes(out.shape, request.dtype) for out in plan.files),
        "ignored_tensors": dict(plan.ignored),
        "dropped_config_keys": list(dropped),
    }


def _nbytes(shape: tuple[int, ...], dtype: WeightDType) -> int:
    count = 1
    for dim in shape:
        count *= dim
    return count * dtype.nbytes


# --------------------------------------------------------------------------------------------- rerun detection


_COMPARED = ("schema", "converter_version", "family", "tensor_parallel", "weight_data_type", "config_ini")


def _up_to_date(existing: dict[str, Any], expected: dict[str, Any], target: Path, sources: SourceIdentities) -> bool:
    if any(existing.get(key) != expected[key] for key in _COMPARED):
        return False
    recorded = existing.get("files", {})
    if {n: (f.get("size"), f.get("shape")) for n, f in recorded.items()} != {
        n: (f["size"], f["shape"]) for n, f in expected["files"].items()
    }:
        return False
    for name, entry in recorded.items():
        path = target / name
        if not path.is_file() or path.stat().st_size != entry["size"]:
            return False
    old_sources: dict[str, dict[str, Any]] = existing.get("source", {}).get("files", {})
    return sources_unchanged(old_sources, sources.stats(), sources.mode, sources.sha256_of)


# ------------------------------------------------------------------------------------------------------ writing


_scratch = threading.local()


def _scratch_buffer(nbytes: int) -> Array:
    """This worker thread's reusable output buffer of ``nbytes`` (allocated once per thread, then warm)."""
    buffer: Array | None = getattr(_scratch, "buffer", None)
    if buffer is None or buffer.nbytes != nbytes:
        buffer = _scratch.buffer = np.empty(nbytes, dtype=np.uint8)
    return buffer


WRITE_CHUNK = 64 << 10
"""Bytes per ``write`` call. Measured on the 2-core VM this was tuned on: 64 KiB writes were the fastest and by far
the steadiest way to fill the page cache (1.09 GB in 405 files: 0.6-1.3 s of system time, versus 0.5-3.3 s with
4-16 MiB writes, whose 2 MiB page-cache folios come from memory the hypervisor has taken back through free-page
reporting). The extra system calls cost well under 0.1 s per GB."""


def _hash_and_write(fd: int, data: memoryview, digest: Any) -> None:
    """Hash and write ``data`` chunk by chunk (each chunk is hashed while it is still in the CPU cache)."""
    for start in range(0, data.nbytes, WRITE_CHUNK):
        chunk = data[start : start + WRITE_CHUNK]
        digest.update(chunk)
        while chunk:
            chunk = chunk[os.write(fd, chunk) :]


def _run_job(job: Job, checkpoint: Checkpoint, request: Request, directory: Path) -> dict[str, dict[str, Any]]:
    arrays = [cast(checkpoint.read(name), checkpoint.tensors[name].dtype, request.dtype) for name in job.sources]
    mats = full_view(job, arrays)
    row_bytes = max(_nbytes(out.shape[1:], request.dtype) for out in job.outputs)
    scratch = _scratch_buffer(max(request.buffer_bytes, row_bytes))
    written: dict[str, dict[str, Any]] = {}
    for out in job.outputs:
        digest = hashlib.sha256()
        size = 0
        fd = os.open(directory / out.name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        try:
            for data in file_buffers(job, mats, out, scratch):
                _hash_and_write(fd, data, digest)
                size += data.nbytes
            if request.fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        expected = _nbytes(out.shape, request.dtype)
        if size != expected:  # an internal invariant: FT would silently read garbage
            raise RuntimeError(f"{out.name}: wrote {size} bytes, expected {expected} for shape {list(out.shape)}")
        written[out.name] = {
            "sha256": digest.hexdigest(),
            "size": size,
            "shape": list(out.shape),
            "dtype": str(request.dtype),
        }
    return written


def _write_jobs(
    plan: Plan,
    checkpoint: Checkpoint,
    request: Request,
    directory: Path,
    progress: Callable[[int, int], Progress] | None,
) -> dict[str, dict[str, Any]]:
    """Run the jobs with at most ``workers`` in flight; returns the manifest's ``files`` in plan order."""
    total = sum(_nbytes(out.shape, request.dtype) for out in plan.files)
    reporter = progress(total, len(plan.files)) if progress else None
    results: dict[int, dict[str, dict[str, Any]]] = {}
    workers = max(1, request.workers)
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="convert") as pool:
        pending: dict[Future[dict[str, dict[str, Any]]], int] = {}
        queue = iter(enumerate(plan.jobs))
        try:
            for index, job in queue:
                pending[pool.submit(_run_job, job, checkpoint, request, directory)] = index
                while len(pending) >= workers:
                    _collect(pending, results, reporter, wait(pending, return_when=FIRST_COMPLETED).done)
            while pending:
                _collect(pending, results, reporter, wait(pending, return_when=FIRST_COMPLETED).done)
        except BaseException:
            for future in pending:
                future.cancel()
            raise
    if reporter:
        reporter.close()
    return {name: entry for index in sorted(results) for name, entry in results[index].items()}


def _collect(
    pending: dict[Future[dict[str, dict[str, Any]]], int],
    results: dict[int, dict[str, dict[str, Any]]],
    reporter: Progress | None,
    done: set[Future[dict[str, dict[str, Any]]]],
) -> None:
    for future in done:
        index = pending.pop(future)
        results[index] = future.result()
        if reporter:
            reporter.advance(sum(f["size"] for f in results[index].values()), len(results[index]))
