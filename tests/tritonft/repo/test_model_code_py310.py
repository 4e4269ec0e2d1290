"""The code that runs inside the server image (the Python models, the tokenization module copied next to them and,
with the reference engine, its model and the part of the ``tritonft`` package shipped with it) is checked for the
base image's Python, 3.10 (NGC Triton 23.04), statically and fast.

``mypy --python-version 3.10`` parses with 3.10's grammar (newer syntax is an error) and checks every standard
library name against typeshed's per-version stubs (e.g. ``enum.StrEnum`` is 3.11+). The runtime on 3.10 and
numpy 1.x is shown by ``tests/system/realtriton/test_image_python.py``, which serves the models on a 3.10 stub in the
real Triton."""

from __future__ import annotations

from pathlib import Path

import pytest
from mypy import api as mypy_api

from tritonft.encoder.repo import TOKENIZER_PACKAGE_FILES
from tritonft.repo import tokenization
from tritonft.repo.engine import PACKAGE_ROOT, REFERENCE_MODEL_SOURCE, REFERENCE_PACKAGE_FILES

ROOT = Path(__file__).resolve().parents[3]
IMAGE_CODE = [
    ROOT / "model_repo" / "shared" / "preprocessing" / "1" / "model.py",
    ROOT / "model_repo" / "shared" / "postprocessing" / "1" / "model.py",
    ROOT / Path(tokenization.__file__).relative_to(ROOT),
    REFERENCE_MODEL_SOURCE,
    *(PACKAGE_ROOT / relative for relative in REFERENCE_PACKAGE_FILES),
    # the encoders' Python models and what tritonft.encoder.repo ships with them
    PACKAGE_ROOT / "encoder" / "triton_tokenizer_model.py",
    PACKAGE_ROOT / "encoder" / "triton_onnx_model.py",
    *(PACKAGE_ROOT / relative for relative in TOKENIZER_PACKAGE_FILES),
]


def check_for_python_310(files: list[Path], cache: Path) -> tuple[str, int]:
    out, err, code = mypy_api.run(
        [
            "--python-version=3.10",
            "--ignore-missing-imports",  # triton_python_backend_utils exists only inside Triton
            "--follow-imports=silent",
            "--no-error-summary",
            f"--cache-dir={cache}",
            *map(str, files),
        ]
    )
    return out + err, code


@pytest.fixture(scope="module")
def mypy_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One incremental cache for every check of this module: typeshed's stdlib and numpy's stubs are analysed once,
    not once per file (mypy re-checks whatever file its cache entry does not match, by path and content hash)."""
    return tmp_path_factory.mktemp("mypy-py310-cache")


@pytest.mark.parametrize("path", IMAGE_CODE, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_image_code_uses_only_python_3_10_syntax_and_standard_library(mypy_cache: Path, path: Path) -> None:
    output, code = check_for_python_310([path], mypy_cache)  # one at a time: both models are "model"
    assert code == 0, output


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("from enum import StrEnum\n", 'Module "enum" has no attribute "StrEnum"'),
        ("try:\n    pass\nexcept* ValueError:\n    pass\n", "requires Python 3.11 or newer"),
    ],
    ids=["3.11-stdlib", "3.11-syntax"],
)
def test_the_check_rejects_what_python_3_10_lacks(tmp_path: Path, mypy_cache: Path, source: str, message: str) -> None:
    module = tmp_path / "newer.py"
    module.write_text(source)
    output, code = check_for_python_310([module], mypy_cache)
    assert code == 1 and message in output
