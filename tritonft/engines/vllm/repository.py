"""A vLLM model's Triton repository: ``<name>/config.pbtxt`` (``backend: "vllm"``, decoupled) and
``<name>/1/model.json`` (vLLM's engine arguments, the weights read from the model store). Pure rendering plus one
atomic writer.

No conversion and no tokenizer models: vLLM loads the Hugging Face files (weights, ``config.json``, tokenizer) from
``model.json``'s ``model`` path and tokenizes itself.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from tritonft.engines.vllm.contract import (
    BACKEND,
    ENGINE_ARGS_FILE,
    INPUTS,
    INSTANCE_KIND,
    MAX_BATCH_SIZE,
    OUTPUTS,
    Tensor,
)
from tritonft.engines.vllm.rules import Checkpoint, VllmOptions, max_model_len

VERSION = "1"


def engine_args(
    options: VllmOptions, model_path: str, checkpoint: Checkpoint, *, served_name: str | None = None
) -> dict[str, object]:
    """``model.json``: vLLM's ``AsyncEngineArgs`` by their own names (``vllm_backend`` ``src/model.py:227``)."""
    args: dict[str, object] = {
        "model": model_path,
        "tokenizer": model_path,
        "served_model_name": served_name or model_path,
        "tensor_parallel_size": options.tensor_parallel_size,
        "gpu_memory_utilization": options.gpu_memory_utilization,
        "max_num_seqs": options.max_num_seqs,
        "max_model_len": max_model_len(options, checkpoint),
        "dtype": options.dtype,
        "enable_prefix_caching": options.enable_prefix_caching,
        "disable_log_stats": False,
        "load_format": "safetensors",
        "trust_remote_code": False,
    }
    if options.enforce_eager:
        args["enforce_eager"] = True
    if options.tensor_parallel_size > 1:
        args["distributed_executor_backend"] = "mp"
    return args


def _tensor(tensor: Tensor) -> str:
    dims = ", ".join(str(d) for d in tensor.dims)
    optional = "\n    optional: true" if tensor.optional else ""
    return f'  {{\n    name: "{tensor.name}"\n    data_type: {tensor.data_type}\n    dims: [ {dims} ]{optional}\n  }}'


def config_pbtxt(name: str, *, report_metrics: bool = True, judge_reference: str | None = None) -> str:
    """The model's ``config.pbtxt``: NVIDIA's backend contract, written out (not left to auto-complete) so the
    repository says what it serves; with ``judge_reference`` (JSON) carrying the judge's reference of the revision as
    the string parameter ``tritonft_judge_reference`` (the backend reads only its own parameters; Triton serves every
    parameter on ``GET /v2/models/<model>/config``, where the judge reads it)."""
    inputs = ",\n".join(_tensor(t) for t in INPUTS)
    outputs = ",\n".join(_tensor(t) for t in OUTPUTS)
    metrics = "true" if report_metrics else "false"
    return (
        f'name: "{name}"\n'
        f'backend: "{BACKEND}"\n'
        f"max_batch_size: {MAX_BATCH_SIZE}\n"
        "model_transaction_policy {\n  decoupled: true\n}\n"
        f"input [\n{inputs}\n]\n"
        f"output [\n{outputs}\n]\n"
        f"instance_group [\n  {{\n    count: 1\n    kind: {INSTANCE_KIND}\n  }}\n]\n"
        'parameters {\n  key: "REPORT_CUSTOM_METRICS"\n'
        f'  value {{\n    string_value: "{metrics}"\n  }}\n}}\n'
    ) + (_reference_parameter(judge_reference) if judge_reference is not None else "")


def _reference_parameter(judge_reference: str) -> str:
    """The ``parameters`` entry carrying the judge's reference, escaped by protobuf's own text format."""
    from google.protobuf import text_format  # type: ignore[import-untyped]  # no types-protobuf in the lock
    from tritonclient.grpc import model_config_pb2 as mc

    from tritonft.probe.judge_reference import REFERENCE_PARAMETER

    config = mc.ModelConfig()
    config.parameters[REFERENCE_PARAMETER].string_value = judge_reference
    return str(text_format.MessageToString(config, as_utf8=True))


def repository_files(
    name: str,
    options: VllmOptions,
    model_path: str,
    checkpoint: Checkpoint,
    *,
    served_name: str | None = None,
    judge_reference: str | None = None,
) -> dict[str, bytes]:
    """Every file of the repository by relative path (``judge_reference``: see :func:`config_pbtxt`)."""
    args = engine_args(options, model_path, checkpoint, served_name=served_name or name)
    return {
        f"{name}/config.pbtxt": config_pbtxt(name, judge_reference=judge_reference).encode(),
        f"{name}/{VERSION}/{ENGINE_ARGS_FILE}": (json.dumps(args, indent=2, sort_keys=True) + "\n").encode(),
    }


def write_repository(files: dict[str, bytes], out_dir: Path) -> list[str]:
    """Write ``files`` under ``out_dir``, each model directory renamed into place whole (Triton never sees half)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    models = sorted({path.split("/", 1)[0] for path in files})
    for model in models:
        staging = Path(tempfile.mkdtemp(prefix=f".{model}.", dir=out_dir))
        for path, data in files.items():
            if path.split("/", 1)[0] != model:
                continue
            target = staging / path.split("/", 1)[1]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        os.chmod(staging, 0o755)
        final = out_dir / model
        if final.exists():
            shutil.rmtree(final)
        staging.rename(final)
    return models
