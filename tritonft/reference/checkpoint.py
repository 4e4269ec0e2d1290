"""Read a converted ``<TP>-gpu/`` directory the way FasterTransformer's loader does (ft-format.md §1).

* ``config.ini`` is FT's INI file: section/key lookup case-insensitive, ``weight_data_type`` matched by substring
  (``fp32``/``fp16``/``bf16``), booleans ``true/yes/on/1`` and ``false/no/off/0``.
* Each tensor is one headerless little-endian file; FT reads exactly ``prod(shape)`` elements of the file dtype.
  Rank-split tensors are ``<name>.<rank>.bin`` and are merged here in rank order along the split axis (columns =
  the last axis, rows = axis 0); replicated tensors are ``<name>.bin``.

Where FT only logs a warning (a missing, short or over-long file: it then serves random memory or silently
truncates), the reference stops with :class:`CheckpointError` naming the file: it exists to catch exactly that.
"""

from __future__ import annotations

import configparser
import re
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

import numpy as np

from tritonft.errors import UserError
from tritonft.spec import Family

Array = np.ndarray[Any, Any]

CONFIG_INI = "config.ini"
SECTIONS: dict[str, Family] = {"encoder": Family.T5, "gpt": Family.GPT2, "gptj": Family.GPTJ}
"""The ``config.ini`` section that identifies each family (FT picks the model class from ``model_type``)."""

_TRUE = ("true", "yes", "on", "1")
_FALSE = ("false", "no", "off", "0")


class CheckpointError(UserError):
    """The converted files cannot be what FT needs: a missing, short or over-long file, or a bad ``config.ini``."""


class Split(Enum):
    NONE = "none"
    COLUMNS = "columns"
    ROWS = "rows"


@dataclass
class Checkpoint:
    """An opened ``<TP>-gpu`` directory: its INI sections, file dtype and TP size."""

    directory: Path
    family: Family
    tp: int
    dtype: str
    """``fp32``, ``fp16`` or ``bf16`` (``weight_data_type``)."""
    sections: dict[str, dict[str, str]]
    read_files: list[str] = field(default_factory=list)
    """Every file read so far, in order (the files FT would load)."""

    def get(self, section: str, key: str, default: str | None = None) -> str:
        value = self.sections.get(section.lower(), {}).get(key.lower())
        if value is None:
            if default is None:
                raise CheckpointError(
                    f"{self.directory / CONFIG_INI}: [{section}] {key} is missing (FasterTransformer exits at load); "
                    "re-run `tritonft convert`"
                )
            return default
        return value

    def integer(self, section: str, key: str, default: int | None = None) -> int:
        text = self.get(section, key, None if default is None else str(default))
        try:
            return int(text)
        except ValueError as exc:
            raise CheckpointError(
                f"{self.directory / CONFIG_INI}: [{section}] {key} = {text!r} is not an integer "
                "(FasterTransformer exits at load); re-run `tritonft convert`"
            ) from exc

    def number(self, section: str, key: str, default: float) -> float:
        text = self.get(section, key, str(default))
        try:
            return float(text)
        except ValueError as exc:
            raise CheckpointError(
                f"{self.directory / CONFIG_INI}: [{section}] {key} = {text!r} is not a number"
            ) from exc

    def boolean(self, section: str, key: str, default: bool) -> bool:
        text = self.get(section, key, "").strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        return default

    def _read(self, name: str, count: int) -> Array:
        path = self.directory / name
        itemsize = 4 if self.dtype == "fp32" else 2
        try:
            size = path.stat().st_size
        except FileNotFoundError as exc:
            raise CheckpointError(
                f"{path.name} is missing from {self.directory} (FasterTransformer would only warn and serve random "
                "values); re-run `tritonft convert`"
            ) from exc
        if size != count * itemsize:
            raise CheckpointError(
                f"{path.name} holds {size} bytes but FasterTransformer reads {count} {self.dtype} values "
                f"({count * itemsize} bytes) for it: the file does not match config.ini (wrong shape, TP or dtype); "
                "re-run `tritonft convert`"
            )
        self.read_files.append(path.name)
        if self.dtype == "fp32":
            return np.fromfile(path, dtype="<f4", count=count)
        if self.dtype == "fp16":
            return np.fromfile(path, dtype="<f2", count=count).astype(np.float32)
        bits = np.fromfile(path, dtype="<u2", count=count).astype(np.uint32) << np.uint32(16)
        values: Array = bits.view(np.float32)
        return values

    def tensor(self, base: str, shape: tuple[int, ...], split: Split = Split.NONE) -> Array:
        """The full fp32 tensor ``base`` of logical ``shape`` (before the split), merged from its rank files."""
        count = int(np.prod(shape))
        if split is Split.NONE:
            return self._read(f"{base}.bin", count).reshape(shape)
        axis = 0 if split is Split.ROWS else len(shape) - 1
        if shape[axis] % self.tp:
            raise CheckpointError(
                f"{base}: dimension {shape[axis]} does not split over tensor_parallel={self.tp} "
                "(FasterTransformer requires it); convert with a TP that divides the heads and FFN size"
            )
        part = list(shape)
        part[axis] //= self.tp
        parts = [self._read(f"{base}.{rank}.bin", count // self.tp).reshape(part) for rank in range(self.tp)]
        return np.concatenate(parts, axis=axis)


def parse_ini(text: str, path: Path) -> dict[str, dict[str, str]]:
    parser = configparser.ConfigParser(interpolation=None, strict=False, inline_comment_prefixes=(";",))
    try:
        parser.read_string(text)
    except configparser.Error as exc:
        raise CheckpointError(f"{path}: not an INI file FasterTransformer can read ({exc})") from exc
    return {name.lower(): {k.lower(): v for k, v in parser[name].items()} for name in parser.sections()}


def _tp_of(directory: Path, sections: dict[str, dict[str, str]]) -> int:
    match = re.fullmatch(r"(\d+)-gpu", directory.name)
    if match and int(match.group(1)) > 0:
        return int(match.group(1))
    ranks = {int(m.group(1)) for p in directory.glob("*.bin") if (m := re.search(r"\.(\d+)\.bin$", p.name))}
    if ranks and ranks == set(range(len(ranks))):
        return len(ranks)
    raise CheckpointError(
        f"{directory}: cannot tell the tensor-parallel size (expected a directory named <N>-gpu); "
        "pass the converter's OUT/<N>-gpu directory"
    )


def load_checkpoint(directory: Path) -> Checkpoint:
    """Open ``directory`` (a converter's ``OUT/<N>-gpu``, or ``OUT`` holding exactly one ``<N>-gpu``)."""
    directory = Path(directory)
    if not (directory / CONFIG_INI).is_file():
        children = (
            sorted(p for p in directory.glob("*-gpu") if (p / CONFIG_INI).is_file()) if directory.is_dir() else []
        )
        if len(children) != 1:
            raise CheckpointError(
                f"{directory} holds no {CONFIG_INI}: pass the converted OUT/<N>-gpu directory"
                + (f" (found {', '.join(p.name for p in children)})" if children else "")
            )
        directory = children[0]
    path = directory / CONFIG_INI
    sections = parse_ini(path.read_text(encoding="utf-8", errors="replace"), path)
    family = next((f for s, f in SECTIONS.items() if s in sections), None)
    if family is None:
        raise CheckpointError(f"{path}: no [encoder], [gpt] or [gptj] section; this is not a converted T5/GPT model")
    section = family.ini_section
    raw_dtype = sections[section].get("weight_data_type")
    if raw_dtype is None:
        raise CheckpointError(f"{path}: [{section}] weight_data_type is missing (FasterTransformer exits at load)")
    dtype = next((d for d in ("fp32", "fp16", "bf16") if d in raw_dtype), "fp32")
    return Checkpoint(directory, family, _tp_of(directory, sections), dtype, sections)
