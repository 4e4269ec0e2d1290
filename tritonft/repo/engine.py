"""Which engine runs a rendered repository's model step (``tritonft repo --engine``).

* ``fastertransformer`` (default, production): the FT backend, on GPUs, in the server image.
* ``reference``: the same repository (ensemble, tokenizer models, the FT model's exact ``config.pbtxt`` inputs,
  outputs, batching and parameters) with the model step run by :mod:`tritonft.reference` on CPU as a Python-backend
  model: ``backend`` becomes ``python``, the parameter ``tritonft_engine: reference`` marks it, and ``1/`` gets
  ``model.py`` (:mod:`tritonft.reference.triton_model`) plus the numpy-only part of the ``tritonft`` package it
  imports (``1/tritonft/``, see :data:`REFERENCE_PACKAGE_FILES`). It reads the converted ``<TP>-gpu`` files from
  ``model_checkpoint_path`` exactly as FT does. It is for machines without a GPU (tests, the quick start, a
  laptop): a checking tool that generates real tokens, tens of tokens per second at small sizes, not a serving
  engine. It is deliberately not a stack setting: a deployed stack always serves FT.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

from google.protobuf import text_format  # type: ignore[import-untyped]  # no types-protobuf in the lock
from tritonclient.grpc import model_config_pb2 as mc

import tritonft
from tritonft.repo.naming import VERSION

ENGINE_PARAMETER = "tritonft_engine"
"""Parameter of the FT model's ``config.pbtxt`` naming the engine when it is not the FT backend."""

PACKAGE_ROOT = Path(tritonft.__file__).resolve().parent
REFERENCE_MODEL_SOURCE = PACKAGE_ROOT / "reference" / "triton_model.py"
REFERENCE_PACKAGE_FILES = (
    "__init__.py",
    "errors.py",
    "spec.py",
    "reference/__init__.py",
    "reference/checkpoint.py",
    "reference/decoding.py",
    "reference/layers.py",
    "reference/models.py",
    "reference/serving.py",
)
"""The modules of ``tritonft`` the reference engine imports inside Triton (numpy and the standard library only)."""


class Engine(StrEnum):
    """What runs the model step."""

    FASTERTRANSFORMER = "fastertransformer"
    REFERENCE = "reference"


def reference_config(ft: mc.ModelConfig) -> mc.ModelConfig:
    """The rendered FT model's config, run by the Python backend (everything else unchanged)."""
    config = mc.ModelConfig()
    config.CopyFrom(ft)
    config.backend = "python"
    config.parameters[ENGINE_PARAMETER].string_value = Engine.REFERENCE.value
    return config


def is_reference(config: mc.ModelConfig) -> bool:
    return (
        config.backend == "python"
        and ENGINE_PARAMETER in config.parameters
        and (config.parameters[ENGINE_PARAMETER].string_value == Engine.REFERENCE.value)
    )


def reference_files(ft_model: str) -> dict[str, bytes]:
    """The files the reference engine adds to the FT model directory ``ft_model`` (paths relative to the root)."""
    files = {f"{ft_model}/{VERSION}/model.py": REFERENCE_MODEL_SOURCE.read_bytes()}
    for relative in REFERENCE_PACKAGE_FILES:
        files[f"{ft_model}/{VERSION}/tritonft/{relative}"] = (PACKAGE_ROOT / relative).read_bytes()
    return files


def use_reference_engine(repository: Path) -> list[str]:
    """Switch every FT model of an already written repository to the reference engine, in place (a copy of a
    conversion Job's output served on a machine without a GPU); returns their names."""
    switched = []
    for config_path in sorted(repository.glob("*/config.pbtxt")):
        text = config_path.read_text(encoding="utf-8")
        config = text_format.Parse(text, mc.ModelConfig())
        if config.backend != Engine.FASTERTRANSFORMER.value:
            continue
        header = "".join(line + "\n" for line in text.splitlines() if line.startswith("#"))
        body = text_format.MessageToString(reference_config(config), use_short_repeated_primitives=True)
        config_path.write_text(header + body, encoding="utf-8")
        for relative, content in reference_files(config_path.parent.name).items():
            (repository / relative).parent.mkdir(parents=True, exist_ok=True)
            (repository / relative).write_bytes(content)
        switched.append(config_path.parent.name)
    return switched
