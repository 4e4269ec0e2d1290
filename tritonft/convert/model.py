"""From a model directory's ``config.json`` to the family and its plan (pure decisions, one entry point)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tritonft.convert import gpt2, gptj, t5
from tritonft.convert.plan import Plan, Shape
from tritonft.errors import UserError
from tritonft.spec import Family

MODEL_TYPES: dict[str, Family] = {"t5": Family.T5, "mt5": Family.T5, "gpt2": Family.GPT2, "gptj": Family.GPTJ}
"""config.json ``model_type`` -> family. mT5 has T5's architecture and tensor names."""

CONFIG_FILE = "config.json"


def load_config(directory: Path) -> dict[str, Any]:
    path = directory / CONFIG_FILE
    try:
        config = json.loads(path.read_text())
    except FileNotFoundError as exc:
        raise UserError(f"{path} is missing; --input must be a Hugging Face model directory with config.json") from exc
    except (OSError, ValueError) as exc:
        raise UserError(f"{path} is not readable JSON ({exc}); re-download the model") from exc
    if not isinstance(config, dict):
        raise UserError(f"{path} must hold a JSON object")
    return config


def detect_family(config: Mapping[str, Any], requested: Family | None) -> Family:
    """``--family`` when given (it must agree with a known ``model_type``), else from ``model_type``."""
    model_type = config.get("model_type")
    detected = MODEL_TYPES.get(str(model_type)) if model_type is not None else None
    if requested is not None:
        if detected is not None and detected is not requested:
            raise UserError(
                f"--family {requested} contradicts config.json model_type = {model_type!r} ({detected}); "
                "drop --family or fix the input directory"
            )
        return requested
    if detected is None:
        raise UserError(
            f"config.json model_type = {model_type!r} is not a supported family "
            f"(supported model_type values: {', '.join(MODEL_TYPES)}); pass --family to override"
        )
    return detected


def build_plan(family: Family, config: Mapping[str, Any], shapes: Mapping[str, Shape], tp: int) -> Plan:
    if tp < 1:
        raise UserError(f"--tp {tp} must be a positive integer")
    builder = {Family.T5: t5.plan, Family.GPT2: gpt2.plan, Family.GPTJ: gptj.plan}[family]
    return builder(config, shapes, tp)
