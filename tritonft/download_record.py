"""``download.json``: what ``tritonft download`` put in a directory, and the verified sha256 of every file.

Written by :mod:`tritonft.download` beside the files it assembled; read by the converter
(:mod:`tritonft.convert.sources`) so a conversion of a downloaded checkpoint records the source hashes without
reading the weights a second time. Schema (``schema = "tritonft.download/1"``)::

    {
      "schema": "tritonft.download/1",
      "repo": "google/flan-t5-base", "revision": "main", "commit": "<40 hex>",
      "files": {
        "model.safetensors": {
          "size": 990345061, "mtime_ns": 1700000000000000000,   # of the file in this directory
          "sha256": "<64 hex>",                                 # computed from the bytes in this directory
          "hub_sha256": true                                    # and equal to the Hub's LFS object id
        },
        "config.json": {"size": 1208, "mtime_ns": ..., "sha256": "...", "hub_sha256": false}
      }
    }

A recorded ``sha256`` is trusted only while the file keeps the recorded size and modification time (the same rule
the converter uses to recognise unchanged sources); anything else is hashed again.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tritonft.digest import stat_entry

RECORD = "download.json"
SCHEMA = "tritonft.download/1"


def read_record(directory: Path) -> dict[str, Any] | None:
    """The directory's ``download.json`` if it is one of ours (current schema), else ``None``."""
    try:
        record = json.loads((directory / RECORD).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("schema") != SCHEMA or not isinstance(record.get("files"), dict):
        return None
    return record


def file_entry(path: Path, sha256: str, hub_sha256: bool) -> dict[str, Any]:
    """The record of one file as it is now on disk."""
    return {**stat_entry(path), "sha256": sha256, "hub_sha256": hub_sha256}


def unchanged(entry: Any, path: Path) -> bool:
    """Whether ``path`` still has the size and modification time its record entry was made with."""
    if not isinstance(entry, dict):
        return False
    try:
        now = stat_entry(path)
    except OSError:
        return False
    return (entry.get("size"), entry.get("mtime_ns")) == (now["size"], now["mtime_ns"])


def recorded_sha256(record: dict[str, Any], directory: Path, name: str) -> str | None:
    """The sha256 ``record`` (``directory``'s :func:`read_record`) holds for ``name``, if the file is unchanged."""
    entry = record["files"].get(name)
    if not unchanged(entry, directory / name):
        return None
    sha = entry.get("sha256")
    return sha if isinstance(sha, str) and len(sha) == 64 else None
