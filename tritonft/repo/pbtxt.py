"""``config.pbtxt`` files as ``tritonclient.grpc.model_config_pb2.ModelConfig`` messages.

Each builder starts from the family's template (``model_repo/``), sets the spec-dependent fields in code and is
rendered with ``google.protobuf.text_format``: the output is valid against Triton's schema by construction.
Backend rules respected here (ft-format.md §6): every FT parameter is a ``string_value``; exactly one
``instance_group`` of ``KIND_CPU``; a ``BATCH_ITEM_SHAPE`` ``batch_input`` for each ragged input; dynamic
batching only (no ``sequence_batching``, which would need ``max_batch_size: 1``); ``int8_mode`` for GPT only.
"""

from __future__ import annotations

from google.protobuf import text_format  # type: ignore[import-untyped]  # no types-protobuf in the lock
from tritonclient.grpc import model_config_pb2 as mc

from tritonft.repo.checkpoint import TokenIds
from tritonft.repo.naming import RepoNames, ft_checkpoint_path
from tritonft.repo.templates import family_dir, template_config
from tritonft.spec import Family, ModelSpec

HEADER = (
    "# Rendered by tritonft.repo from the model spec of {name!r}. Do not edit: change the spec and re-render\n"
    "# (`tritonft repo --spec SPEC.json --checkpoint DIR --out DIR`).\n"
)


def render(config: mc.ModelConfig, spec_name: str) -> bytes:
    """Deterministic text of a ``ModelConfig`` with a provenance header."""
    body: str = text_format.MessageToString(config, use_short_repeated_primitives=True)
    return (HEADER.format(name=spec_name) + body).encode("utf-8")


def _string_parameters(config: mc.ModelConfig, values: dict[str, str]) -> None:
    for key, value in values.items():
        config.parameters[key].string_value = value


def _cpu_instances(config: mc.ModelConfig, count: int) -> None:
    del config.instance_group[:]
    group = config.instance_group.add()
    group.count = count
    group.kind = mc.ModelInstanceGroup.KIND_CPU


def ft_parameters(spec: ModelSpec, model_root: str, checkpoint_path: str | None = None) -> dict[str, str]:
    """The backend's parameters, all strings (a missing TP/PP would silently become 0 in the backend).

    ``checkpoint_path`` points the backend at weights kept outside the repository (absolute, ``.../<TP>-gpu``).
    """
    parameters = {
        "model_type": spec.family.ft_model_type,
        "tensor_para_size": str(spec.tensor_parallel),
        "pipeline_para_size": str(spec.pipeline_parallel),
        "data_type": str(spec.data_type),
        "model_checkpoint_path": checkpoint_path or ft_checkpoint_path(spec, model_root),
        "enable_custom_all_reduce": "0",
    }
    if spec.family is Family.GPT2:
        parameters["int8_mode"] = str(spec.int8_mode)
    return parameters


def ft_config(spec: ModelSpec, model_root: str, checkpoint_path: str | None = None) -> mc.ModelConfig:
    """The raw FasterTransformer model (token ids in, token ids out)."""
    config = template_config(f"{family_dir(spec.family)}/fastertransformer/config.pbtxt")
    config.name = RepoNames.of(spec).ft
    config.max_batch_size = spec.batching.max_batch_size
    for model_input in config.input:
        if model_input.allow_ragged_batch:
            batch_input = config.batch_input.add()
            batch_input.kind = mc.BatchInput.BATCH_ITEM_SHAPE
            batch_input.target_name.append(f"{model_input.name}_item_shape")
            batch_input.data_type = mc.TYPE_INT32
            batch_input.source_input.append(model_input.name)
    config.dynamic_batching.max_queue_delay_microseconds = spec.batching.max_queue_delay_us
    config.dynamic_batching.preferred_batch_size.extend(sorted(spec.batching.preferred_batch_sizes))
    if spec.decoupled:
        config.model_transaction_policy.decoupled = True
    _cpu_instances(config, spec.instances)
    _string_parameters(config, ft_parameters(spec, model_root, checkpoint_path))
    return config


WARMUP_NAME = "tritonft-warmup"
WARMUP_DIR = "warmup"
"""Triton reads a warmup sample's ``input_data_file`` from ``<model>/warmup/``."""
WARMUP_VALUE = 1
"""Every numeric required input of a warmup sample: one token (id 1), length 1, one output token."""
_NUMPY_CODES = {mc.TYPE_UINT32: "<u4", mc.TYPE_INT32: "<i4", mc.TYPE_UINT64: "<u8", mc.TYPE_INT64: "<i8"}


def add_warmup(config: mc.ModelConfig) -> dict[str, bytes]:
    """Give ``config`` one ``model_warmup`` sample (batch 1) feeding every required input, and return the sample's
    data files (``warmup/<input>``, relative to the model's directory).

    Triton runs the sample through the model before it reports the model READY, so the first user request does not
    pay the model's first-call costs: FasterTransformer's first forward (cuBLAS handles, the decoding buffers), a
    Python model's first call through its stub. The sample is the smallest real request: one token (id 1), length
    1, one output token; variable dimensions are 1. Data come from files, not ``zero_data``: a zero length or zero
    output tokens is not a valid FT request. Optional inputs are left out, as a request may leave them out. Numeric
    inputs only: a text input has no sample every tokenizer accepts (an empty prompt is refused by the
    preprocessing model, a word-level vocabulary without an unknown token refuses any word it lacks), so the
    preprocessing model gets no warmup (:func:`tritonft.repo.render.render_repository_files`).
    """
    del config.model_warmup[:]
    sample = config.model_warmup.add()
    sample.name = WARMUP_NAME
    sample.batch_size = 1
    files: dict[str, bytes] = {}
    for model_input in config.input:
        if model_input.optional:
            continue
        dims = [1 if d < 0 else d for d in model_input.dims]
        count = 1
        for d in dims:
            count *= d
        if model_input.data_type in _NUMPY_CODES:
            code = _NUMPY_CODES[model_input.data_type]
            width = int(code[2:])
            content = WARMUP_VALUE.to_bytes(width, "little", signed=code[1] == "i") * count
        else:
            raise ValueError(
                f"{config.name}: no warmup value for input {model_input.name!r} of type "
                f"{mc.DataType.Name(model_input.data_type)}; make it optional or extend tritonft.repo.pbtxt.add_warmup"
            )
        tensor = sample.inputs[model_input.name]
        tensor.data_type = model_input.data_type
        tensor.dims.extend(dims)
        tensor.input_data_file = model_input.name
        files[f"{WARMUP_DIR}/{model_input.name}"] = content
    return files


def tokenizer_parameters(spec: ModelSpec, ids: TokenIds) -> dict[str, str]:
    """Parameters read by ``tritonft_tokenization.TokenizerSettings`` in the Python models."""
    return {
        "pad_id": str(ids.pad_id),
        "end_id": str(ids.end_id),
        # T5 inputs end with </s>; SentencePiece does not add it, tokenizer.json post-processors do (no double).
        "append_id": str(ids.end_id if spec.family is Family.T5 else -1),
        "max_input_len": str(spec.max_input_len),
        "default_output_len": str(spec.max_output_len),
    }


def _python_model(relative: str, name: str, spec: ModelSpec, ids: TokenIds) -> mc.ModelConfig:
    config = template_config(relative)
    config.name = name
    config.max_batch_size = spec.batching.max_batch_size
    _cpu_instances(config, 1)
    _string_parameters(config, tokenizer_parameters(spec, ids))
    return config


def preprocessing_config(spec: ModelSpec, ids: TokenIds) -> mc.ModelConfig:
    return _python_model("shared/preprocessing/config.pbtxt", RepoNames.of(spec).preprocessing, spec, ids)


def postprocessing_config(spec: ModelSpec, ids: TokenIds, ft: mc.ModelConfig) -> mc.ModelConfig:
    """Detokenizer; its ``output_ids``/``sequence_length`` inputs take the dtypes the FT model declares."""
    config = _python_model("shared/postprocessing/config.pbtxt", RepoNames.of(spec).postprocessing, spec, ids)
    ft_outputs = {output.name: output for output in ft.output}
    for model_input in config.input:
        if model_input.name in ft_outputs:
            model_input.data_type = ft_outputs[model_input.name].data_type
    return config


NOT_DECOUPLED_POSTPROCESSING_INPUTS = ("input_lengths", "return_tokens")
"""Postprocessing inputs a streaming (decoupled) ensemble does not feed: Triton rejects a step fed both by the
decoupled FT step and by something else (a step before it, an ensemble input)."""
NOT_DECOUPLED_ENSEMBLE_TENSORS = ("input_lengths", "return_tokens")
"""Ensemble inputs and outputs a streaming ensemble does not have: ``return_tokens`` would feed nothing, and an
output of a step before the decoupled one (``input_lengths``) has one value while the decoupled steps' outputs have
one per response, so every response after the first would wait for it forever. The gateway asks the preprocessing
model for a streamed prompt's token count instead."""


def ensemble_config(spec: ModelSpec, judge_reference: str | None = None) -> mc.ModelConfig:
    """The text-in/text-out ensemble, served under the spec's name; with ``judge_reference`` (JSON) carrying the
    judge's reference of the revision as its ``tritonft_judge_reference`` parameter."""
    config = template_config(f"{family_dir(spec.family)}/ensemble/config.pbtxt")
    roles = RepoNames.of(spec).by_role()
    config.name = roles["ensemble"]
    config.max_batch_size = spec.batching.max_batch_size
    for step in config.ensemble_scheduling.step:
        step.model_name = roles[step.model_name]
        if spec.decoupled and step.model_name == roles["postprocessing"]:
            # When streaming, each response is the whole sequence so far (GPT: prompt included).
            for name in NOT_DECOUPLED_POSTPROCESSING_INPUTS:
                if name in step.input_map:
                    del step.input_map[name]
    if spec.decoupled:
        for tensors in (config.input, config.output):
            kept = [tensor for tensor in tensors if tensor.name not in NOT_DECOUPLED_ENSEMBLE_TENSORS]
            del tensors[:]
            tensors.extend(kept)
    if judge_reference is not None:
        from tritonft.probe.judge_reference import REFERENCE_PARAMETER

        _string_parameters(config, {REFERENCE_PARAMETER: judge_reference})
    return config
