"""Serving engines, chosen by the model's family (see :mod:`tritonft.engines.base` for the seam).

Registered: FasterTransformer (T5, GPT-2, GPT-J), ONNX Runtime (BERT encoders) and vLLM (the Llama family).
Another engine is a package under ``tritonft/engines/`` whose object satisfies
:class:`~tritonft.engines.base.ServingEngine`, its families added to :class:`tritonft.spec.Family`, and one entry in
:data:`ENGINES`.
"""

from __future__ import annotations

import json
from pathlib import Path

from tritonft.engines.base import ServingEngine
from tritonft.engines.fastertransformer import ENGINE as FASTERTRANSFORMER
from tritonft.engines.onnxruntime import ENGINE as ONNXRUNTIME
from tritonft.engines.vllm.engine import ENGINE as VLLM
from tritonft.errors import UserError
from tritonft.spec import Family

__all__ = [
    "ENGINES",
    "FASTERTRANSFORMER",
    "ONNXRUNTIME",
    "VLLM",
    "ServingEngine",
    "engine_for",
    "engine_for_checkpoint",
]

ENGINES: tuple[ServingEngine, ...] = (FASTERTRANSFORMER, ONNXRUNTIME, VLLM)
"""Every registered engine; each family belongs to exactly one."""


def engine_for(family: Family | str) -> ServingEngine:
    """The engine that serves ``family``."""
    for engine in ENGINES:
        if family in engine.families:
            return engine
    served = ", ".join(sorted(str(f) for e in ENGINES for f in e.families))
    raise UserError(f"no serving engine for model family {str(family)!r}; the families served are {served}")


def engine_for_checkpoint(input_dir: Path, requested: Family | None = None) -> ServingEngine:
    """The engine that converts the Hugging Face checkpoint in ``input_dir``: the requested family's, else the one
    whose ``model_type`` values include ``config.json``'s. A missing or unreadable ``config.json`` is left to the
    converter, which names the file and the fix."""
    if requested is not None:
        return engine_for(requested)
    try:
        config = json.loads((input_dir / "config.json").read_text())
    except (OSError, ValueError):
        return ENGINES[0]
    if not isinstance(config, dict):
        return ENGINES[0]
    model_type = config.get("model_type")
    for engine in ENGINES:
        if model_type in engine.model_types:
            return engine
    known = ", ".join(t for e in ENGINES for t in e.model_types)
    raise UserError(
        f"config.json model_type = {model_type!r} is not a supported family "
        f"(supported model_type values: {known}); pass --family to override"
    )
