"""Read checkpoint tensors one at a time, without torch and without holding the model in memory.

Supported layouts of a Hugging Face model directory, in order of preference:

* ``model.safetensors`` (one file), or shards listed by ``model.safetensors.index.json`` (``weight_map``).
  The safetensors header is parsed here (8-byte little-endian length, JSON header, raw data) so that every
  tensor's byte range can be checked against the file size *before* anything is converted. Each tensor is then
  memory-mapped on its own (read-only, just its pages): no copy out of the page cache, and the mapping is
  released as soon as the last array using it is dropped, so the resident set holds only the tensors of the
  jobs in flight. (If a source file is truncated *while* it is being converted, the process dies of SIGBUS;
  the partial output is never renamed into place and is cleaned up by the next run.)
* ``pytorch_model.bin`` (or shards listed by ``pytorch_model.bin.index.json``): only when ``torch`` is
  importable; loaded with ``torch.load(mmap=True, weights_only=True)``.

Stored dtypes: ``F32``, ``F16`` and ``BF16`` (plus integer buffers such as ``I64``, which are indexed but never
converted). numpy has no bfloat16, so bf16 tensors are returned as their raw
``uint16`` bits and widened to float32 with a 16-bit shift (exact) by :func:`cast`.
"""

from __future__ import annotations

import importlib
import json
import mmap
import os
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from tritonft.errors import UserError
from tritonft.spec import WeightDType

SAFETENSORS_FILE = "model.safetensors"
SAFETENSORS_INDEX = "model.safetensors.index.json"
TORCH_FILE = "pytorch_model.bin"
TORCH_INDEX = "pytorch_model.bin.index.json"

# safetensors dtype tag -> (numpy dtype the raw bytes are read as, bytes per element)
_STORED: dict[str, np.dtype[Any]] = {
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "BF16": np.dtype("<u2"),
    # integer buffers some checkpoints carry (BERT's ``embeddings.position_ids``): indexed, never converted
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
    "U8": np.dtype("u1"),
    "BOOL": np.dtype("?"),
}
_MAX_HEADER_BYTES = 100 * 1024 * 1024  # the safetensors format's own limit

Array = npt.NDArray[Any]


@dataclass(frozen=True)
class TensorInfo:
    """Where one stored tensor lives and what it is."""

    name: str
    dtype: str
    """Stored dtype tag: ``F32``, ``F16`` or ``BF16``."""
    shape: tuple[int, ...]
    file: Path
    offset: int
    """Absolute byte offset of the first element in ``file`` (safetensors only; 0 for torch files)."""

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * _STORED[self.dtype].itemsize


class Checkpoint:
    """The tensors of one checkpoint directory: names, shapes and dtypes up front, data on demand."""

    def __init__(
        self,
        directory: Path,
        tensors: Mapping[str, TensorInfo],
        files: list[Path],
        reader: Callable[[TensorInfo], Array],
    ) -> None:
        self.directory = directory
        self.tensors = dict(tensors)
        self.files = files
        """Weight files (and index) the tensors come from: what the manifest hashes."""
        self._reader = reader

    @property
    def shapes(self) -> dict[str, tuple[int, ...]]:
        return {name: info.shape for name, info in self.tensors.items()}

    def read(self, name: str) -> Array:
        """The stored tensor as a C-contiguous (possibly read-only) array of its stored dtype (bf16 as ``uint16``)."""
        return self._reader(self.tensors[name])


def cast(array: Array, stored: str, out: WeightDType) -> Array:
    """Convert a stored tensor to the output file dtype with round-to-nearest-even (numpy ``astype``).

    bf16 -> fp32 is exact (bf16 is the upper half of a float32); bf16 -> fp16 goes through fp32, which equals a
    direct conversion (ft-format.md §1.1).
    """
    if stored == "BF16":
        array = (array.astype(np.uint32) << 16).view(np.float32)
    target = np.float32 if out is WeightDType.FP32 else np.float16
    if array.dtype == target:
        return array
    return array.astype(target)


def open_checkpoint(directory: Path) -> Checkpoint:
    """Index the weights of a Hugging Face model directory (headers only; no tensor data is read).

    Raises :class:`UserError` naming the file and the fix when the directory has no weights, a file is truncated
    or corrupt, a tensor has an unsupported dtype, or ``pytorch_model.bin`` is the only format and torch is
    not installed.
    """
    if not directory.is_dir():
        raise UserError(f"--input {directory} is not a directory; pass the Hugging Face model directory")
    if (directory / SAFETENSORS_INDEX).is_file():
        return _sharded_safetensors(directory)
    if (directory / SAFETENSORS_FILE).is_file():
        path = directory / SAFETENSORS_FILE
        return Checkpoint(directory, read_safetensors_header(path), [path], _read_safetensors)
    if (directory / TORCH_INDEX).is_file() or (directory / TORCH_FILE).is_file():
        return _torch_checkpoint(directory)
    singles = sorted(p.name for p in directory.glob("*.safetensors"))
    hint = f" (found {singles}; a sharded checkpoint also needs {SAFETENSORS_INDEX})" if singles else ""
    raise UserError(
        f"{directory} has no {SAFETENSORS_FILE}, {SAFETENSORS_INDEX} or {TORCH_FILE}{hint}; "
        "download the model with `tritonft download` or point --input at the model directory"
    )


def read_safetensors_header(path: Path) -> dict[str, TensorInfo]:
    """Parse and validate a safetensors header: every tensor's byte range must lie inside the file."""
    size = path.stat().st_size
    with path.open("rb") as handle:
        prefix = handle.read(8)
        if len(prefix) < 8:
            raise UserError(f"{path} is truncated ({size} bytes, no safetensors header); re-download it")
        (header_len,) = struct.unpack("<Q", prefix)
        if header_len > _MAX_HEADER_BYTES or 8 + header_len > size:
            raise UserError(
                f"{path} is truncated or not a safetensors file (header claims {header_len} bytes, file has {size});"
                " re-download it"
            )
        try:
            header = json.loads(handle.read(header_len))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise UserError(f"{path} has a corrupt safetensors header ({exc}); re-download it") from exc
    if not isinstance(header, dict):
        raise UserError(f"{path} has a corrupt safetensors header (not a JSON object); re-download it")
    data_start = 8 + header_len
    tensors: dict[str, TensorInfo] = {}
    problems: list[str] = []
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype, shape, (begin, end) = entry["dtype"], tuple(int(d) for d in entry["shape"]), entry["data_offsets"]
        except (KeyError, TypeError, ValueError):
            problems.append(f"{name}: malformed header entry {entry!r}")
            continue
        if dtype not in _STORED:
            problems.append(f"{name}: stored dtype {dtype} is not supported (F32, F16 or BF16 are)")
            continue
        info = TensorInfo(name, dtype, shape, path, data_start + int(begin))
        if int(end) - int(begin) != info.nbytes:
            problems.append(f"{name}: byte range {begin}..{end} does not match shape {list(shape)} of {dtype}")
        elif data_start + int(end) > size:
            problems.append(f"{name}: needs bytes up to {data_start + int(end)} but the file has {size}")
        tensors[name] = info
    if problems:
        raise UserError(f"{path} is truncated or corrupt; re-download it", problems[:20])
    return tensors


def _read_safetensors(info: TensorInfo) -> Array:
    count = int(np.prod(info.shape, dtype=np.int64))
    dtype = _STORED[info.dtype]
    if count == 0:
        return np.empty(info.shape, dtype=dtype)
    start = info.offset - info.offset % mmap.ALLOCATIONGRANULARITY
    with info.file.open("rb", buffering=0) as handle:
        if os.fstat(handle.fileno()).st_size < info.offset + info.nbytes:
            raise UserError(
                f"{info.file} changed while converting (tensor {info.name} is short); re-run the conversion"
            )
        mapping = mmap.mmap(handle.fileno(), info.offset + info.nbytes - start, offset=start, access=mmap.ACCESS_READ)
    # The array keeps the mapping alive; it is unmapped when the last view of the tensor is dropped.
    return np.frombuffer(mapping, dtype=dtype, count=count, offset=info.offset - start).reshape(info.shape)


def _load_index(path: Path) -> dict[str, str]:
    try:
        weight_map = json.loads(path.read_text())["weight_map"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UserError(f"{path} is not a valid index (needs a 'weight_map' object): {exc}; re-download it") from exc
    if not isinstance(weight_map, dict):
        raise UserError(f"{path}: 'weight_map' must map tensor names to shard files; re-download it")
    return {str(k): str(v) for k, v in weight_map.items()}


def _sharded_safetensors(directory: Path) -> Checkpoint:
    index = directory / SAFETENSORS_INDEX
    weight_map = _load_index(index)
    shard_names = sorted(set(weight_map.values()))
    missing = [s for s in shard_names if not (directory / s).is_file()]
    if missing:
        raise UserError(f"{index} lists shard(s) that are not in {directory}: {missing}; download them")
    tensors: dict[str, TensorInfo] = {}
    problems: list[str] = []
    for shard in shard_names:
        header = read_safetensors_header(directory / shard)
        listed = {name for name, file in weight_map.items() if file == shard}
        problems += [
            f"{name}: listed in the index for {shard} but not stored there" for name in sorted(listed - set(header))
        ]
        problems += [
            f"{name}: stored in {shard} but the index maps it elsewhere" for name in sorted(set(header) - listed)
        ]
        tensors.update({name: info for name, info in header.items() if name in listed})
    if problems:
        raise UserError(f"{index} does not match its shards; re-download the checkpoint", problems[:20])
    return Checkpoint(directory, tensors, [index, *(directory / s for s in shard_names)], _read_safetensors)


def _torch_checkpoint(directory: Path) -> Checkpoint:
    try:
        torch: Any = importlib.import_module("torch")
    except ImportError as exc:
        raise UserError(
            f"{directory} only has {TORCH_FILE} weights, which need PyTorch to read: install torch "
            f"(pip install torch) or provide {SAFETENSORS_FILE}"
        ) from exc
    if (directory / TORCH_INDEX).is_file():
        files = [directory / f for f in sorted(set(_load_index(directory / TORCH_INDEX).values()))]
        listing = [directory / TORCH_INDEX, *files]
    else:
        files = [directory / TORCH_FILE]
        listing = files
    loaded: dict[Path, dict[str, Any]] = {}
    tensors: dict[str, TensorInfo] = {}
    tags = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16"}
    for path in files:
        try:
            state = torch.load(path, map_location="cpu", mmap=True, weights_only=True)
        except Exception as exc:  # torch raises many types for corrupt pickles
            raise UserError(f"{path} cannot be loaded ({exc}); re-download it") from exc
        state = state.get("state_dict", state) if isinstance(state, dict) else state
        loaded[path] = state
        for name, tensor in state.items():
            if tensor.dtype not in tags:
                raise UserError(f"{path}: tensor {name} has dtype {tensor.dtype}; only fp32/fp16/bf16 are supported")
            tensors[name] = TensorInfo(name, tags[tensor.dtype], tuple(tensor.shape), path, 0)

    def read(info: TensorInfo) -> Array:
        tensor = loaded[info.file][info.name].contiguous()
        if info.dtype == "BF16":
            tensor = tensor.view(torch.int16)
        array: Array = tensor.numpy().copy()
        return array.view(np.uint16) if info.dtype == "BF16" else array

    return Checkpoint(directory, tensors, listing, read)
