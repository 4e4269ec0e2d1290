"""File identity: the cheap one (size + mtime) and sha256 of whole files with bounded memory and no per-chunk
allocation (hashing is most of a conversion's CPU).

Files are read with ``readinto`` into one reusable buffer: no fresh ``bytes`` object per chunk (on a VM, touching
new memory costs more than the copy) and the resident set grows by one buffer. ``hashlib`` releases the GIL
while it digests and the read releases it while copying, so files can be hashed on several cores from threads.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

CHUNK = 4 << 20


def stat_entry(path: Path) -> dict[str, Any]:
    """The cheap identity of a file: size and modification time."""
    stat = os.stat(path)
    return {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


class HashAbandonedError(Exception):
    """Raised by :func:`sha256_file` when its ``stop`` callback asks it to give up."""


def sha256_file(path: Path, stop: Callable[[], bool] | None = None, chunk: int = CHUNK) -> str:
    """Hex sha256 of the file's contents; ``stop()`` is polled between chunks (raises :class:`HashAbandonedError`)."""
    digest = hashlib.sha256()
    buffer = bytearray(chunk)
    view = memoryview(buffer)
    with path.open("rb", buffering=0) as handle:
        while count := handle.readinto(buffer):
            if stop is not None and stop():
                raise HashAbandonedError(str(path))
            digest.update(view[:count])
    return digest.hexdigest()
