"""The static parts of the model repository: ``model_repo/`` at the project root.

``model_repo/<family>/{fastertransformer,ensemble}/config.pbtxt`` and ``model_repo/shared/{pre,post}processing/``
(config template + ``1/model.py``). Templates are partial ``ModelConfig`` messages in protobuf text format; they
are parsed with Triton's own schema, so a typo in a template fails loudly here.

The directory is found inside the installed package (``tritonft/model_repo``, put there by the wheel build) or
next to the ``tritonft`` package in a source checkout; ``TRITONFT_MODEL_REPO_TEMPLATES`` overrides both.
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

from google.protobuf import text_format  # type: ignore[import-untyped]  # no types-protobuf in the lock
from tritonclient.grpc import model_config_pb2 as mc

from tritonft.errors import UserError
from tritonft.spec import Family

TEMPLATES_ENV = "TRITONFT_MODEL_REPO_TEMPLATES"


def templates_dir() -> Path:
    """The ``model_repo/`` directory; ``UserError`` when it cannot be found."""
    override = os.environ.get(TEMPLATES_ENV)
    package = Path(__file__).resolve().parents[1]
    bundled = package / "model_repo"
    path = Path(override) if override else bundled if bundled.is_dir() else package.parent / "model_repo"
    if not (path / "shared").is_dir():
        raise UserError(
            f"model repository templates not found at {path}; set {TEMPLATES_ENV} to the project's model_repo/ "
            "directory"
        )
    return path


@cache
def _read(path: Path) -> bytes:
    return path.read_bytes()


def template_bytes(relative: str) -> bytes:
    """Raw bytes of a template file (e.g. ``shared/preprocessing/1/model.py``)."""
    return _read(templates_dir() / relative)


def template_config(relative: str) -> mc.ModelConfig:
    """A fresh ``ModelConfig`` parsed from a template ``config.pbtxt``."""
    config = mc.ModelConfig()
    text_format.Parse(template_bytes(relative).decode("utf-8"), config)
    return config


def family_dir(family: Family) -> str:
    return str(family)
