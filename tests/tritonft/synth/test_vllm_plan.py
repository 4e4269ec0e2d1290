"""The Llama-family models of the stacks in their synthesized plans: prod's gated Llama 3.1 8B Instruct and local's
Qwen2.5 0.5B Instruct, each with its vLLM repository (``config.pbtxt`` backend vllm + ``1/model.json``), its own
server image, its GPUs, its download Job (no conversion, the token Secret of a gated repo) and the store path that
``model.json`` names."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.plans import StackPlans
from tritonft.engines.vllm.check import vllm_model_problems

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def prod(stack_plan: StackPlans) -> Path:
    return stack_plan("prod").out


@pytest.fixture(scope="module")
def local(stack_plan: StackPlans) -> Path:
    return stack_plan("local").out


def manifest(plan: Path, kind: str, name_part: str) -> dict[str, Any]:
    (path,) = [p for p in (plan / "manifests").rglob(f"{kind}-*.yaml") if name_part in p.name]
    loaded: dict[str, Any] = yaml.safe_load(path.read_text())
    return loaded


def model_json(plan: Path, model: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((plan / "model_repos" / model / model / "1" / "model.json").read_text())
    return loaded


def test_prods_llama_repository_is_the_vllm_backends_and_passes_its_contract(prod: Path) -> None:
    from google.protobuf import text_format  # type: ignore[import-untyped]
    from tritonclient.grpc import model_config_pb2 as mc

    directory = prod / "model_repos" / "llama-3-1-8b" / "llama-3-1-8b"
    config = text_format.Parse((directory / "config.pbtxt").read_text(), mc.ModelConfig())
    assert config.backend == "vllm" and config.model_transaction_policy.decoupled
    assert vllm_model_problems(directory, config, ["1"]) == []


def test_prods_model_json_holds_the_stacks_engine_arguments(prod: Path) -> None:
    args = model_json(prod, "llama-3-1-8b")
    assert args["model"] == "/models/hf/llama-3-1-8b/0e9e39f249a16976918f6564b8830bc894c89659"
    assert (args["max_model_len"], args["gpu_memory_utilization"], args["max_num_seqs"]) == (16384, 0.9, 64)
    assert args["tensor_parallel_size"] == 1 and args["dtype"] == "auto"


def test_model_json_names_where_the_download_job_puts_the_files(prod: Path) -> None:
    job = manifest(prod, "job", "llama-3-1-8b")
    (container,) = job["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["ENGINE"] == "vllm"
    assert env["CHECKPOINT_DIR"] == model_json(prod, "llama-3-1-8b")["model"]
    assert "tritonft convert" not in container["command"][-1]


def test_the_gated_models_download_reads_the_token_secret_the_stack_makes_from_hf_token(prod: Path) -> None:
    job = manifest(prod, "job", "llama-3-1-8b")
    volumes = {v["name"]: v for v in job["spec"]["template"]["spec"]["volumes"]}
    assert volumes["hf-token"]["secret"]["secretName"] == "prod-llama-3-1-8b-convert-hf-token"
    secret = manifest(prod, "secret", "prod-llama-3-1-8b-convert-hf-token")
    assert secret["metadata"]["namespace"] == job["metadata"]["namespace"]


def test_prods_llama_runs_in_the_vllm_server_image_with_one_gpu(prod: Path) -> None:
    deployment = manifest(prod, "deployment", "llama-3-1-8b")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert "/server-vllm@sha256:" in container["image"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "1"
    ft = manifest(prod, "deployment", "gpt-j-6b")["spec"]["template"]["spec"]["containers"][0]
    assert "/server@sha256:" in ft["image"], "the FT models keep FT's image"


def test_the_vllm_image_is_an_output_of_the_stack(prod: Path) -> None:
    outputs = json.loads((prod / "outputs.json").read_text())
    assert "llama-3-1-8b" in outputs["models"]
    resources = json.loads((prod / "resources.json").read_text())
    images = {r["name"] for r in resources if r["type"] == "docker-build:index:Image"}
    assert "prod-images-server-vllm" in images


def test_locals_tiny_model_is_served_by_vllm_on_one_gpu(local: Path) -> None:
    args = model_json(local, "qwen-0-5b")
    assert args["model"] == "/models/hf/qwen-0-5b/7ae557604adf67be50417f59c2c2f167def9a775"
    assert args["max_model_len"] == 4096 and args["max_num_seqs"] == 16
    deployment = manifest(local, "deployment", "qwen-0-5b")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert "server-vllm" in container["image"]


def test_prods_llama_job_computes_the_judges_reference_from_the_downloaded_files(prod: Path) -> None:
    job = manifest(prod, "job", "llama-3-1-8b")
    (container,) = job["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["JUDGE_REFERENCE"].startswith("/models/references/llama-3-1-8b/")
    assert env["JUDGE_REFERENCE"].endswith("/judge-reference.json")
    script = container["command"][-1]
    assert 'tritonft reference --input "$CHECKPOINT_DIR" --spec "$SPEC_PATH" --out "$JUDGE_REFERENCE"' in script
    assert '--judge-reference "$JUDGE_REFERENCE"' in script
    # Every weight at fp32 on the CPU (Llama 3.1 8B: 8.03 B parameters).
    assert container["resources"]["requests"]["memory"] == container["resources"]["limits"]["memory"] == "41320Mi"


def test_prods_llama_is_judged_against_the_reference_of_its_original_weights(prod: Path) -> None:
    from tritonft.probe.in_cluster import CONFIG_ENV
    from tritonft.synth.plandiff import load_plan

    judge = "pulumi-python:dynamic/tritonft:InClusterJudge"
    judges = {r["name"]: dict(r["inputs"]) for r in load_plan(prod) if r["type"] == judge}
    (name,) = [n for n in judges if n.startswith("prod-llama-3-1-8b-judge-")]
    (container,) = judges[name]["job"]["spec"]["template"]["spec"]["containers"]
    settings = json.loads(next(e["value"] for e in container["env"] if e["name"] == CONFIG_ENV))
    (target,) = settings["models"]
    assert (target["family"], target["vllm"], target["reference"], target["max_tokens"]) == ("llama", True, True, 16)
