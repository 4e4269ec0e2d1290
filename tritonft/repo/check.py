"""Check a rendered Triton model repository before Triton sees it: ``check_repository(path) -> problems``.

Checks, for every model directory with a ``config.pbtxt``:

* the file parses with Triton's schema (no unknown field), its ``name`` is the directory name, a numeric version
  directory exists (Python models: with ``model.py``);
* FasterTransformer models follow the backend's rules (ft-format.md §6) and, when the converted checkpoint is in the
  repository, agree with its ``config.ini`` and ``<N>-gpu`` files on TP, family and weight dtype (the dtype is
  compared with the provenance spec file ``tritonft-spec.json`` written next to ``config.pbtxt``);
* vLLM models (``backend: "vllm"``): NVIDIA's backend contract only, ``model.json`` naming the model
  (:mod:`tritonft.engines.vllm.check`);
* ensembles: every step's model exists; each mapped name is an input/output of that model; every required input is
  fed; every tensor has exactly one producer whose dtype and dims match each consumer (``-1`` matches any size);
  optional ensemble inputs feed only optional step inputs; no step mixes tensors from different decoupled models;
  the ensemble's ``max_batch_size`` does not exceed its steps'.

With ``require_checkpoint`` (the conversion Job) missing weights and tokenizer files are problems too; without it
(``synth``, reviewing a PR) they are not.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from google.protobuf import text_format  # type: ignore[import-untyped]  # no types-protobuf in the lock
from tritonclient.grpc import model_config_pb2 as mc

from tritonft.encoder.check import is_onnx_model, onnx_model_problems
from tritonft.engines.vllm.check import vllm_model_problems
from tritonft.engines.vllm.contract import BACKEND as VLLM_BACKEND
from tritonft.repo.checkpoint import CONFIG_INI, CheckpointIni, checkpoint_dir_problems, ini_problems
from tritonft.repo.engine import is_reference
from tritonft.repo.naming import SPEC_FILE
from tritonft.repo.tokenization import find_tokenizer_files
from tritonft.spec import Family, ModelSpec

FT_BACKEND = "fastertransformer"
FT_REQUIRED_PARAMETERS = (
    "model_type",
    "tensor_para_size",
    "pipeline_para_size",
    "data_type",
    "model_checkpoint_path",
    "enable_custom_all_reduce",
)
FT_DATA_TYPES = ("fp32", "fp16", "bf16")
FT_INT8_MODEL_TYPES = ("GPT", "bert")
MODEL_TYPE_FAMILY = {family.ft_model_type: family for family in Family if family.is_fastertransformer}
"""FT's ``model_type`` parameter -> family (encoders are not FT models: tritonft.encoder.check checks them)."""


@dataclass
class Model:
    """One parsed model directory."""

    directory: Path
    config: mc.ModelConfig
    versions: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.directory.name}/config.pbtxt"

    @property
    def decoupled(self) -> bool:
        return bool(self.config.model_transaction_policy.decoupled)


def check_repository(path: Path | str, *, require_checkpoint: bool = False) -> list[str]:
    """Every problem found in the repository at ``path`` (empty list = OK)."""
    root = Path(path)
    if not root.is_dir():
        return [f"{root}: not a directory"]
    models: dict[str, Model] = {}
    problems: list[str] = []
    for directory in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        config_path = directory / "config.pbtxt"
        if not config_path.is_file():
            continue
        config = mc.ModelConfig()
        try:
            text_format.Parse(config_path.read_text(encoding="utf-8"), config)
        except (text_format.ParseError, UnicodeDecodeError) as exc:
            problems.append(f"{directory.name}/config.pbtxt: does not parse as a Triton ModelConfig: {exc}")
            continue
        versions = sorted((p.name for p in directory.iterdir() if p.is_dir() and p.name.isdigit()), key=int)
        models[directory.name] = Model(directory, config, versions)
    if not models and not problems:
        problems.append(f"{root}: no model directory with a config.pbtxt")
    for model in models.values():
        problems += _model_problems(model, root, require_checkpoint)
        if model.config.platform == "ensemble":
            problems += ensemble_problems(model, models)
    return problems


def _model_problems(model: Model, root: Path, require_checkpoint: bool) -> list[str]:
    config = model.config
    problems: list[str] = []
    if config.name and config.name != model.directory.name:
        problems.append(f"{model.label}: name {config.name!r} differs from its directory {model.directory.name!r}")
    is_ft = config.backend == FT_BACKEND or is_reference(config)  # the reference engine keeps FT's config
    is_onnx = is_onnx_model(config)  # encoders' ONNX step (or its Python-backend stand-in)
    # FT's weights and an encoder's model.onnx come from the conversion: a repository rendered without them (synth)
    # may lack their version directory unless the checkpoint is required.
    if not model.versions and (require_checkpoint or not (is_ft or is_onnx)):
        problems.append(f"{model.directory.name}: no version directory (e.g. {model.directory.name}/1/)")
    if config.backend == "python":
        for version in model.versions:
            version_dir = model.directory / version
            if not (version_dir / "model.py").is_file():
                problems.append(f"{model.directory.name}/{version}: no model.py")
            if require_checkpoint and not is_ft and not is_onnx and find_tokenizer_files(version_dir) is None:
                problems.append(f"{model.directory.name}/{version}: no tokenizer files")
    if is_ft:
        problems += ft_problems(model, root, require_checkpoint)
    if is_onnx:
        problems += onnx_model_problems(model.directory, config, model.versions, require_checkpoint)
    if config.backend == VLLM_BACKEND:
        problems += vllm_model_problems(model.directory, config, model.versions)
    return problems


def _parameter(config: mc.ModelConfig, key: str) -> str | None:
    return config.parameters[key].string_value if key in config.parameters else None


def ft_problems(model: Model, root: Path, require_checkpoint: bool) -> list[str]:
    """FasterTransformer backend rules (ft-format.md §6) and agreement with the checkpoint."""
    config, label = model.config, model.label
    problems: list[str] = []
    if len(config.instance_group) != 1 or config.instance_group[0].kind != mc.ModelInstanceGroup.KIND_CPU:
        problems.append(f"{label}: needs exactly one instance_group of kind KIND_CPU (the backend places GPUs)")
    for key in FT_REQUIRED_PARAMETERS:
        if not _parameter(config, key):
            problems.append(f"{label}: parameter {key!r} is missing or not a non-empty string_value")
    integers: dict[str, int] = {}
    for key in ("tensor_para_size", "pipeline_para_size", "enable_custom_all_reduce", "int8_mode"):
        value = _parameter(config, key)
        if value:
            try:
                integers[key] = int(value)
            except ValueError:
                problems.append(f"{label}: parameter {key!r} = {value!r} is not an integer")
    for key in ("tensor_para_size", "pipeline_para_size"):
        if integers.get(key, 1) < 1:
            problems.append(f"{label}: parameter {key!r} must be at least 1")
    data_type = _parameter(config, "data_type")
    if data_type and data_type not in FT_DATA_TYPES:
        problems.append(f"{label}: data_type {data_type!r} is not one of {', '.join(FT_DATA_TYPES)}")
    model_type = _parameter(config, "model_type") or ""
    if integers.get("int8_mode") and model_type not in FT_INT8_MODEL_TYPES:
        problems.append(f"{label}: int8_mode applies to GPT only, not {model_type!r}")
    # sequence_batching and dynamic_batching are one protobuf oneof, so the parser already refuses both at once.
    if config.HasField("sequence_batching") and config.max_batch_size != 1:
        problems.append(f"{label}: sequence_batching needs max_batch_size 1")
    shapes = {
        (tuple(b.target_name), tuple(b.source_input))
        for b in config.batch_input
        if b.kind == mc.BatchInput.BATCH_ITEM_SHAPE and b.data_type == mc.TYPE_INT32
    }
    for model_input in config.input:
        if model_input.allow_ragged_batch and ((f"{model_input.name}_item_shape",), (model_input.name,)) not in shapes:
            problems.append(
                f"{label}: ragged input {model_input.name!r} needs a batch_input BATCH_ITEM_SHAPE TYPE_INT32 "
                f"target {model_input.name}_item_shape"
            )
    tp = integers.get("tensor_para_size")
    if tp:
        problems += _checkpoint_problems(model, root, tp, MODEL_TYPE_FAMILY.get(model_type), require_checkpoint)
    return problems


def _local_checkpoint(model: Model, root: Path, checkpoint_path: str) -> Path:
    """Map the server-side ``model_checkpoint_path`` into this repository (via the FT model's directory name)."""
    parts = PurePosixPath(checkpoint_path).parts
    if model.directory.name in parts:
        return root.joinpath(*parts[parts.index(model.directory.name) :])
    return Path(checkpoint_path)


def _checkpoint_problems(
    model: Model, root: Path, tp: int, family: Family | None, require_checkpoint: bool
) -> list[str]:
    label = model.label
    checkpoint_path = _parameter(model.config, "model_checkpoint_path") or ""
    spec = _provenance_spec(model)
    problems: list[str] = []
    if spec is not None:
        if spec.tensor_parallel != tp:
            problems.append(f"{label}: tensor_para_size {tp} but {SPEC_FILE} says {spec.tensor_parallel}")
        if family is not None and spec.family is not family:
            problems.append(f"{label}: model_type is for {family} but {SPEC_FILE} says {spec.family}")
    local = _local_checkpoint(model, root, checkpoint_path)
    ini_path = local / CONFIG_INI
    if not ini_path.is_file():
        if require_checkpoint:
            problems.append(f"{label}: model_checkpoint_path {checkpoint_path} has no {CONFIG_INI} (looked at {local})")
        return problems
    problems += checkpoint_dir_problems(local, tp)
    try:
        ini = CheckpointIni.parse(ini_path.read_text(encoding="utf-8"), str(ini_path))
    except ValueError as exc:
        return [*problems, str(exc)]
    if spec is not None:
        problems += ini_problems(spec, ini, str(ini_path))
    elif family is not None and ini.family() is not family:
        problems.append(f"{ini_path}: not a {family} checkpoint (model_type {family.ft_model_type})")
    return problems


def _provenance_spec(model: Model) -> ModelSpec | None:
    path = model.directory / SPEC_FILE
    if not path.is_file():
        return None
    try:
        return ModelSpec.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except (ValueError, json.JSONDecodeError):
        return None


@dataclass(frozen=True)
class Tensor:
    """An ensemble tensor: where it comes from and what it looks like."""

    producer: str
    data_type: int
    dims: tuple[int, ...]
    optional: bool
    decoupled_origins: frozenset[str]


def dims_compatible(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    """Same rank and every size equal, ``-1`` matching anything."""
    return len(a) == len(b) and all(x == y or -1 in (x, y) for x, y in zip(a, b, strict=True))


def _type_name(data_type: int) -> str:
    return str(mc.DataType.Name(data_type))


def ensemble_problems(ensemble: Model, models: dict[str, Model]) -> list[str]:
    """Data-flow consistency of one ensemble (see module docstring)."""
    config, label = ensemble.config, ensemble.label
    problems: list[str] = []
    tensors: dict[str, Tensor] = {
        i.name: Tensor("ensemble input", i.data_type, tuple(i.dims), i.optional, frozenset()) for i in config.input
    }
    steps = list(config.ensemble_scheduling.step)
    if not steps:
        return [f"{label}: ensemble_scheduling has no step"]
    resolved: list[tuple[int, Model]] = []
    for index, step in enumerate(steps):
        model = models.get(step.model_name)
        where = f"{label}: step {index} ({step.model_name})"
        if model is None:
            problems.append(f"{where}: no model named {step.model_name!r} in the repository")
            continue
        if step.model_version != -1 and str(step.model_version) not in model.versions:
            problems.append(
                f"{where}: version {step.model_version} has no directory {step.model_name}/{step.model_version}/"
            )
        if config.max_batch_size > model.config.max_batch_size:
            problems.append(
                f"{where}: ensemble max_batch_size {config.max_batch_size} exceeds the model's "
                f"{model.config.max_batch_size}"
            )
        resolved.append((index, model))
    # Producers first (so consumers may appear in any order), then consumers.
    for index, model in resolved:
        step = steps[index]
        outputs = {o.name: o for o in model.config.output}
        for model_output, tensor_name in sorted(step.output_map.items()):
            output = outputs.get(model_output)
            if output is None:
                problems.append(
                    f"{label}: step {index} maps output {model_output!r} which {model.label} does not declare"
                )
                continue
            if tensor_name in tensors:
                problems.append(
                    f"{label}: tensor {tensor_name!r} is produced twice ({tensors[tensor_name].producer} and "
                    f"step {index} {step.model_name})"
                )
                continue
            tensors[tensor_name] = Tensor(
                f"step {index} {step.model_name}.{model_output}",
                output.data_type,
                tuple(output.dims),
                False,
                frozenset({step.model_name}) if model.decoupled else frozenset(),
            )
    # Propagate decoupled origins through non-decoupled steps (their outputs inherit their inputs' origins).
    for _ in steps:
        for index, model in resolved:
            if model.decoupled:
                continue
            step = steps[index]
            origins = frozenset().union(
                *(tensors[t].decoupled_origins for t in step.input_map.values() if t in tensors)
            )
            for tensor_name in step.output_map.values():
                tensor = tensors.get(tensor_name)
                if tensor is not None and tensor.producer.startswith(f"step {index} "):
                    tensors[tensor_name] = Tensor(tensor.producer, tensor.data_type, tensor.dims, False, origins)
    for index, model in resolved:
        step = steps[index]
        inputs = {i.name: i for i in model.config.input}
        for model_input, tensor_name in sorted(step.input_map.items()):
            declared = inputs.get(model_input)
            where = f"{label}: step {index} input {step.model_name}.{model_input} <- {tensor_name!r}"
            if declared is None:
                problems.append(f"{where}: {model.label} has no input {model_input!r}")
                continue
            tensor = tensors.get(tensor_name)
            if tensor is None:
                problems.append(f"{where}: no ensemble input or step output produces it")
                continue
            if tensor.data_type != declared.data_type:
                problems.append(
                    f"{where}: dtype {_type_name(tensor.data_type)} from {tensor.producer} but the model expects "
                    f"{_type_name(declared.data_type)}"
                )
            if not dims_compatible(tensor.dims, tuple(declared.dims)):
                problems.append(
                    f"{where}: dims {list(tensor.dims)} from {tensor.producer} but the model expects "
                    f"{list(declared.dims)}"
                )
            if tensor.optional and not declared.optional:
                problems.append(f"{where}: optional ensemble input feeds a required model input")
        for declared in model.config.input:
            if not declared.optional and declared.name not in step.input_map:
                problems.append(
                    f"{label}: step {index} ({step.model_name}) leaves required input {declared.name!r} unfed"
                )
        sources = {tensors[t].decoupled_origins for t in step.input_map.values() if t in tensors}
        if len(sources) > 1:
            problems.append(
                f"{label}: step {index} ({step.model_name}) receives inputs originating from different decoupled "
                "models (Triton rejects this; feed it from the decoupled model's outputs only)"
            )
    for output in config.output:
        tensor = tensors.get(output.name)
        if tensor is None or tensor.producer == "ensemble input":
            problems.append(f"{label}: ensemble output {output.name!r} is not produced by any step")
            continue
        if tensor.data_type != output.data_type:
            problems.append(
                f"{label}: ensemble output {output.name!r} is {_type_name(output.data_type)} but {tensor.producer} "
                f"produces {_type_name(tensor.data_type)}"
            )
        if not dims_compatible(tensor.dims, tuple(output.dims)):
            problems.append(
                f"{label}: ensemble output {output.name!r} dims {list(output.dims)} but {tensor.producer} "
                f"produces {list(tensor.dims)}"
            )
    return problems
