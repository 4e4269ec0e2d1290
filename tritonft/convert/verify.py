"""Re-check a converted ``<N>-gpu/`` directory against its ``manifest.json`` (sizes, sha256, no strays).

FT's loader never checks shapes and only warns about missing or short files, so this is the last place a damaged
model store can be caught before Triton serves garbage.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tritonft.convert.writer import CONFIG_INI, MANIFEST, SCHEMA
from tritonft.digest import sha256_file
from tritonft.errors import UserError

_ITEMSIZE = {"fp32": 4, "fp16": 2, "bf16": 2}


@dataclass
class Report:
    directory: Path
    files: int = 0
    bytes: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def load_manifest(directory: Path) -> dict[str, Any]:
    path = directory / MANIFEST
    if not directory.is_dir():
        raise UserError(f"{directory} is not a directory; pass the converted OUT/<N>-gpu directory")
    try:
        manifest = json.loads(path.read_text())
    except FileNotFoundError as exc:
        raise UserError(
            f"{path} is missing: {directory} was not written by `tritonft convert` (or is incomplete)"
        ) from exc
    except (OSError, ValueError) as exc:
        raise UserError(f"{path} is unreadable ({exc}); re-run `tritonft convert`") from exc
    if not isinstance(manifest, dict) or manifest.get("schema") != SCHEMA:
        raise UserError(f"{path} is not a {SCHEMA} manifest; re-run `tritonft convert`")
    return manifest


def _check(path: Path, entry: dict[str, Any]) -> tuple[int | None, list[str]]:
    """(bytes hashed, or ``None`` when missing or of the wrong size; problems) for one listed file."""
    name = path.name
    if not path.is_file():
        return None, [f"{name}: missing"]
    size = path.stat().st_size
    if size != entry.get("size"):
        return None, [f"{name}: {size} bytes, manifest says {entry.get('size')}"]
    if sha256_file(path) != entry.get("sha256"):
        return size, [f"{name}: content differs from the manifest (sha256 mismatch)"]
    return size, []


def verify(directory: Path, workers: int = 2) -> Report:
    """Every listed file present with its size and sha256; sizes consistent with shapes; no unlisted ``.bin``.

    Files are hashed on ``workers`` threads; problems are reported in manifest order.
    """
    manifest = load_manifest(directory)
    report = Report(directory)
    files: dict[str, dict[str, Any]] = manifest.get("files", {})
    expected_count = manifest.get("tensor_parallel")
    if directory.name != f"{expected_count}-gpu":
        report.problems.append(f"directory name {directory.name!r} does not match tensor_parallel={expected_count}")
    for name, entry in files.items():
        count = 1
        for dim in entry.get("shape", []):
            count *= int(dim)
        if count * _ITEMSIZE.get(str(entry.get("dtype")), 0) != entry.get("size"):
            report.problems.append(
                f"{name}: manifest size {entry.get('size')} does not match shape {entry.get('shape')}"
            )
    listed = [(directory / name, entry) for name, entry in files.items()]
    listed.append((directory / CONFIG_INI, manifest.get("config_ini", {})))
    with ThreadPoolExecutor(max_workers=workers) as pool:  # hashlib releases the GIL: one file per core
        for size, problems in pool.map(lambda item: _check(*item), listed):
            report.problems += problems
            if size is not None:
                report.files += 1
                report.bytes += size
    strays = sorted(p.name for p in directory.glob("*.bin") if p.name not in files)
    report.problems += [f"{name}: not in the manifest (FT would load it if its name matches)" for name in strays]
    return report
