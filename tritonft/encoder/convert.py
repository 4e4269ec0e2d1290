"""``tritonft convert`` for encoders: a BERT checkpoint -> ``OUT/onnx/{model.onnx, manifest.json}``.

Same guarantees as the FasterTransformer converter (:mod:`tritonft.convert.writer`, whose lock, leftover clean-up,
source identities and directory swap it reuses):

1. everything is validated first (config.json, the sentence-transformers files, every tensor's presence and
   shape) — a failure raises :class:`~tritonft.errors.UserError` before anything is created;
2. an exclusive lock ``OUT/.onnx.lock`` serialises concurrent runs; leftovers of killed runs are removed;
3. a rerun whose ``manifest.json`` describes the same conversion (converter version, task, dtype, pooling,
   normalisation, limits, labels, same source files) and whose ``model.onnx`` has its recorded size does nothing;
4. the model is written into ``OUT/.onnx.partial-<pid>``, **verified** there (ONNX's checker, then one inference
   with ONNX Runtime on a two-sentence batch: output names, shapes, finite values, unit norm when normalised),
   then renamed to ``OUT/onnx``. Triton never sees a half-written or unloadable model.

``manifest.json`` (``schema = "tritonft.onnx-encoder/1"``)::

    {
      "schema": "tritonft.onnx-encoder/1",
      "converter_version": "0.1.0+onnx1",
      "family": "bert", "task": "embed" | "classify", "dtype": "fp32" | "fp16", "opset": 17,
      "model_type": "roberta", "position_offset": 2,      # RoBERTa only
      "pooling": "mean" | "cls", "normalize": true,       # task embed
      "labels": ["NEGATIVE", "POSITIVE"],                 # task classify (id2label order)
      "max_seq_length": 256, "hidden_size": 384, "output_width": 384,
      "architecture": {...},                              # BertArchitecture fields
      "inputs": ["input_ids", "attention_mask", "token_type_ids"], "outputs": ["embedding"],
      "model": {"file": "model.onnx", "sha256": "...", "size": 90279861},
      "source": {"hash": "sha256", "files": {...}},       # see tritonft.convert.sources
      "ignored_tensors": ["pooler.dense.weight", ...]     # checkpoint tensors the graph does not read
    }
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tritonft import __version__
from tritonft.convert.sources import SourceHash, SourceIdentities, sources_unchanged
from tritonft.convert.staging import (
    locked,
    read_existing_manifest,
    remove_leftovers,
    staged_directory,
    write_text,
)
from tritonft.convert.tensors import cast, open_checkpoint
from tritonft.encoder.checkpoint import EncoderConfig, Pooling, Task, read_encoder_config
from tritonft.encoder.graph import INPUTS, OPSET, build_graph, outputs_of, required_tensors, shape_problems
from tritonft.errors import UserError
from tritonft.spec import WeightDType

SCHEMA = "tritonft.onnx-encoder/1"
LAYOUT_VERSION = 1
CONVERTER_VERSION = f"{__version__}+onnx{LAYOUT_VERSION}"
OUTPUT_DIR = "onnx"
MODEL_FILE = "model.onnx"
MANIFEST = "manifest.json"


@dataclass(frozen=True)
class EncoderRequest:
    input_dir: Path
    output_dir: Path
    dtype: WeightDType = WeightDType.FP32
    task: Task | None = None
    pooling: Pooling | None = None
    normalize: bool | None = None
    max_seq_length: int | None = None
    fsync: bool = False
    source_hash: SourceHash = SourceHash.SHA256
    optimize: bool = False
    """Run ONNX Runtime's transformer optimizer (fused Attention, SkipLayerNormalization, BiasGelu) and keep its
    graph when it answers the verification batch like the plain one."""


@dataclass
class EncoderResult:
    target: Path
    manifest: dict[str, Any]
    skipped: bool
    notes: list[str] = field(default_factory=list)


def expected_manifest(config: EncoderConfig, request: EncoderRequest, ignored: list[str]) -> dict[str, Any]:
    manifest: dict[str, Any] = {
        "schema": SCHEMA,
        "converter_version": CONVERTER_VERSION,
        "family": "bert",
        "task": str(config.task),
        "dtype": str(request.dtype),
        "opset": OPSET,
    }
    if config.model_type != "bert":  # absent for BERT: its manifests stay what earlier versions wrote
        manifest |= {"model_type": config.model_type, "position_offset": config.position_offset}
    if config.task is Task.EMBED:
        manifest |= {"pooling": str(config.pooling), "normalize": config.normalize}
    else:
        manifest["labels"] = list(config.labels)
    manifest |= {
        "max_seq_length": config.max_seq_length,
        "hidden_size": config.architecture.hidden_size,
        "output_width": config.output_width,
        "architecture": asdict(config.architecture),
        "inputs": list(INPUTS),
        "outputs": list(outputs_of(config.task)),
        "model": {"file": MODEL_FILE},
        "optimized": request.optimize,
        "ignored_tensors": ignored,
    }
    return manifest


_COMPARED = (
    "schema",
    "converter_version",
    "family",
    "model_type",
    "position_offset",
    "task",
    "dtype",
    "opset",
    "pooling",
    "normalize",
    "labels",
    "max_seq_length",
    "architecture",
    "optimized",
)


def read_manifest(converted: Path) -> dict[str, Any]:
    """The manifest of a conversion directory (``OUT/onnx``); ``UserError`` when it is not one."""
    path = converted / MANIFEST
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise UserError(
            f"{path} is missing or unreadable; point at the OUT/onnx directory of `tritonft convert`"
        ) from exc
    if not isinstance(manifest, dict) or manifest.get("schema") != SCHEMA:
        raise UserError(f"{path} is not an encoder conversion manifest (schema {SCHEMA})")
    return manifest


def convert_encoder(request: EncoderRequest, config_json: dict[str, Any]) -> EncoderResult:
    checkpoint = open_checkpoint(request.input_dir)
    config = read_encoder_config(
        request.input_dir,
        config_json,
        set(checkpoint.tensors),
        task=request.task,
        pooling=request.pooling,
        normalize=request.normalize,
        max_seq_length=request.max_seq_length,
    )
    problems = shape_problems(config, checkpoint.shapes)
    if problems:
        raise UserError(f"{request.input_dir} does not match its config.json for a BERT {config.task} model", problems)
    used = set(required_tensors(config))
    ignored = sorted(set(checkpoint.tensors) - used)
    expected = expected_manifest(config, request, ignored)
    target = request.output_dir / OUTPUT_DIR
    sources = [request.input_dir / name for name in config.sources] + list(checkpoint.files)
    notes = [
        f"task {config.task}"
        + (
            f", {config.pooling} pooling, normalize={config.normalize}"
            if config.task is Task.EMBED
            else f", labels {list(config.labels)}"
        )
    ]

    with locked(request.output_dir, target.name):
        remove_leftovers(request.output_dir, target.name)
        existing = read_existing_manifest(target, MANIFEST, SCHEMA, "tritonft encoder manifest")
        identities = SourceIdentities(request.input_dir, sources, request.source_hash)
        if existing is not None and _up_to_date(existing, expected, target, identities):
            return EncoderResult(target, existing, skipped=True, notes=notes)
        identities.start()
        with staged_directory(target, durable=request.fsync, on_abort=identities.abandon) as partial:
            model = build_graph(
                config,
                lambda name: cast(checkpoint.read(name), checkpoint.tensors[name].dtype, request.dtype),
                request.dtype,
                name=f"bert-{config.task}",
            )
            data = model.SerializeToString()
            del model
            (partial / MODEL_FILE).write_bytes(data)
            plain = verify_model(partial / MODEL_FILE, config)
            fused: dict[str, int] = {}
            if request.optimize:
                data, fused = optimize_model(partial / MODEL_FILE, config, request.dtype, plain)
            with (partial / MODEL_FILE).open("wb") as handle:
                handle.write(data)
                if request.fsync:
                    handle.flush()
                    os.fsync(handle.fileno())
            model_entry = {"file": MODEL_FILE, "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
            manifest = {**expected, "model": model_entry}
            if request.optimize:
                manifest["fused_operators"] = fused
            manifest["source"] = {"hash": str(request.source_hash), "files": identities.result()}
            write_text(partial / MANIFEST, json.dumps(manifest, indent=1) + "\n", request.fsync)
    return EncoderResult(target, manifest, skipped=False, notes=notes)


def _up_to_date(existing: dict[str, Any], expected: dict[str, Any], target: Path, sources: SourceIdentities) -> bool:
    if any(existing.get(key) != expected.get(key) for key in _COMPARED):
        return False
    model = target / MODEL_FILE
    if not model.is_file() or model.stat().st_size != existing.get("model", {}).get("size"):
        return False
    recorded: dict[str, dict[str, Any]] = existing.get("source", {}).get("files", {})
    return sources_unchanged(recorded, sources.stats(), sources.mode, sources.sha256_of)


OPTIMIZED_TOLERANCE = {WeightDType.FP32: 1e-4, WeightDType.FP16: 2e-2}
"""Largest difference allowed between the optimised graph's answer to the verification batch and the plain one's
(fused kernels sum in another order; measured 1.2e-7 in fp32 on all-MiniLM-L6-v2)."""


def optimize_model(
    path: Path, config: EncoderConfig, dtype: WeightDType, plain: np.ndarray[Any, Any]
) -> tuple[bytes, dict[str, int]]:
    """ONNX Runtime's transformer optimizer on ``path`` (fusions only, no hardware-specific rewrites, so the file
    runs on any execution provider); the optimised bytes and the count of each fused operator. Raises
    ``UserError`` if nothing fused or the optimised graph answers differently."""
    import logging

    from onnxruntime.transformers.optimizer import optimize_model as ort_optimize

    logging.getLogger("onnxruntime.transformers").setLevel(logging.ERROR)  # "producer not pytorch" notes
    arch = config.architecture
    optimized = ort_optimize(
        str(path), model_type="bert", num_heads=arch.num_heads, hidden_size=arch.hidden_size, opt_level=0
    )
    fused = {k: int(v) for k, v in optimized.get_fused_operator_statistics().items() if v}
    if not fused.get("Attention"):
        raise UserError(
            f"ONNX Runtime's optimizer fused no attention in {path.name} ({fused}); convert without --optimize"
        )
    _keep_inputs(optimized.model)
    data: bytes = optimized.model.SerializeToString()
    path.write_bytes(data)
    answer = verify_model(path, config)
    difference = float(np.abs(answer - plain).max())
    if difference > OPTIMIZED_TOLERANCE[dtype]:
        raise UserError(
            f"the optimised graph answers the verification batch {difference:.2e} away from the plain one "
            f"(allowed {OPTIMIZED_TOLERANCE[dtype]:.0e}); convert without --optimize"
        )
    return data, fused


def _keep_inputs(model: Any) -> None:
    """Put back the inputs the optimizer dropped as unused (DistilBERT's ``token_type_ids``): every encoder graph
    takes the same three inputs, the contract of the tokenizer model and of ``config.pbtxt``."""
    from onnx import TensorProto, helper

    present = {i.name for i in model.graph.input}
    for name in INPUTS:
        if name not in present:
            model.graph.input.append(helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "sequence"]))


def verify_model(path: Path, config: EncoderConfig) -> np.ndarray[Any, Any]:
    """Load ``path`` with ONNX Runtime and run a two-sequence batch (one padded): raises ``UserError`` if the
    model does not load, names the wrong outputs, or answers with the wrong shape or non-finite values; returns the
    first output."""
    import onnxruntime as ort

    try:
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    except Exception as exc:
        raise UserError(f"the converted {path.name} does not load in ONNX Runtime: {exc}") from exc
    names = [o.name for o in session.get_outputs()]
    if names != list(outputs_of(config.task)):
        raise UserError(f"the converted {path.name} has outputs {names}, expected {list(outputs_of(config.task))}")
    ids = np.array([[101, 7592, 2088, 102], [101, 7592, 102, 0]], dtype=np.int64) % config.architecture.vocab_size
    mask = np.array([[1, 1, 1, 1], [1, 1, 1, 0]], dtype=np.int64)
    outputs = session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})
    first = np.asarray(outputs[0])
    if first.shape != (2, config.output_width) or not np.all(np.isfinite(first)):
        raise UserError(
            f"the converted {path.name} answered a test batch with shape {list(first.shape)} "
            f"(expected [2, {config.output_width}]) or non-finite values"
        )
    if config.task is Task.EMBED and config.normalize:
        norms = np.linalg.norm(first, axis=1)
        if not np.allclose(norms, 1.0, atol=1e-3):
            raise UserError(f"the converted {path.name} returned embeddings of norm {norms.tolist()}, expected 1")
    return first
