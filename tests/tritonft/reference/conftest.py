"""Golden checkpoints rebuilt from their seed and converted with the real ``tritonft convert`` (cached per session)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.tritonft.convert.conftest import cli  # noqa: F401  (the in-process `tritonft` fixture)
from tests.tritonft.reference.checkpoints import VARIANTS, Variant
from tritonft.cli import main

GOLDEN = Path(__file__).parent / "golden"
BY_NAME = {v.name: v for v in VARIANTS}


def golden(name: str) -> dict[str, Any]:
    """The golden file of a variant; a case without ``end_id`` uses the model's own."""
    data: dict[str, Any] = json.loads((GOLDEN / f"{name}.json").read_text())
    for case in data["cases"]:
        case.setdefault("end_id", data["end_id"])
    return data


@pytest.fixture(scope="session")
def checkpoint(tmp_path_factory) -> Callable[[str], Path]:
    """The Hugging Face directory of a golden variant, rebuilt from its seed (once per session)."""
    built: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in built:
            variant: Variant = BY_NAME[name]
            built[name] = variant.save(tmp_path_factory.mktemp("hf") / name)
        return built[name]

    return get


@pytest.fixture(scope="session")
def converted(tmp_path_factory, checkpoint) -> Callable[..., Path]:
    """``tritonft convert`` output ``OUT/<tp>-gpu`` of a golden variant (once per session per tp and dtype)."""
    done: dict[tuple[str, int, str], Path] = {}

    def get(name: str, tp: int, dtype: str = "fp32") -> Path:
        key = (name, tp, dtype)
        if key not in done:
            out = tmp_path_factory.mktemp(f"ft-{name}-{tp}-{dtype}")
            code = main(
                ["convert", "--input", str(checkpoint(name)), "--output", str(out), "--tp", str(tp), "--dtype", dtype]
            )
            assert code == 0, f"tritonft convert failed for {key}"
            done[key] = out / f"{tp}-gpu"
        return done[key]

    return get
