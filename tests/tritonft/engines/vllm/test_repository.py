"""A vLLM model's rendered repository: NVIDIA's vLLM-backend contract and nothing else, and vLLM's engine arguments."""

from __future__ import annotations

import ast
import json
from pathlib import Path

from google.protobuf import text_format  # type: ignore[import-untyped]  # no types-protobuf in the lock
from tritonclient.grpc import model_config_pb2

from tests.tritonft.engines.vllm.checkpoints import VARIANTS, config
from tritonft.engines.vllm import contract
from tritonft.engines.vllm.repository import config_pbtxt, repository_files, write_repository
from tritonft.engines.vllm.rules import VllmOptions, read_checkpoint
from tritonft.probe.judge_reference import REFERENCE_PARAMETER, JudgeReference, PromptReference
from tritonft.repo.check import check_repository
from tritonft.spec import Family

MODEL_FILE = Path(contract.__file__).with_name("triton_model.py")
CHECKPOINT = read_checkpoint(config(VARIANTS[0], 512))


def parsed(name: str = "llama") -> model_config_pb2.ModelConfig:
    return text_format.Parse(config_pbtxt(name), model_config_pb2.ModelConfig())


def test_the_config_is_a_decoupled_vllm_backend_model_that_triton_does_not_batch() -> None:
    cfg = parsed()
    assert (cfg.name, cfg.backend, cfg.max_batch_size) == ("llama", "vllm", 0)
    assert cfg.model_transaction_policy.decoupled is True
    assert [(g.count, g.kind) for g in cfg.instance_group] == [(1, model_config_pb2.ModelInstanceGroup.KIND_MODEL)]


def test_the_config_names_exactly_the_backends_inputs_and_outputs() -> None:
    cfg = parsed()
    types = model_config_pb2.DataType.Name
    inputs = [(i.name, types(i.data_type), tuple(i.dims), i.optional) for i in cfg.input]
    outputs = [(o.name, types(o.data_type), tuple(o.dims)) for o in cfg.output]
    assert inputs == [(t.name, t.data_type, t.dims, t.optional) for t in contract.INPUTS]
    assert outputs == [(t.name, t.data_type, t.dims) for t in contract.OUTPUTS]


def test_the_config_sets_only_parameters_the_backend_reads() -> None:
    assert set(parsed().parameters) <= set(contract.PARAMETERS)
    assert parsed().parameters["REPORT_CUSTOM_METRICS"].string_value == "true"


def test_the_cpu_model_auto_completes_the_same_contract() -> None:
    tree = ast.parse(MODEL_FILE.read_text())
    values = {
        node.targets[0].id: ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name) and node.targets[0].id.isupper()
    } | {
        node.target.id: ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None
    }
    assert values["INPUTS"] == [
        {"name": t.name, "data_type": t.data_type, "dims": list(t.dims), **({"optional": True} if t.optional else {})}
        for t in contract.INPUTS
    ]
    assert values["OUTPUTS"] == [
        {"name": t.name, "data_type": t.data_type, "dims": list(t.dims)} for t in contract.OUTPUTS
    ]
    assert values["STREAMING_NEEDS_EXCLUDED_INPUT"] == contract.STREAMING_NEEDS_EXCLUDED_INPUT
    assert values["ENGINE_ARGS_FILE"] == contract.ENGINE_ARGS_FILE


def test_model_json_is_vllms_engine_arguments_reading_the_store() -> None:
    options = VllmOptions(max_model_len=256, max_num_seqs=8, dtype="float32", gpu_memory_utilization=0.85)
    files = repository_files("llama", options, "/models/hf/llama/abc123", CHECKPOINT)
    args = json.loads(files["llama/1/model.json"])
    assert args == {
        "model": "/models/hf/llama/abc123",
        "tokenizer": "/models/hf/llama/abc123",
        "served_model_name": "llama",
        "tensor_parallel_size": 1,
        "gpu_memory_utilization": 0.85,
        "max_num_seqs": 8,
        "max_model_len": 256,
        "dtype": "float32",
        "enable_prefix_caching": True,
        "disable_log_stats": False,
        "load_format": "safetensors",
        "trust_remote_code": False,
    }


def test_model_json_defaults_the_length_to_the_models_positions() -> None:
    files = repository_files("llama", VllmOptions(), "/m", CHECKPOINT)
    assert json.loads(files["llama/1/model.json"])["max_model_len"] == CHECKPOINT.max_positions == 512


def test_tensor_parallel_models_use_vllms_worker_processes() -> None:
    files = repository_files("llama", VllmOptions(tensor_parallel_size=2), "/m", CHECKPOINT)
    args = json.loads(files["llama/1/model.json"])
    assert (args["tensor_parallel_size"], args["distributed_executor_backend"]) == (2, "mp")


def test_the_repository_holds_only_the_config_and_the_engine_arguments() -> None:
    assert sorted(repository_files("llama", VllmOptions(), "/m", CHECKPOINT)) == [
        "llama/1/model.json",
        "llama/config.pbtxt",
    ]


def test_writing_replaces_a_previous_model_whole(tmp_path: Path) -> None:
    (tmp_path / "llama" / "1").mkdir(parents=True)
    (tmp_path / "llama" / "1" / "stale.txt").write_text("old")
    files = repository_files("llama", VllmOptions(), "/m", CHECKPOINT)
    assert write_repository(files, tmp_path) == ["llama"]
    written = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert written == ["llama/1/model.json", "llama/config.pbtxt"]
    assert (tmp_path / "llama" / "config.pbtxt").read_bytes() == files["llama/config.pbtxt"]


def test_the_checker_accepts_the_rendered_repository(tmp_path: Path) -> None:
    write_repository(repository_files("llama", VllmOptions(), "/m", CHECKPOINT), tmp_path)
    assert check_repository(tmp_path) == []


REFERENCE = JudgeReference(
    Family.LLAMA,
    "meta-llama/Llama-3.1-8B-Instruct",
    "0e9e39f249a16976918f6564b8830bc894c89659",
    "bf16",
    1.5,
    (PromptReference("The capital of France is", ' Paris, "the city"\n\u00e9', 16, False),),
)


def test_the_config_carries_the_judges_reference_for_the_judge_to_read(tmp_path: Path) -> None:
    files = repository_files("llama", VllmOptions(), "/m", CHECKPOINT, judge_reference=REFERENCE.to_json())
    cfg = text_format.Parse(files["llama/config.pbtxt"].decode(), model_config_pb2.ModelConfig())

    assert JudgeReference.from_json(cfg.parameters[REFERENCE_PARAMETER].string_value) == REFERENCE
    write_repository(files, tmp_path)
    assert check_repository(tmp_path) == []


def test_the_checker_refuses_a_reference_parameter_that_is_not_one(tmp_path: Path) -> None:
    files = repository_files("llama", VllmOptions(), "/m", CHECKPOINT, judge_reference='{"format": 1}')
    write_repository(files, tmp_path)

    (problem,) = check_repository(tmp_path)

    assert problem.startswith(f"llama/config.pbtxt: parameter {REFERENCE_PARAMETER} is not a judge reference")


def test_the_checker_refuses_an_input_the_backend_does_not_read(tmp_path: Path) -> None:
    files = repository_files("llama", VllmOptions(), "/m", CHECKPOINT)
    text = (
        files["llama/config.pbtxt"]
        .decode()
        .replace(
            "input [\n", 'input [\n  {\n    name: "temperature"\n    data_type: TYPE_FP32\n    dims: [ 1 ]\n  },\n', 1
        )
    )
    write_repository({**files, "llama/config.pbtxt": text.encode()}, tmp_path)
    assert check_repository(tmp_path) == [
        "llama/config.pbtxt: input 'temperature' is not one of the vLLM backend's: "
        + ", ".join(t.name for t in contract.INPUTS)
    ]


def test_the_checker_refuses_a_mistyped_output_and_a_batching_config(tmp_path: Path) -> None:
    files = repository_files("llama", VllmOptions(), "/m", CHECKPOINT)
    text = files["llama/config.pbtxt"].decode()
    text = text.replace("max_batch_size: 0", "max_batch_size: 8")
    text = text.replace(
        'name: "num_input_tokens"\n    data_type: TYPE_UINT32', 'name: "num_input_tokens"\n    data_type: TYPE_INT64'
    )
    write_repository({**files, "llama/config.pbtxt": text.encode()}, tmp_path)
    assert check_repository(tmp_path) == [
        "llama/config.pbtxt: max_batch_size 8: vLLM batches itself (set 0)",
        "llama/config.pbtxt: output 'num_input_tokens' is ('TYPE_INT64', (1,)), the vLLM backend's is "
        "('TYPE_UINT32', (1,))",
    ]


def test_the_checker_refuses_engine_arguments_without_a_model(tmp_path: Path) -> None:
    files = repository_files("llama", VllmOptions(), "/m", CHECKPOINT)
    write_repository({**files, "llama/1/model.json": b'{"dtype": "auto"}'}, tmp_path)
    assert check_repository(tmp_path) == ["llama/1/model.json: must be an object naming the 'model'"]
