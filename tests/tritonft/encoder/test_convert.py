"""``tritonft convert`` on BERT checkpoints: output layout, manifest, idempotence, atomicity and clear refusals."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import onnx
import pytest

from tests.tritonft.convert.models import write_safetensors
from tritonft.cli import main
from tritonft.encoder.convert import CONVERTER_VERSION, SCHEMA


def convert(src: Path, out: Path, *extra: str) -> int:
    return main(["convert", "--input", str(src), "--output", str(out), *extra])


@pytest.fixture
def small(encoder_checkpoint, tmp_path):
    """A private copy of the small mean-pooling checkpoint (tests may damage it)."""
    source = encoder_checkpoint("bert-mean-normalized")
    target = tmp_path / "model"
    for path in source.rglob("*"):
        if path.is_file():
            (target / path.relative_to(source)).parent.mkdir(parents=True, exist_ok=True)
            (target / path.relative_to(source)).write_bytes(path.read_bytes())
    return target


def test_family_is_read_from_config_json_and_the_model_lands_in_out_onnx(small, tmp_path, capsys):
    assert convert(small, tmp_path / "out") == 0
    assert sorted(p.name for p in (tmp_path / "out" / "onnx").iterdir()) == ["manifest.json", "model.onnx"]
    assert "verified with ONNX Runtime" in capsys.readouterr().out


def test_manifest_records_the_decisions_the_model_hash_and_the_sources(small, tmp_path):
    assert convert(small, tmp_path / "out") == 0
    target = tmp_path / "out" / "onnx"
    manifest = json.loads((target / "manifest.json").read_text())
    data = (target / "model.onnx").read_bytes()
    assert manifest["schema"] == SCHEMA
    assert manifest["converter_version"] == CONVERTER_VERSION
    assert (manifest["family"], manifest["task"], manifest["pooling"], manifest["normalize"]) == (
        "bert",
        "embed",
        "mean",
        True,
    )
    assert manifest["max_seq_length"] == 128  # from sentence_bert_config.json, not max_position_embeddings
    assert manifest["model"] == {"file": "model.onnx", "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
    sources = manifest["source"]["files"]
    assert set(sources) == {
        "config.json",
        "modules.json",
        "1_Pooling/config.json",
        "sentence_bert_config.json",
        "model.safetensors",
    }
    assert (
        sources["model.safetensors"]["sha256"] == hashlib.sha256((small / "model.safetensors").read_bytes()).hexdigest()
    )
    assert manifest["ignored_tensors"] == ["pooler.dense.bias", "pooler.dense.weight"]


def test_graph_has_dynamic_batch_and_sequence_axes_and_opset_17(small, tmp_path):
    assert convert(small, tmp_path / "out") == 0
    model = onnx.load(str(tmp_path / "out" / "onnx" / "model.onnx"))
    onnx.checker.check_model(model)
    assert [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")] == [17]
    for value in model.graph.input:
        assert [d.dim_param for d in value.type.tensor_type.shape.dim] == ["batch", "sequence"]
    assert [o.name for o in model.graph.output] == ["embedding"]
    assert [d.dim_param or d.dim_value for d in model.graph.output[0].type.tensor_type.shape.dim] == ["batch", 64]


def test_rerun_with_the_same_inputs_writes_nothing(small, tmp_path, capsys):
    assert convert(small, tmp_path / "out") == 0
    model = tmp_path / "out" / "onnx" / "model.onnx"
    before = model.stat().st_mtime_ns
    capsys.readouterr()
    assert convert(small, tmp_path / "out") == 0
    assert "up to date" in capsys.readouterr().out
    assert model.stat().st_mtime_ns == before


def test_rerun_after_the_inputs_were_merely_touched_is_still_up_to_date(small, tmp_path, capsys):
    assert convert(small, tmp_path / "out") == 0
    os.utime(small / "model.safetensors")
    capsys.readouterr()
    assert convert(small, tmp_path / "out") == 0
    assert "up to date" in capsys.readouterr().out


def test_a_different_option_converts_again(small, tmp_path):
    assert convert(small, tmp_path / "out") == 0
    assert convert(small, tmp_path / "out", "--pooling", "cls", "--no-normalize") == 0
    manifest = json.loads((tmp_path / "out" / "onnx" / "manifest.json").read_text())
    assert (manifest["pooling"], manifest["normalize"]) == ("cls", False)


def test_changed_weights_convert_again(small, tmp_path, capsys):
    assert convert(small, tmp_path / "out") == 0
    first = json.loads((tmp_path / "out" / "onnx" / "manifest.json").read_text())["model"]["sha256"]
    from safetensors.numpy import load_file

    tensors = load_file(str(small / "model.safetensors"))
    tensors["embeddings.LayerNorm.bias"][0] += 1.0
    write_safetensors(small / "model.safetensors", tensors, "fp32")
    capsys.readouterr()
    assert convert(small, tmp_path / "out") == 0
    assert "converted" in capsys.readouterr().out
    assert json.loads((tmp_path / "out" / "onnx" / "manifest.json").read_text())["model"]["sha256"] != first


def test_leftovers_of_a_killed_run_are_removed(small, tmp_path):
    out = tmp_path / "out"
    (out / ".onnx.partial-99999").mkdir(parents=True)
    (out / ".onnx.partial-99999" / "model.onnx").write_bytes(b"half")
    assert convert(small, out) == 0
    assert sorted(p.name for p in out.iterdir()) == [".onnx.lock", "onnx"]


def test_a_directory_not_written_by_the_converter_is_never_replaced(small, tmp_path, capsys):
    (tmp_path / "out" / "onnx").mkdir(parents=True)
    (tmp_path / "out" / "onnx" / "mine.txt").write_text("keep")
    assert convert(small, tmp_path / "out") == 1
    assert "not written by `tritonft convert`" in capsys.readouterr().err
    assert (tmp_path / "out" / "onnx" / "mine.txt").read_text() == "keep"


def test_a_missing_tensor_is_named_and_nothing_is_written(small, tmp_path, capsys):
    from safetensors.numpy import load_file

    tensors = load_file(str(small / "model.safetensors"))
    del tensors["encoder.layer.1.output.dense.bias"]
    write_safetensors(small / "model.safetensors", tensors, "fp32")
    assert convert(small, tmp_path / "out") == 1
    assert "tensor encoder.layer.1.output.dense.bias is missing" in capsys.readouterr().err
    assert not (tmp_path / "out" / "onnx").exists()


def test_classify_without_a_head_is_refused_with_the_fix(small, tmp_path, capsys):
    assert convert(small, tmp_path / "out", "--task", "classify") == 1
    assert "has none — use task embed" in capsys.readouterr().err


def test_tensor_parallel_is_refused_for_encoders(small, tmp_path, capsys):
    assert convert(small, tmp_path / "out", "--tp", "2") == 1
    assert "encoders are not split across GPUs" in capsys.readouterr().err


def test_an_unsupported_activation_is_refused(small, tmp_path, capsys):
    config = json.loads((small / "config.json").read_text())
    config["hidden_act"] = "relu"
    (small / "config.json").write_text(json.dumps(config))
    assert convert(small, tmp_path / "out") == 1
    assert "hidden_act = 'relu' is not supported" in capsys.readouterr().err


def test_max_seq_length_above_the_position_table_is_refused(small, tmp_path, capsys):
    assert convert(small, tmp_path / "out", "--max-seq-length", "4096") == 1
    err = capsys.readouterr().err
    assert "max_seq_length 4096 exceeds the 128 positions the model can number (max_position_embeddings 128)" in err


def test_a_roberta_model_numbers_its_positions_after_the_two_it_reserves(encoder_checkpoint, tmp_path, capsys):
    roberta = encoder_checkpoint("roberta-mean-normalized")
    assert convert(roberta, tmp_path / "too-long", "--max-seq-length", "130") == 1
    assert (
        "exceeds the 128 positions the model can number (max_position_embeddings 130, the first 2 reserved by "
        "RoBERTa)" in capsys.readouterr().err
    )
    assert convert(roberta, tmp_path / "out") == 0
    manifest = json.loads((tmp_path / "out" / "onnx" / "manifest.json").read_text())
    assert (manifest["model_type"], manifest["position_offset"], manifest["family"]) == ("roberta", 2, "bert")
    assert manifest["max_seq_length"] == 128  # sentence_bert_config.json's


def test_a_bert_manifest_does_not_name_a_model_type(small, tmp_path):
    # BERT conversions written before RoBERTa was supported stay up to date: their manifests are unchanged
    assert convert(small, tmp_path / "out") == 0
    manifest = json.loads((tmp_path / "out" / "onnx" / "manifest.json").read_text())
    assert "model_type" not in manifest and "position_offset" not in manifest


def test_a_roberta_classifier_without_its_head_is_refused_naming_the_head(encoder_checkpoint, tmp_path, capsys):
    source = encoder_checkpoint("roberta-classifier")
    assert convert(source, tmp_path / "out", "--task", "classify") == 0
    headless = encoder_checkpoint("roberta-mean-normalized")
    assert convert(headless, tmp_path / "out2", "--task", "classify") == 1
    assert (
        "task classify needs a sequence-classification head (classifier.dense.weight and "
        "classifier.out_proj.weight)" in capsys.readouterr().err
    )


def test_ft_families_still_require_tp(tmp_path, capsys):
    (tmp_path / "t5").mkdir()
    (tmp_path / "t5" / "config.json").write_text(json.dumps({"model_type": "t5"}))
    assert convert(tmp_path / "t5", tmp_path / "out") == 1
    assert "--tp is required" in capsys.readouterr().err


def test_two_conversions_of_the_same_checkpoint_are_byte_identical(small, tmp_path):
    assert convert(small, tmp_path / "a") == 0
    assert convert(small, tmp_path / "b") == 0
    assert (tmp_path / "a" / "onnx" / "model.onnx").read_bytes() == (
        tmp_path / "b" / "onnx" / "model.onnx"
    ).read_bytes()


def test_optimize_is_part_of_the_conversion_and_rerun_check(small, tmp_path, capsys):
    assert convert(small, tmp_path / "out") == 0
    capsys.readouterr()
    assert convert(small, tmp_path / "out", "--optimize") == 0
    assert "converted" in capsys.readouterr().out
    manifest = json.loads((tmp_path / "out" / "onnx" / "manifest.json").read_text())
    assert manifest["optimized"] is True
    assert manifest["fused_operators"]["Attention"] == 2
    assert convert(small, tmp_path / "out", "--optimize") == 0
    assert "up to date" in capsys.readouterr().out


@pytest.mark.parametrize("extra", [(), ("--optimize",)], ids=["plain", "optimized"])
def test_a_distilbert_graph_takes_the_same_three_inputs_though_it_has_no_token_types(
    encoder_checkpoint, tmp_path, extra
):
    assert convert(encoder_checkpoint("distilbert-mean-normalized"), tmp_path / "out", *extra) == 0
    graph = onnx.load(str(tmp_path / "out" / "onnx" / "model.onnx")).graph
    assert sorted(i.name for i in graph.input) == ["attention_mask", "input_ids", "token_type_ids"]
    manifest = json.loads((tmp_path / "out" / "onnx" / "manifest.json").read_text())
    assert manifest["model_type"] == "distilbert" and manifest["architecture"]["type_vocab_size"] == 0
