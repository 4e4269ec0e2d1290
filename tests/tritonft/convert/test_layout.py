"""Every file the converter writes equals the bytes the spec derives (models.py), for every family x TP x dtype."""

from __future__ import annotations

import configparser
import json
from collections.abc import Callable

import numpy as np
import pytest

from tests.tritonft.convert.models import (
    Model,
    expected_files,
    file_bytes,
    gpt2_model,
    gptj_model,
    spec_file_count,
    t5_model,
)

BUILDERS: dict[str, Callable[..., Model]] = {"t5": t5_model, "gpt2": gpt2_model, "gptj": gptj_model}


def convert(cli, model: Model, tmp_path, tp: int, dtype: str, stored: str, shards: int = 1):  # noqa: PLR0917
    src = model.save(tmp_path / "hf", stored=stored, shards=shards)
    code, _, err = cli("convert", "--input", src, "--output", tmp_path / "ft", "--tp", tp, "--dtype", dtype)
    assert code == 0, err
    return tmp_path / "ft" / f"{tp}-gpu"


def assert_matches_spec(model: Model, target, tp: int, dtype: str) -> None:
    expected = expected_files(model, tp)
    written = sorted(p.name for p in target.glob("*.bin"))
    assert written == sorted(expected)
    assert len(written) == spec_file_count(model, tp)
    for name, value in expected.items():
        assert (target / name).read_bytes() == file_bytes(value, dtype), name


def read_ini(target) -> configparser.ConfigParser:
    text = (target / "config.ini").read_text()
    assert all(len(line.encode()) < 200 for line in text.splitlines())
    parser = configparser.ConfigParser(strict=True, interpolation=None)  # strict: a duplicate key is an error
    parser.read_string(text)
    return parser


@pytest.mark.parametrize("stored", ["fp32", "bf16"])
@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
@pytest.mark.parametrize("tp", [1, 2, 4])
@pytest.mark.parametrize("family", ["t5", "gpt2", "gptj"])
def test_every_file_equals_the_spec_derivation(cli, tmp_path, family, tp, dtype, stored):  # noqa: PLR0917
    model = BUILDERS[family](stored=stored)
    target = convert(cli, model, tmp_path, tp, dtype, stored)
    assert_matches_spec(model, target, tp, dtype)
    ini = read_ini(target)
    section = {"t5": "encoder", "gpt2": "gpt", "gptj": "gptj"}[family]
    assert ini[section]["weight_data_type"] == dtype


def test_gated_t5_writes_wi_and_wi2_per_rank(cli, tmp_path):
    model = t5_model(gated=True)
    target = convert(cli, model, tmp_path, 2, "fp32", "fp32")
    assert_matches_spec(model, target, 2, "fp32")
    assert (target / "decoder.block.2.layer.2.DenseReluDense.wi2.weight.1.bin").exists()
    ini = read_ini(target)
    assert ini["structure"]["use_gated_activation"] == "1"
    assert ini["encoder"]["feed_forward_proj"] == "gated-gelu"


def test_untied_t5_uses_its_own_lm_head_and_disables_logit_scaling(cli, tmp_path):
    model = t5_model(tied=False)
    target = convert(cli, model, tmp_path, 2, "fp16", "fp32")
    assert_matches_spec(model, target, 2, "fp16")
    assert (target / "lm_head.weight.bin").read_bytes() == file_bytes(model.tensors["lm_head.weight"], "fp16")
    ini = read_ini(target)
    assert ini["decoder"]["tie_word_embeddings"] == "False"
    assert ini["encoder"]["tie_word_embeddings"] == "False"


def test_transformers5_untied_t5_config_is_read_from_scale_decoder_outputs(cli, tmp_path):
    model = t5_model(tied=False)
    model.config.update(tie_word_embeddings=True, scale_decoder_outputs=False)  # what transformers 5 saves
    target = convert(cli, model, tmp_path, 1, "fp32", "fp32")
    assert read_ini(target)["decoder"]["tie_word_embeddings"] == "False"
    assert (target / "lm_head.weight.bin").read_bytes() == file_bytes(model.tensors["lm_head.weight"], "fp32")


def test_tied_t5_without_lm_head_in_the_file_gets_it_synthesised_from_shared(cli, tmp_path):
    model = t5_model(tied=True, lm_head=False)
    assert "lm_head.weight" not in model.tensors
    target = convert(cli, model, tmp_path, 1, "fp32", "fp32")
    assert (target / "lm_head.weight.bin").read_bytes() == (target / "shared.weight_T.bin").read_bytes()
    assert read_ini(target)["decoder"]["tie_word_embeddings"] == "True"


def test_sharded_checkpoint_converts_like_a_single_file(cli, tmp_path):
    model = t5_model(stored="bf16", gated=True)
    target = convert(cli, model, tmp_path, 2, "fp16", "bf16", shards=3)
    assert len(list((tmp_path / "hf").glob("model-*-of-00003.safetensors"))) == 3
    assert_matches_spec(model, target, 2, "fp16")


def test_t5_config_ini_has_every_key_ft_reads_with_the_right_values(cli, tmp_path):
    model = t5_model(gated=False)
    model.config["task_specific_params"] = {"translation": {"prefix": "x" * 300}}  # a line FT would split
    target = convert(cli, model, tmp_path, 2, "fp32", "fp32")
    ini = read_ini(target)
    assert ini.sections() == ["encoder", "decoder", "structure"]
    for section, layers in (("encoder", 2), ("decoder", 3)):
        s = ini[section]
        assert s["_name_or_path"] == str(tmp_path / "hf")
        assert (s["num_heads"], s["d_kv"], s["d_model"], s["d_ff"]) == ("4", "16", "64", "96")
        assert s["num_layers"] == str(layers)
        assert s["vocab_size"] == "120"
        assert s["relative_attention_num_buckets_or_max_pos_seq_len"] == "8"
        assert "relative_attention_num_buckets" not in s
        assert s["decoder_start_token_id"] == "0"  # absent in config.json: falls back to pad_token_id
        assert s["eos_token_id"] == "1"
        assert s["is_decoder"] == str(section == "decoder")
    assert "task_specific_params" not in ini["encoder"]
    assert dict(ini["structure"]) == {
        "t5_with_bias": "false",
        "use_gated_activation": "false",
        "position_embedding_type": "relative",
    }
    manifest = json.loads((target / "manifest.json").read_text())
    assert manifest["dropped_config_keys"] == ["task_specific_params"]


def test_gpt2_config_ini_uses_n_inner_eps_and_activation(cli, tmp_path):
    model = gpt2_model(n_inner=192)
    target = convert(cli, model, tmp_path, 2, "fp16", "fp32")
    assert dict(read_ini(target)["gpt"]) == {
        "model_name": str(tmp_path / "hf"),
        "head_num": "4",
        "size_per_head": "16",
        "inter_size": "192",
        "max_pos_seq_len": "32",
        "num_layer": "2",
        "vocab_size": "110",
        "start_id": "5",
        "end_id": "7",
        "weight_data_type": "fp16",
        "tensor_para_size": "2",
        "layernorm_eps": "1e-05",
        "activation_type": "Gelu",
    }


def test_gpt2_without_prefix_and_default_inner_size(cli, tmp_path):
    model = gpt2_model(prefix="", n_inner=None)
    target = convert(cli, model, tmp_path, 4, "fp32", "fp32")
    assert_matches_spec(model, target, 4, "fp32")
    assert read_ini(target)["gpt"]["inter_size"] == "256"


def test_gpt2_attention_buffers_are_reported_as_ignored(cli, tmp_path):
    model = gpt2_model()
    target = convert(cli, model, tmp_path, 1, "fp32", "fp32")
    ignored = json.loads((target / "manifest.json").read_text())["ignored_tensors"]
    assert sorted(ignored) == sorted(model.extra)


def test_untied_gpt2_also_writes_its_lm_head(cli, tmp_path):
    model = gpt2_model()
    model.config["tie_word_embeddings"] = False
    model.tensors["lm_head.weight"] = np.random.default_rng(9).standard_normal((110, 64)).astype(np.float32)
    target = convert(cli, model, tmp_path, 1, "fp32", "fp32")
    assert (target / "model.lm_head.weight.bin").read_bytes() == file_bytes(model.tensors["lm_head.weight"], "fp32")


def test_gptj_config_ini_and_rotary_fallback(cli, tmp_path):
    model = gptj_model(rotary_dim=None)
    target = convert(cli, model, tmp_path, 2, "fp32", "fp32")
    assert dict(read_ini(target)["gptj"]) == {
        "model_name": "gptj",
        "head_num": "4",
        "size_per_head": "16",
        "inter_size": "256",
        "num_layer": "2",
        "rotary_embedding": "16",
        "vocab_size": "130",
        "start_id": "3",
        "end_id": "4",
        "weight_data_type": "fp32",
    }


def test_manifest_records_every_file_hash_and_the_sources(cli, tmp_path):
    import hashlib

    model = gptj_model()
    target = convert(cli, model, tmp_path, 2, "fp16", "fp32")
    manifest = json.loads((target / "manifest.json").read_text())
    assert (manifest["family"], manifest["ft_model_type"], manifest["tensor_parallel"]) == ("gptj", "GPT-J", 2)
    assert manifest["weight_data_type"] == "fp16"
    assert sorted(manifest["files"]) == sorted(p.name for p in target.glob("*.bin"))
    for name, entry in manifest["files"].items():
        data = (target / name).read_bytes()
        assert entry["sha256"] == hashlib.sha256(data).hexdigest()
        assert entry["size"] == len(data) == int(np.prod(entry["shape"])) * 2
    source = tmp_path / "hf" / "model.safetensors"
    assert manifest["source"]["files"]["model.safetensors"]["sha256"] == hashlib.sha256(source.read_bytes()).hexdigest()
    assert set(manifest["source"]["files"]) == {"config.json", "model.safetensors"}
    assert manifest["config_ini"]["sha256"] == hashlib.sha256((target / "config.ini").read_bytes()).hexdigest()
