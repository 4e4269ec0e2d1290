"""Atomic output directories, shared by the converters (FasterTransformer's and the encoder's).

A conversion writes into ``.<name>.partial-<pid>`` next to its target under an exclusive lock, then renames it into
place; a crash leaves only a partial directory, which the next run removes. Triton never sees a half-written model.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from tritonft.errors import UserError


@contextlib.contextmanager
def locked(output_dir: Path, name: str) -> Iterator[None]:
    try:
        output_dir.mkdir(parents=True, exist_ok=True)
        handle = (output_dir / f".{name}.lock").open("a")
    except OSError as exc:
        raise UserError(f"cannot write to --output {output_dir}: {exc.strerror}; choose a writable directory") from exc
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def remove_leftovers(output_dir: Path, name: str) -> None:
    for pattern in (f".{name}.partial-*", f".{name}.old-*"):
        for stale in output_dir.glob(pattern):
            shutil.rmtree(stale, ignore_errors=True)


def swap_into_place(partial: Path, target: Path) -> None:
    if target.exists():
        old = target.with_name(f".{target.name}.old-{os.getpid()}")
        target.rename(old)
        partial.rename(target)
        shutil.rmtree(old, ignore_errors=True)
    else:
        partial.rename(target)


def write_text(path: Path, text: str, durable: bool) -> dict[str, Any]:
    data = text.encode()
    with path.open("wb") as handle:
        handle.write(data)
        if durable:
            handle.flush()
            os.fsync(handle.fileno())
    return {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def staged_directory(target: Path, *, durable: bool, on_abort: Callable[[], None]) -> Iterator[Path]:
    """A fresh partial directory next to ``target`` that replaces ``target`` when the block succeeds (fsynced first
    when ``durable``). On any error the partial directory is removed and ``on_abort`` runs; an ``OSError`` becomes a
    ``UserError`` that says nothing was written and how to fix it."""
    partial = target.with_name(f".{target.name}.partial-{os.getpid()}")
    try:
        partial.mkdir()
        yield partial
        if durable:
            fsync_dir(partial)
        swap_into_place(partial, target)
    except BaseException as exc:
        on_abort()
        shutil.rmtree(partial, ignore_errors=True)
        if isinstance(exc, OSError):
            raise UserError(
                f"writing {target} failed: {exc.strerror or exc} ({exc.filename or partial}); nothing was "
                "written — free space or fix permissions on --output and re-run"
            ) from exc
        raise


def read_existing_manifest(target: Path, manifest_name: str, schema: str, kind: str) -> dict[str, Any] | None:
    """The manifest of a previous conversion into ``target`` (None when there is none); ``UserError`` when ``target``
    exists but was not written by this converter (no readable manifest, or another ``schema``, described as
    ``kind``), so that nothing of someone else's is replaced."""
    if not target.exists():
        return None
    try:
        manifest = json.loads((target / manifest_name).read_text())
    except (OSError, ValueError) as exc:
        raise UserError(
            f"{target} exists but has no readable {manifest_name}, so it was not written by `tritonft convert`; "
            "remove it or choose another --output"
        ) from exc
    if not isinstance(manifest, dict) or manifest.get("schema") != schema:
        raise UserError(f"{target}/{manifest_name} is not a {kind}; remove {target} or choose another --output")
    return manifest
