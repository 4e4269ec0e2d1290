"""Rendering local checkpoints for the real Triton: what vLLM would refuse is refused before any server starts."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from tests.tritonft.engines.vllm.checkpoints import VARIANTS, write
from tritonft.engines.vllm import local


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write(VARIANTS[0], tmp_path_factory.mktemp("ckpt") / "tiny-llama")


def test_a_local_checkpoint_is_served_from_its_own_directory_in_float32(llama_dir: Path, tmp_path: Path) -> None:
    local.render({"tiny": llama_dir}, tmp_path)
    args = json.loads((tmp_path / "tiny" / "1" / "model.json").read_text())
    assert args["model"] == str(llama_dir.resolve())
    assert (args["dtype"], args["enforce_eager"], args["max_model_len"]) == ("float32", True, 512)


def test_a_max_model_len_beyond_the_positions_is_refused_before_serving(llama_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"maxModelLen: 4096 exceeds the model's 512 positions"):
        local.render({"tiny": llama_dir}, tmp_path, replace(local.CPU_OPTIONS, max_model_len=4096))
    assert not (tmp_path / "tiny").exists()


def test_an_architecture_vllm_does_not_serve_here_is_refused(llama_dir: Path, tmp_path: Path) -> None:
    other = tmp_path / "gpt2"
    other.mkdir()
    config = json.loads((llama_dir / "config.json").read_text()) | {"architectures": ["GPT2LMHeadModel"]}
    (other / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=r"architectures \['GPT2LMHeadModel'\]: not served through vLLM 0\.27\.1"):
        local.render({"gpt2": other}, tmp_path / "repo")


def test_the_gateway_in_front_is_given_the_spec_and_the_chat_template(llama_dir: Path, tmp_path: Path) -> None:
    command = local.gateway_command(
        "127.0.0.1:8001", 9000, tmp_path / "tiny.spec.json", "tiny", local.chat_config(llama_dir)
    )
    assert command[1:] == [
        "-m",
        "tritonft",
        "gateway",
        "--triton-url",
        "127.0.0.1:8001",
        "--host",
        "127.0.0.1",
        "--port",
        "9000",
        "--spec",
        str(tmp_path / "tiny.spec.json"),
        "--tokenizer-config",
        f"tiny={llama_dir / 'tokenizer_config.json'}",
    ]


def test_a_checkpoint_without_a_chat_template_gets_completions_only(llama_dir: Path, tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    config = json.loads((llama_dir / "tokenizer_config.json").read_text())
    del config["chat_template"]
    (plain / "tokenizer_config.json").write_text(json.dumps(config))
    assert local.chat_config(plain) is None
    assert "--tokenizer-config" not in local.gateway_command("h:1", 1, tmp_path / "s.json", "plain", None)


def test_a_checkpoint_whose_template_is_in_chat_template_jinja_gets_chat(llama_dir: Path, tmp_path: Path) -> None:
    moved = tmp_path / "moved"
    moved.mkdir()
    config = json.loads((llama_dir / "tokenizer_config.json").read_text())
    (moved / "chat_template.jinja").write_text(config.pop("chat_template"))
    (moved / "tokenizer_config.json").write_text(json.dumps(config))
    assert local.chat_config(moved) == moved / "tokenizer_config.json"


def test_the_spec_of_a_local_checkpoint_states_its_config_json(llama_dir: Path) -> None:
    spec = local.spec_for("tiny", llama_dir, replace(local.CPU_OPTIONS, max_model_len=256))
    config = json.loads((llama_dir / "config.json").read_text())
    assert spec.vllm is not None
    assert (spec.family, spec.vllm.architecture, spec.vllm.num_kv_heads) == (
        "llama",
        config["architectures"][0],
        config["num_key_value_heads"],
    )
    assert (spec.architecture.num_heads, spec.architecture.d_model) == (
        config["num_attention_heads"],
        config["hidden_size"],
    )
    assert (spec.max_input_len, spec.max_output_len, spec.vllm.max_model_len) == (256, 255, 256)
