"""Producing output bytes in blocks: tiled transposes, buffer reuse, zero-copy slices, block boundaries."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from tests.tritonft.convert.models import Model, gpt2_model, gptj_model, t5_model
from tests.tritonft.convert.test_layout import assert_matches_spec
from tritonft.convert.plan import Job, OutputFile, Split
from tritonft.convert.produce import copy_into, file_buffers, full_view
from tritonft.convert.writer import Request, convert
from tritonft.spec import WeightDType

BUILDERS: dict[str, Callable[..., Model]] = {"t5": t5_model, "gpt2": gpt2_model, "gptj": gptj_model}


@pytest.mark.parametrize("tile", [1, 7, 64])
def test_tiled_copy_of_a_transposed_matrix_equals_the_transpose(tile):
    source = np.arange(130 * 70, dtype=np.float32).reshape(130, 70)
    dst = np.zeros((70, 130), dtype=np.float32)
    copy_into(dst, source.T, tile=tile)
    assert dst.tobytes() == np.ascontiguousarray(source.T).tobytes()


def test_tiled_copy_into_a_strided_destination_leaves_the_rest_untouched():
    parts = [np.full((40, 100), p, dtype=np.float32) for p in range(3)]
    dst = np.full((100, 3, 40), -1, dtype=np.float32)
    for p, part in enumerate(parts):
        copy_into(dst[:, p, :], part.T, tile=16)
    assert [set(np.unique(dst[:, p, :])) for p in range(3)] == [{0.0}, {1.0}, {2.0}]


def _concat(job: Job, arrays: list[np.ndarray], out: OutputFile, scratch_bytes: int) -> bytes:
    scratch = np.empty(scratch_bytes, dtype=np.uint8)
    return b"".join(bytes(block) for block in file_buffers(job, full_view(job, arrays), out, scratch))


@pytest.mark.parametrize("scratch_bytes", [24 * 4, 24 * 4 * 5, 4 << 20])
def test_blocks_of_any_size_concatenate_to_the_split_transpose(scratch_bytes):
    rng = np.random.default_rng(3)
    weight = rng.standard_normal((48, 23), dtype=np.float32)  # HF [out, in]: FT [23, 48], split columns by 2
    job = Job("w", ("w",), (48, 23), transpose=True, split=Split.COLUMNS, parts=2)
    for rank, out in enumerate(job.outputs):
        expected = np.ascontiguousarray(weight.T[:, rank * 24 : (rank + 1) * 24]).tobytes()
        assert _concat(job, [weight], out, scratch_bytes) == expected


def test_a_plain_slice_of_the_source_is_written_without_a_copy():
    weight = np.arange(12 * 5, dtype=np.float32).reshape(12, 5)
    job = Job("w", ("w",), (12, 5), split=Split.ROWS, parts=3)
    blocks = list(file_buffers(job, [weight], job.outputs[1], np.empty(16, dtype=np.uint8)))
    assert len(blocks) == 1
    assert np.shares_memory(np.frombuffer(blocks[0], dtype=np.float32), weight)
    assert bytes(blocks[0]) == weight[4:8].tobytes()


def test_transformed_blocks_reuse_the_callers_buffer():
    weight = np.arange(8 * 6, dtype=np.float32).reshape(8, 6)
    job = Job("w", ("w",), (8, 6), transpose=True)
    scratch = np.empty(8 * 4 * 2, dtype=np.uint8)  # two output rows per block
    mats = full_view(job, [weight])
    blocks = [np.frombuffer(b, dtype=np.float32) for b in file_buffers(job, mats, job.outputs[0], scratch)]
    assert len(blocks) == 3
    assert all(np.shares_memory(block, scratch) for block in blocks)


@pytest.mark.parametrize("buffer_bytes", [1, 1000])
@pytest.mark.parametrize(("dtype", "stored"), [("fp32", "fp32"), ("fp16", "bf16")])
@pytest.mark.parametrize("family", ["t5", "gpt2", "gptj"])
def test_small_output_buffers_give_the_spec_bytes(tmp_path, family, dtype, stored, buffer_bytes):
    model = BUILDERS[family](stored=stored)
    src = model.save(tmp_path / "hf", stored=stored)
    request = Request(src, tmp_path / "ft", tp=2, dtype=WeightDType(dtype), buffer_bytes=buffer_bytes)
    result = convert(request)
    assert_matches_spec(model, result.target, 2, dtype)
