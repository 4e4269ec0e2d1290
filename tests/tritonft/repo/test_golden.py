"""Rendered repositories for one T5, one GPT-2 and one GPT-J model match the reviewed golden files byte for byte.

Golden files hold every rendered file except Python sources (those are checked against their templates below).
Regenerate after an intended change, then review the diff by eye::

    TRITONFT_UPDATE_GOLDEN=1 .venv/bin/pytest -q tests/tritonft/repo/test_golden.py
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tritonft.repo import render_repository_files
from tritonft.repo import tokenization as tokenization_module
from tritonft.repo.naming import TOKENIZATION_MODULE
from tritonft.repo.templates import templates_dir
from tritonft.spec import Batching, DataType, Family, WeightDType

from .conftest import make_spec

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("TRITONFT_UPDATE_GOLDEN") == "1"

CASES = {
    "t5-small": make_spec(Family.T5, data_type=DataType.BF16),
    "gpt2-medium": make_spec(Family.GPT2, tensor_parallel=2, weight_dtype=WeightDType.FP16, int8_mode=1),
    "gpt-j-6b": make_spec(
        Family.GPTJ,
        tensor_parallel=4,
        decoupled=True,
        batching=Batching(max_batch_size=8, max_queue_delay_us=5000, preferred_batch_sizes=()),
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_rendered_files_match_golden(case: str) -> None:
    files = {p: c for p, c in render_repository_files(CASES[case]).items() if not p.endswith(".py")}
    directory = GOLDEN / case
    if UPDATE:
        for path, content in files.items():
            (directory / path).parent.mkdir(parents=True, exist_ok=True)
            (directory / path).write_bytes(content)
    on_disk = {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}
    assert sorted(on_disk) == sorted(files)
    for path, content in files.items():
        assert content == on_disk[path], f"{case}/{path} differs from golden (see module docstring to regenerate)"


def test_python_sources_are_copied_verbatim() -> None:
    files = render_repository_files(CASES["t5-small"])
    for role in ("preprocessing", "postprocessing"):
        model_dir = f"t5-small-{role}/1"
        assert files[f"{model_dir}/model.py"] == (templates_dir() / "shared" / role / "1" / "model.py").read_bytes()
        assert files[f"{model_dir}/{TOKENIZATION_MODULE}"] == Path(tokenization_module.__file__).read_bytes()
