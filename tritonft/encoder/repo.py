"""The Triton model repository of one encoder (pure rendering + an atomic writer).

For a model named ``NAME`` (``tritonft repo`` renders FT models' repositories; this is the encoder's)::

    NAME/                  ensemble: text_input [1] BYTES -> embedding [H] FP32 (embed) or
                           label [1] BYTES + scores [C] FP32 + logits [C] FP32 (classify); num_tokens [1] INT32
    NAME-tokenizer/        Python backend: text -> input_ids, attention_mask, token_type_ids [-1] INT64, num_tokens
                           (1/model.py, 1/tritonft/encoder/tokenize.py, 1/tokenizer.json)
    NAME-onnx/             the converted 1/model.onnx, with pooling + normalisation (or the classifier head,
                           softmax and label lookup) inside the graph: no Python step after the model
    NAME-onnx/tritonft-encoder.json   the conversion's manifest (provenance: the checker compares it)

``NAME-onnx`` is served by Triton's ONNX Runtime backend (``platform: onnxruntime_onnx``, dynamic batching, one
instance group of ``KIND_GPU`` or ``KIND_CPU``; on a GPU with fp16 the TensorRT execution accelerator in FP16, as
seed 004's TensorRT path). With ``engine="python"`` the same directory is served by a Python-backend model running
the same ``model.onnx`` with the ``onnxruntime`` package (:mod:`tritonft.encoder.triton_onnx_model`): what a
Triton without the ONNX Runtime backend (this project's CPU test server) serves.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from google.protobuf import text_format  # type: ignore[import-untyped]  # no types-protobuf in the lock
from tritonclient.grpc import model_config_pb2 as mc

import tritonft
from tritonft.encoder.convert import MODEL_FILE, read_manifest
from tritonft.encoder.graph import INPUTS
from tritonft.errors import UserError
from tritonft.repo.naming import MODEL_NAME_PATTERN, VERSION

PACKAGE_ROOT = Path(tritonft.__file__).resolve().parent
TOKENIZER_PACKAGE_FILES = ("__init__.py", "encoder/__init__.py", "encoder/tokenize.py")
"""The modules of ``tritonft`` the tokenizer model imports inside Triton (numpy + tokenizers only)."""
PROVENANCE_FILE = "tritonft-encoder.json"
ENGINE_PARAMETER = "tritonft_engine"
PYTHON_ENGINE = "onnxruntime-python"
TEXT_INPUT = "text_input"
NUM_TOKENS = "num_tokens"
HEADER = (
    "# Rendered by tritonft.encoder.repo for the encoder {name!r} from its conversion's manifest.json.\n"
    "# Do not edit: re-render instead.\n"
)


class OnnxEngine(StrEnum):
    ONNXRUNTIME = "onnxruntime"
    """Triton's ONNX Runtime backend (production)."""
    PYTHON = "python"
    """The Python-backend stand-in running the same model.onnx with the onnxruntime package (CPU)."""


@dataclass(frozen=True)
class EncoderNames:
    ensemble: str
    tokenizer: str
    onnx: str

    @classmethod
    def of(cls, name: str) -> EncoderNames:
        return cls(ensemble=name, tokenizer=f"{name}-tokenizer", onnx=f"{name}-onnx")


@dataclass(frozen=True)
class EncoderServing:
    """How one encoder is served (the serving half of its model spec)."""

    name: str
    max_batch_size: int = 32
    max_queue_delay_us: int = 0
    instances: int = 1
    gpu: bool = False
    """Instances on the GPU (``KIND_GPU``) or the CPU (``KIND_CPU``; a model asking for no GPU)."""
    engine: OnnxEngine = OnnxEngine.ONNXRUNTIME
    tensorrt: bool = True
    """On a GPU: the TensorRT execution accelerator (FP16 when the conversion is fp16)."""
    intra_op_threads: int = 0
    """ONNX Runtime intra-op threads per instance (0 = its default: one per core)."""

    def problems(self) -> list[str]:
        found = []
        if not MODEL_NAME_PATTERN.match(self.name):
            found.append(f"name {self.name!r} must match {MODEL_NAME_PATTERN.pattern}")
        if self.max_batch_size < 1:
            found.append(f"max_batch_size {self.max_batch_size} must be at least 1")
        if self.max_queue_delay_us < 0:
            found.append(f"max_queue_delay_us {self.max_queue_delay_us} must not be negative")
        if self.instances < 1:
            found.append(f"instances {self.instances} must be at least 1")
        if self.intra_op_threads < 0:
            found.append(f"intra_op_threads {self.intra_op_threads} must not be negative")
        if self.gpu and self.engine is OnnxEngine.PYTHON:
            found.append("the Python-backend ONNX stand-in runs on the CPU; it cannot be placed on a GPU")
        return found


def _tensor(collection: Any, name: str, data_type: int, dims: list[int], *, optional: bool = False) -> None:
    item = collection.add()
    item.name = name
    item.data_type = data_type
    item.dims.extend(dims)
    if optional:
        item.optional = True


def _outputs(manifest: Mapping[str, Any]) -> list[tuple[str, int, list[int]]]:
    width = int(manifest["output_width"])
    if manifest["task"] == "embed":
        return [("embedding", mc.TYPE_FP32, [width])]
    return [("logits", mc.TYPE_FP32, [width]), ("scores", mc.TYPE_FP32, [width]), ("label", mc.TYPE_STRING, [1])]


def _instances(config: mc.ModelConfig, count: int, gpu: bool) -> None:
    group = config.instance_group.add()
    group.count = count
    group.kind = mc.ModelInstanceGroup.KIND_GPU if gpu else mc.ModelInstanceGroup.KIND_CPU


def tokenizer_config(serving: EncoderServing, manifest: Mapping[str, Any]) -> mc.ModelConfig:
    config = mc.ModelConfig()
    config.name = EncoderNames.of(serving.name).tokenizer
    config.backend = "python"
    config.max_batch_size = serving.max_batch_size
    _tensor(config.input, TEXT_INPUT, mc.TYPE_STRING, [1])
    for name in INPUTS:
        _tensor(config.output, name, mc.TYPE_INT64, [-1])
    _tensor(config.output, NUM_TOKENS, mc.TYPE_INT32, [1])
    config.dynamic_batching.SetInParent()
    _instances(config, serving.instances, gpu=False)
    config.parameters["max_seq_length"].string_value = str(manifest["max_seq_length"])
    return config


def onnx_config(serving: EncoderServing, manifest: Mapping[str, Any]) -> mc.ModelConfig:
    config = mc.ModelConfig()
    config.name = EncoderNames.of(serving.name).onnx
    if serving.engine is OnnxEngine.PYTHON:
        config.backend = "python"
        config.parameters[ENGINE_PARAMETER].string_value = PYTHON_ENGINE
    else:
        config.platform = "onnxruntime_onnx"
    config.max_batch_size = serving.max_batch_size
    for name in INPUTS:
        _tensor(config.input, name, mc.TYPE_INT64, [-1])
    for name, data_type, dims in _outputs(manifest):
        _tensor(config.output, name, data_type, dims)
    config.dynamic_batching.max_queue_delay_microseconds = serving.max_queue_delay_us
    _instances(config, serving.instances, serving.gpu)
    if serving.intra_op_threads:
        key = "intra_op_threads" if serving.engine is OnnxEngine.PYTHON else "intra_op_thread_count"
        config.parameters[key].string_value = str(serving.intra_op_threads)
    if serving.gpu and serving.tensorrt:
        accelerator = config.optimization.execution_accelerators.gpu_execution_accelerator.add()
        accelerator.name = "tensorrt"
        accelerator.parameters["precision_mode"] = "FP16" if manifest["dtype"] == "fp16" else "FP32"
        accelerator.parameters["max_workspace_size_bytes"] = str(1 << 30)
    return config


def ensemble_config(serving: EncoderServing, manifest: Mapping[str, Any]) -> mc.ModelConfig:
    names = EncoderNames.of(serving.name)
    config = mc.ModelConfig()
    config.name = names.ensemble
    config.platform = "ensemble"
    config.max_batch_size = serving.max_batch_size
    _tensor(config.input, TEXT_INPUT, mc.TYPE_STRING, [1])
    outputs = _outputs(manifest)
    for name, data_type, dims in outputs:
        _tensor(config.output, name, data_type, dims)
    _tensor(config.output, NUM_TOKENS, mc.TYPE_INT32, [1])
    tokenize = config.ensemble_scheduling.step.add()
    tokenize.model_name = names.tokenizer
    tokenize.model_version = -1
    tokenize.input_map[TEXT_INPUT] = TEXT_INPUT
    for name in INPUTS:
        tokenize.output_map[name] = name
    tokenize.output_map[NUM_TOKENS] = NUM_TOKENS
    model = config.ensemble_scheduling.step.add()
    model.model_name = names.onnx
    model.model_version = -1
    for name in INPUTS:
        model.input_map[name] = name
    for name, _, _ in outputs:
        model.output_map[name] = name
    return config


def render(config: mc.ModelConfig, name: str) -> bytes:
    body: str = text_format.MessageToString(config, use_short_repeated_primitives=True)
    return (HEADER.format(name=name) + body).encode("utf-8")


def render_encoder_files(serving: EncoderServing, manifest: Mapping[str, Any]) -> dict[str, bytes]:
    """Every file of the repository except ``model.onnx`` and ``tokenizer.json``, by path relative to the root."""
    problems = serving.problems()
    if problems:
        raise UserError(f"cannot render the Triton repository for encoder {serving.name!r}", problems)
    names = EncoderNames.of(serving.name)
    files = {
        f"{names.ensemble}/config.pbtxt": render(ensemble_config(serving, manifest), serving.name),
        f"{names.ensemble}/{VERSION}/.keep": b"",
        f"{names.tokenizer}/config.pbtxt": render(tokenizer_config(serving, manifest), serving.name),
        f"{names.tokenizer}/{VERSION}/model.py": (PACKAGE_ROOT / "encoder" / "triton_tokenizer_model.py").read_bytes(),
        f"{names.onnx}/config.pbtxt": render(onnx_config(serving, manifest), serving.name),
        f"{names.onnx}/{PROVENANCE_FILE}": (json.dumps(dict(manifest), indent=1) + "\n").encode(),
    }
    for relative in TOKENIZER_PACKAGE_FILES:
        files[f"{names.tokenizer}/{VERSION}/tritonft/{relative}"] = (PACKAGE_ROOT / relative).read_bytes()
    if serving.engine is OnnxEngine.PYTHON:
        files[f"{names.onnx}/{VERSION}/model.py"] = (PACKAGE_ROOT / "encoder" / "triton_onnx_model.py").read_bytes()
    return dict(sorted(files.items()))


def write_encoder_repository(serving: EncoderServing, converted: Path, tokenizer_dir: Path, out_dir: Path) -> list[str]:
    """Write the three models into ``out_dir`` (a Triton repository root, maybe shared); returns their names.

    ``converted`` is the conversion's ``OUT/onnx`` (its ``model.onnx`` is copied, its manifest rendered from),
    ``tokenizer_dir`` the checkpoint directory holding ``tokenizer.json``. Each model directory is staged next to
    its target and renamed into place (models before the ensemble), so Triton never sees a half-written one.
    """
    manifest = read_manifest(converted)
    model_file = converted / MODEL_FILE
    if not model_file.is_file() or model_file.stat().st_size != manifest["model"]["size"]:
        raise UserError(f"{model_file} is missing or not the size its manifest records; convert again")
    tokenizer_json = tokenizer_dir / "tokenizer.json"
    if not tokenizer_json.is_file():
        raise UserError(f"{tokenizer_json} is missing; pass the Hugging Face model directory (it has tokenizer.json)")
    files = render_encoder_files(serving, manifest)
    names = EncoderNames.of(serving.name)
    out_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".tritonft-{serving.name}-", dir=out_dir))
    try:
        for relative, content in files.items():
            path = staging / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)
        shutil.copyfile(tokenizer_json, staging / names.tokenizer / VERSION / "tokenizer.json")
        (staging / names.onnx / VERSION).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(model_file, staging / names.onnx / VERSION / MODEL_FILE)
        order = [names.tokenizer, names.onnx, names.ensemble]
        for model in order:
            target = out_dir / model
            if target.exists():
                trash = staging / f"{model}.old"
                target.rename(trash)
            os.rename(staging / model, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return order


def make_python_engine(model_dir: Path) -> None:
    """Rewrite a rendered ``NAME-onnx`` model for Triton's ONNX Runtime backend into the Python-backend stand-in, in
    place: the same ``1/model.onnx`` run by the ``onnxruntime`` package, for a Triton without that backend (this
    project's test server). Inputs, outputs, batching and instance counts are kept as rendered; GPU instances become
    CPU ones and the TensorRT accelerator goes (both need a GPU)."""
    path = model_dir / "config.pbtxt"
    config = text_format.Parse(path.read_text(encoding="utf-8"), mc.ModelConfig())
    if config.platform != "onnxruntime_onnx":
        raise ValueError(f"{model_dir} is not a rendered ONNX Runtime model (platform {config.platform!r})")
    config.ClearField("platform")
    config.backend = "python"
    config.parameters[ENGINE_PARAMETER].string_value = PYTHON_ENGINE
    if "intra_op_thread_count" in config.parameters:
        config.parameters["intra_op_threads"].string_value = config.parameters["intra_op_thread_count"].string_value
        del config.parameters["intra_op_thread_count"]
    for group in config.instance_group:
        group.kind = mc.ModelInstanceGroup.KIND_CPU
        del group.gpus[:]
    config.ClearField("optimization")
    path.write_text(text_format.MessageToString(config, use_short_repeated_primitives=True), encoding="utf-8")
    (model_dir / VERSION).mkdir(exist_ok=True)
    shutil.copyfile(PACKAGE_ROOT / "encoder" / "triton_onnx_model.py", model_dir / VERSION / "model.py")
