"""The repository checker's rules for a ``backend: "vllm"`` model: NVIDIA's contract and nothing else (pure).

Used by :func:`tritonft.repo.check.check_repository` (``tritonft repo``, ``synth``, the conversion Job): the
config names only the backend's inputs, outputs and parameters with their types and dims (and, besides them, the
judge's reference that the judge reads: ``tritonft_judge_reference``)
(:mod:`tritonft.engines.vllm.contract`), is decoupled with ``max_batch_size: 0``, and every version directory holds a
``model.json`` that is a JSON object naming the ``model`` to load.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tritonft.engines.vllm.contract import ENGINE_ARGS_FILE, INPUTS, OUTPUTS, PARAMETERS
from tritonft.probe.judge_reference import REFERENCE_PARAMETER, JudgeReference


def _type_name(config: Any, value: int) -> str:
    return str(type(config).DESCRIPTOR.fields_by_name["input"].message_type.fields_by_name["data_type"]
               .enum_type.values_by_number[value].name)  # fmt: skip


def vllm_model_problems(directory: Path, config: Any, versions: Sequence[str]) -> list[str]:
    """What in ``directory``'s vLLM model breaks the backend's contract (empty when nothing does)."""
    label = f"{directory.name}/config.pbtxt"
    problems: list[str] = []
    if not config.model_transaction_policy.decoupled:
        problems.append(f"{label}: the vLLM backend needs model_transaction_policy {{ decoupled: true }}")
    if config.max_batch_size != 0:
        problems.append(f"{label}: max_batch_size {config.max_batch_size}: vLLM batches itself (set 0)")
    contract = {
        "input": {t.name: (t.data_type, t.dims) for t in INPUTS},
        "output": {t.name: (t.data_type, t.dims) for t in OUTPUTS},
    }
    for kind, tensors in (("input", config.input), ("output", config.output)):
        for tensor in tensors:
            expected = contract[kind].get(tensor.name)
            if expected is None:
                problems.append(
                    f"{label}: {kind} {tensor.name!r} is not one of the vLLM backend's: {', '.join(contract[kind])}"
                )
                continue
            found = (_type_name(config, tensor.data_type), tuple(tensor.dims))
            if found != expected:
                problems.append(f"{label}: {kind} {tensor.name!r} is {found}, the vLLM backend's is {expected}")
    unknown = sorted(set(config.parameters) - set(PARAMETERS) - {REFERENCE_PARAMETER})
    if unknown:
        problems.append(f"{label}: parameters {unknown} are not read by the vLLM backend ({', '.join(PARAMETERS)})")
    if REFERENCE_PARAMETER in config.parameters:
        try:
            JudgeReference.from_json(config.parameters[REFERENCE_PARAMETER].string_value)
        except (KeyError, TypeError, ValueError) as exc:
            problems.append(f"{label}: parameter {REFERENCE_PARAMETER} is not a judge reference ({exc})")
    for version in versions:
        path = directory / version / ENGINE_ARGS_FILE
        try:
            args = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            problems.append(f"{directory.name}/{version}/{ENGINE_ARGS_FILE}: not readable JSON ({exc})")
            continue
        if not isinstance(args, dict) or not isinstance(args.get("model"), str) or not args["model"]:
            problems.append(f"{directory.name}/{version}/{ENGINE_ARGS_FILE}: must be an object naming the 'model'")
    return problems
