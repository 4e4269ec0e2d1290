"""Identity of the source files a conversion read: what the manifest records and how a rerun compares it.

Every source file is recorded with ``size`` and ``mtime_ns`` (the fast path of the rerun check); JSON files
(``config.json``, shard indexes: small) always with their full ``sha256``; safetensors files also with
``header_sha256`` (sha256 of the 8-byte length + JSON header: tensor names, dtypes, shapes and offsets). The full
``sha256`` of the weight files depends on :class:`SourceHash`:

* ``sha256`` (default): taken from the input's ``download.json`` when ``tritonft download`` wrote it and the file
  still has the size and mtime recorded there (the download verified it against the Hub; the entry then says
  ``"sha256_from": "download.json"``), otherwise computed in the background during the conversion (about 0.6 s
  of CPU per GB). A rerun whose sources were touched (new mtime) but not changed is still recognised as up to date.
* ``fingerprint``: not computed. A rerun after the weight files were touched cannot prove they are unchanged
  and converts again; provenance rests on size, mtime and the header hash (which catches any change of the
  tensor layout, but not new values in the same layout).

Rerun rule (:func:`sources_unchanged`): same file names, and either the same ``(size, mtime_ns)`` everywhere, or
every file whose stat changed has a recorded ``sha256`` equal to its current one. A request for ``sha256`` over
a manifest made with ``fingerprint`` converts again, so the manifest ends up with the hashes asked for.
"""

from __future__ import annotations

import hashlib
import struct
import threading
from collections.abc import Callable, Mapping
from enum import StrEnum
from pathlib import Path
from typing import Any

from tritonft.digest import HashAbandonedError, sha256_file, stat_entry
from tritonft.download_record import read_record, recorded_sha256

Entry = dict[str, Any]


class SourceHash(StrEnum):
    SHA256 = "sha256"
    """Full content hash of every source file (default)."""
    FINGERPRINT = "fingerprint"
    """Size, mtime and safetensors-header hash of the weight files; no full read."""


def safetensors_header_sha256(path: Path) -> str:
    """sha256 of the 8-byte header length and the JSON header (the tensor layout, without the data)."""
    with path.open("rb") as handle:
        prefix = handle.read(8)
        (length,) = struct.unpack("<Q", prefix) if len(prefix) == 8 else (0,)
        return hashlib.sha256(prefix + handle.read(length)).hexdigest()


def needs_full_hash(path: Path, mode: SourceHash) -> bool:
    """Weight files only in ``sha256`` mode; JSON files (config, shard index) always."""
    return mode is SourceHash.SHA256 or path.suffix == ".json"


def identify(
    path: Path, mode: SourceHash, stop: Callable[[], bool] | None = None, recorded: str | None = None
) -> Entry:
    """The manifest entry of one source file (stat taken first, so a change during hashing shows on rerun).

    ``recorded`` is the file's sha256 from ``download.json`` (already checked to belong to this size and mtime).
    """
    entry = stat_entry(path)
    if path.suffix == ".safetensors":
        entry["header_sha256"] = safetensors_header_sha256(path)
    if needs_full_hash(path, mode):
        if recorded is not None:
            entry["sha256"] = recorded
            entry["sha256_from"] = "download.json"
        else:
            entry["sha256"] = sha256_file(path, stop=stop)
    return entry


def sources_unchanged(
    recorded: Mapping[str, Entry],
    current: Mapping[str, Entry],
    mode: SourceHash,
    sha256_of: Callable[[str], str],
) -> bool:
    """Whether the sources recorded in a manifest are the ones on disk now (see the module docstring).

    ``current`` maps names to :func:`stat_entry` results; ``sha256_of(name)`` hashes a file on demand (only
    called for files whose stat changed and whose recorded entry has a ``sha256``).
    """
    if set(recorded) != set(current):
        return False
    if mode is SourceHash.SHA256 and any("sha256" not in entry for entry in recorded.values()):
        return False
    changed = [
        name
        for name, now in current.items()
        if (recorded[name].get("size"), recorded[name].get("mtime_ns")) != (now["size"], now["mtime_ns"])
    ]
    if any(recorded[name].get("size") != current[name]["size"] for name in changed):
        return False
    return all("sha256" in recorded[name] and recorded[name]["sha256"] == sha256_of(name) for name in changed)


class SourceIdentities:
    """The manifest's ``source.files`` for one conversion, computed once: in a background thread while the
    weights are written (hashing releases the GIL), or on demand by the rerun check."""

    def __init__(self, root: Path, files: list[Path], mode: SourceHash) -> None:
        self.root = root
        self.files = files
        self.mode = mode
        self._thread: threading.Thread | None = None
        self._result: dict[str, Entry] | None = None
        self._error: BaseException | None = None
        self._stop = threading.Event()
        self._record = read_record(root)

    def recorded(self, name: str) -> str | None:
        """The sha256 ``download.json`` holds for an unchanged source file, if any."""
        return recorded_sha256(self._record, self.root, name) if self._record is not None else None

    def stats(self) -> dict[str, Entry]:
        return {self._rel(p): stat_entry(p) for p in self.files}

    def sha256_of(self, name: str) -> str:
        return self.recorded(name) or sha256_file(self.root / name)

    def start(self) -> None:
        if self._result is None and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="identify-sources", daemon=True)
            self._thread.start()

    def abandon(self) -> None:
        self._stop.set()

    def result(self) -> dict[str, Entry]:
        if self._result is None:
            if self._thread is None:
                self._run()
            else:
                self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result

    def _rel(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    def _run(self) -> None:
        try:
            self._result = {
                self._rel(p): identify(p, self.mode, stop=self._stop.is_set, recorded=self.recorded(self._rel(p)))
                for p in self.files
            }
        except HashAbandonedError:
            return
        except BaseException as exc:
            self._error = exc
