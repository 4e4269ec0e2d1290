"""Repository-checker rules for ONNX models (``platform: onnxruntime_onnx`` and its Python-backend stand-in).

Called by :func:`tritonft.repo.check.check_repository` for each such model directory. With the model file present
(always in the conversion Job: ``require_checkpoint``) the graph's own inputs and outputs — names, element types,
ranks and fixed sizes — must be what ``config.pbtxt`` declares (the batch axis is the graph's first dimension when
``max_batch_size > 0``), and the file must be the one the provenance manifest (``tritonft-encoder.json``) records.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from tritonclient.grpc import model_config_pb2 as mc

ENGINE_PARAMETER = "tritonft_engine"
PYTHON_ENGINE = "onnxruntime-python"
PROVENANCE_FILE = "tritonft-encoder.json"
MODEL_FILE = "model.onnx"

_ONNX_TO_TRITON = {
    1: mc.TYPE_FP32,
    10: mc.TYPE_FP16,
    7: mc.TYPE_INT64,
    6: mc.TYPE_INT32,
    8: mc.TYPE_STRING,
    9: mc.TYPE_BOOL,
}
"""onnx.TensorProto element types -> Triton data types."""


def is_onnx_model(config: mc.ModelConfig) -> bool:
    if config.platform == "onnxruntime_onnx" or config.backend == "onnxruntime":
        return True
    return (
        config.backend == "python"
        and ENGINE_PARAMETER in config.parameters
        and config.parameters[ENGINE_PARAMETER].string_value == PYTHON_ENGINE
    )


def _graph_io(path: Path) -> tuple[dict[str, tuple[int, list[int]]], dict[str, tuple[int, list[int]]]]:
    import onnx

    model = onnx.load(str(path), load_external_data=False)

    def describe(values: Any) -> dict[str, tuple[int, list[int]]]:
        return {
            v.name: (
                v.type.tensor_type.elem_type,
                [d.dim_value if d.HasField("dim_value") else -1 for d in v.type.tensor_type.shape.dim],
            )
            for v in values
        }

    initializers = {t.name for t in model.graph.initializer}
    return describe([v for v in model.graph.input if v.name not in initializers]), describe(model.graph.output)


def onnx_model_problems(
    directory: Path, config: mc.ModelConfig, versions: list[str], require_checkpoint: bool
) -> list[str]:
    label = f"{directory.name}/config.pbtxt"
    problems: list[str] = []
    if config.max_batch_size > 0 and not config.HasField("dynamic_batching"):
        problems.append(f"{label}: no dynamic_batching (requests would run one by one)")
    for version in versions:
        path = directory / version / MODEL_FILE
        if not path.is_file():
            if require_checkpoint:
                problems.append(f"{directory.name}/{version}: no {MODEL_FILE}")
            continue
        try:
            inputs, outputs = _graph_io(path)
        except Exception as exc:
            problems.append(f"{directory.name}/{version}/{MODEL_FILE}: not a readable ONNX model ({exc})")
            continue
        for kind, declared, graph in (("input", config.input, inputs), ("output", config.output, outputs)):
            problems += _io_problems(label, kind, list(declared), graph, config.max_batch_size > 0)
        problems += _provenance_problems(directory, version, path, require_checkpoint)
    return problems


def _io_problems(
    label: str, kind: str, declared: list[Any], graph: dict[str, tuple[int, list[int]]], batched: bool
) -> list[str]:
    problems = []
    names = {d.name for d in declared}
    for name in sorted(set(graph) - names):
        problems.append(f"{label}: the model's {kind} {name!r} is not declared")
    for item in declared:
        if item.name not in graph:
            problems.append(f"{label}: {kind} {item.name!r} is not an {kind} of {MODEL_FILE} (it has {sorted(graph)})")
            continue
        elem, dims = graph[item.name]
        if _ONNX_TO_TRITON.get(elem) != item.data_type:
            problems.append(
                f"{label}: {kind} {item.name!r} is {mc.DataType.Name(item.data_type)} but {MODEL_FILE} has "
                f"element type {elem}"
            )
        model_dims = dims[1:] if batched else dims
        want = list(item.reshape.shape) if item.HasField("reshape") else list(item.dims)
        if len(model_dims) != len(want) or any(
            m != -1 and w not in (-1, m) for m, w in zip(model_dims, want, strict=False)
        ):
            problems.append(f"{label}: {kind} {item.name!r} dims {list(item.dims)} but {MODEL_FILE} has {model_dims}")
    return problems


def _provenance_problems(directory: Path, version: str, path: Path, require_checkpoint: bool) -> list[str]:
    provenance = directory / PROVENANCE_FILE
    if not provenance.is_file():
        return []
    try:
        recorded = json.loads(provenance.read_text())["model"]
    except (OSError, ValueError, KeyError) as exc:
        return [f"{directory.name}/{PROVENANCE_FILE}: unreadable ({exc})"]
    where = f"{directory.name}/{version}/{MODEL_FILE}"
    if path.stat().st_size != recorded.get("size"):
        return [f"{where}: {path.stat().st_size} bytes, the conversion's manifest records {recorded.get('size')}"]
    if require_checkpoint and hashlib.sha256(path.read_bytes()).hexdigest() != recorded.get("sha256"):
        return [f"{where}: sha256 differs from the conversion's manifest (a different or damaged file)"]
    return []
