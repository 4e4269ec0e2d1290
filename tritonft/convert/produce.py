"""Produce the bytes of one output file as a short sequence of buffers (executing a :class:`~.plan.Job`).

The bytes are exactly the C-order content of the transformed array (ft-format.md §1.1, §1.3); how they are
produced is chosen for speed on a small machine:

* **Zero copy** when the output is a contiguous slice of the (memory-mapped) source in the output dtype: the
  embedding tables, norms, row splits of untransposed weights. The caller hashes and writes straight from the
  page cache.
* Otherwise row blocks of about ``block_bytes`` are assembled in **one reusable buffer** per worker (no fresh
  allocation per block: on a VM, touching new memory costs more than the copy). Transposed sources are copied
  in small 2-D tiles: numpy's plain strided copy of a transposed matrix walks memory column by column and is
  ~2.5x slower than a tiled copy whose source and destination rows both stay in cache.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import numpy.typing as npt

from tritonft.convert.plan import Job, OutputFile, Split

Array = npt.NDArray[Any]

BLOCK_BYTES = 4 << 20
"""Size of a worker's reusable output buffer: large enough for few syscalls, small enough to stay in L3."""
TILE = 64
"""Edge of the square tiles a transposed copy is done in (64 x 64 fp32 = 16 KiB source + 16 KiB destination)."""


def full_view(job: Job, arrays: list[Array]) -> list[Array]:
    """The sources after transpose/view (numpy views, no copies); stacking is done per block."""
    mats = [a.T if job.transpose else a for a in arrays]
    if len(mats) == 1 and job.view is not None:
        mats = [mats[0].reshape(job.view)]
    return mats


def output_view(job: Job, mats: list[Array], out: OutputFile) -> list[Array]:
    """Per source, the (strided) view of the full transformed array that ``out`` holds."""
    rank = out.rank or 0
    if len(job.full_shape) == 1:  # biases and norms, split (if at all) along their only axis
        width = out.shape[0]
        return [m[rank * width : (rank + 1) * width] for m in mats]
    if job.split is Split.COLUMNS:
        width = out.shape[-1]
        return [m[..., rank * width : (rank + 1) * width] for m in mats]
    if job.split is Split.ROWS:
        rows = out.shape[0]
        return [m[rank * rows : (rank + 1) * rows] for m in mats]
    return list(mats)


def copy_into(dst: Array, src: Array, tile: int = TILE) -> None:
    """``dst[...] = src``, in ``tile`` x ``tile`` pieces when ``src`` is a transposed (column-major) 2-D view."""
    if src.ndim != 2 or abs(src.strides[1]) <= abs(src.strides[0]) or src.shape[1] <= tile:
        np.copyto(dst, src)
        return
    rows, cols = src.shape
    for i in range(0, rows, tile):
        for j in range(0, cols, tile):
            dst[i : i + tile, j : j + tile] = src[i : i + tile, j : j + tile]


def file_buffers(job: Job, mats: list[Array], out: OutputFile, scratch: Array) -> Iterator[memoryview]:
    """Byte buffers whose concatenation is the C-order content of ``out``.

    ``mats`` are the sources already cast to the output dtype (see :func:`full_view`); ``scratch`` is the caller's
    reusable ``uint8`` buffer (at least one output row; each yielded buffer is only valid until the next one).
    """
    views = output_view(job, mats, out)
    if len(views) == 1 and views[0].flags.c_contiguous:
        yield views[0].data.cast("B")
        return
    dtype = views[0].dtype
    row_items = int(np.prod(out.shape[1:], dtype=np.int64))
    row_bytes = row_items * dtype.itemsize
    if row_bytes > scratch.nbytes:
        raise ValueError(f"{out.name}: a row of {row_bytes} bytes does not fit the {scratch.nbytes}-byte buffer")
    step = max(1, scratch.nbytes // row_bytes)
    rows = out.shape[0]
    for start in range(0, rows, step):
        stop = min(rows, start + step)
        dst = scratch[: (stop - start) * row_bytes].view(dtype).reshape(stop - start, *out.shape[1:])
        if len(views) > 1:  # fused QKV: 2-D sources stacked on a new axis 1 -> [rows, S, cols]
            for part, view in enumerate(views):
                copy_into(dst[:, part, :], view[start:stop])
        else:
            copy_into(dst, views[0][start:stop])
        yield dst.data.cast("B")
