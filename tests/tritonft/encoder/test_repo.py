"""The encoder's Triton repository: rendered configs, written atomically, and checked like the FT repositories."""

from __future__ import annotations

from pathlib import Path

import pytest
from google.protobuf import text_format  # type: ignore[import-untyped]
from tritonclient.grpc import model_config_pb2 as mc

from tritonft.encoder.convert import read_manifest
from tritonft.encoder.repo import (
    EncoderServing,
    OnnxEngine,
    make_python_engine,
    render_encoder_files,
    write_encoder_repository,
)
from tritonft.errors import UserError
from tritonft.repo.check import check_repository


def parse(path: Path) -> mc.ModelConfig:
    return text_format.Parse(path.read_text(), mc.ModelConfig())


@pytest.fixture
def embed_repo(tmp_path, encoder_converted, encoder_checkpoint):
    name = "bert-mean-normalized"
    write_encoder_repository(
        EncoderServing("emb", engine=OnnxEngine.PYTHON),
        encoder_converted(name),
        encoder_checkpoint(name),
        tmp_path / "repo",
    )
    return tmp_path / "repo"


@pytest.mark.parametrize("engine", list(OnnxEngine))
@pytest.mark.parametrize("name", ["bert-mean-normalized", "bert-classifier"])
def test_written_repository_passes_the_checker_with_its_model_files(
    tmp_path, encoder_converted, encoder_checkpoint, engine, name
):
    models = write_encoder_repository(
        EncoderServing("m", engine=engine), encoder_converted(name), encoder_checkpoint(name), tmp_path / "repo"
    )
    assert models == ["m-tokenizer", "m-onnx", "m"]
    assert check_repository(tmp_path / "repo", require_checkpoint=True) == []


def test_embed_ensemble_turns_text_into_an_embedding_and_a_token_count(embed_repo):
    ensemble = parse(embed_repo / "emb" / "config.pbtxt")
    assert ensemble.platform == "ensemble"
    assert [(i.name, i.data_type, list(i.dims)) for i in ensemble.input] == [("text_input", mc.TYPE_STRING, [1])]
    assert [(o.name, o.data_type, list(o.dims)) for o in ensemble.output] == [
        ("embedding", mc.TYPE_FP32, [64]),
        ("num_tokens", mc.TYPE_INT32, [1]),
    ]
    assert [s.model_name for s in ensemble.ensemble_scheduling.step] == ["emb-tokenizer", "emb-onnx"]


def test_classify_ensemble_answers_label_scores_and_logits(tmp_path, encoder_converted, encoder_checkpoint):
    name = "bert-classifier"
    files = render_encoder_files(EncoderServing("clf"), read_manifest(encoder_converted(name)))
    ensemble = text_format.Parse(files["clf/config.pbtxt"].decode(), mc.ModelConfig())
    assert [(o.name, list(o.dims)) for o in ensemble.output] == [
        ("logits", [3]),
        ("scores", [3]),
        ("label", [1]),
        ("num_tokens", [1]),
    ]


def test_onnx_model_is_for_the_onnxruntime_backend_with_dynamic_batching(encoder_converted):
    files = render_encoder_files(
        EncoderServing("m", max_batch_size=16, max_queue_delay_us=500, instances=2),
        read_manifest(encoder_converted("bert-mean-normalized")),
    )
    config = text_format.Parse(files["m-onnx/config.pbtxt"].decode(), mc.ModelConfig())
    assert config.platform == "onnxruntime_onnx"
    assert config.max_batch_size == 16
    assert config.dynamic_batching.max_queue_delay_microseconds == 500
    assert [(g.count, g.kind) for g in config.instance_group] == [(2, mc.ModelInstanceGroup.KIND_CPU)]
    assert "m-onnx/1/model.py" not in files


def test_fp16_on_a_gpu_gets_the_tensorrt_accelerator_in_fp16(encoder_converted):
    manifest = read_manifest(encoder_converted("bert-mean-normalized", "fp16"))
    files = render_encoder_files(EncoderServing("m", gpu=True), manifest)
    config = text_format.Parse(files["m-onnx/config.pbtxt"].decode(), mc.ModelConfig())
    assert [g.kind for g in config.instance_group] == [mc.ModelInstanceGroup.KIND_GPU]
    (accelerator,) = config.optimization.execution_accelerators.gpu_execution_accelerator
    assert (accelerator.name, accelerator.parameters["precision_mode"]) == ("tensorrt", "FP16")


def test_python_stand_in_keeps_the_onnx_models_inputs_and_outputs(encoder_converted):
    manifest = read_manifest(encoder_converted("bert-mean-normalized"))
    real = text_format.Parse(
        render_encoder_files(EncoderServing("m"), manifest)["m-onnx/config.pbtxt"].decode(), mc.ModelConfig()
    )
    files = render_encoder_files(EncoderServing("m", engine=OnnxEngine.PYTHON), manifest)
    stand_in = text_format.Parse(files["m-onnx/config.pbtxt"].decode(), mc.ModelConfig())
    assert stand_in.backend == "python"
    assert list(stand_in.input) == list(real.input)
    assert list(stand_in.output) == list(real.output)
    assert "m-onnx/1/model.py" in files


def test_a_rendered_gpu_onnx_model_becomes_the_stand_in_rendered_for_the_cpu(tmp_path, encoder_converted):
    manifest = read_manifest(encoder_converted("bert-mean-normalized", "fp16"))
    rendered = render_encoder_files(EncoderServing("m", gpu=True, intra_op_threads=2), manifest)["m-onnx/config.pbtxt"]
    (tmp_path / "m-onnx").mkdir()
    (tmp_path / "m-onnx" / "config.pbtxt").write_bytes(rendered)
    make_python_engine(tmp_path / "m-onnx")
    direct = render_encoder_files(EncoderServing("m", engine=OnnxEngine.PYTHON, intra_op_threads=2), manifest)
    assert parse(tmp_path / "m-onnx" / "config.pbtxt") == text_format.Parse(
        direct["m-onnx/config.pbtxt"].decode(), mc.ModelConfig()
    )
    assert (tmp_path / "m-onnx" / "1" / "model.py").read_bytes() == direct["m-onnx/1/model.py"]


def test_only_an_onnx_runtime_model_becomes_the_stand_in(embed_repo):
    with pytest.raises(ValueError, match="is not a rendered ONNX Runtime model"):
        make_python_engine(embed_repo / "emb-tokenizer")


def test_the_stand_in_cannot_be_placed_on_a_gpu(encoder_converted):
    with pytest.raises(UserError, match="runs on the CPU"):
        render_encoder_files(
            EncoderServing("m", gpu=True, engine=OnnxEngine.PYTHON),
            read_manifest(encoder_converted("bert-mean-normalized")),
        )


def test_bad_serving_values_are_all_listed(encoder_converted):
    with pytest.raises(UserError) as caught:
        render_encoder_files(
            EncoderServing("bad name", max_batch_size=0, instances=0),
            read_manifest(encoder_converted("bert-mean-normalized")),
        )
    assert len(caught.value.problems) == 3


def test_checker_finds_a_declared_output_the_model_does_not_have(embed_repo):
    path = embed_repo / "emb-onnx" / "config.pbtxt"
    path.write_text(path.read_text().replace('name: "embedding"', 'name: "pooled"'))
    problems = check_repository(embed_repo)
    assert any("output 'pooled' is not an output of model.onnx" in p for p in problems)
    assert any("the model's output 'embedding' is not declared" in p for p in problems)


def test_checker_finds_a_wrong_embedding_width(embed_repo):
    path = embed_repo / "emb-onnx" / "config.pbtxt"
    path.write_text(path.read_text().replace("dims: [64]", "dims: [384]"))
    assert any("dims [384] but model.onnx has [64]" in p for p in check_repository(embed_repo))


def test_checker_requires_the_model_file_in_the_conversion_job(embed_repo):
    (embed_repo / "emb-onnx" / "1" / "model.onnx").unlink()
    assert check_repository(embed_repo) == []
    assert "emb-onnx/1: no model.onnx" in check_repository(embed_repo, require_checkpoint=True)


def test_checker_finds_a_model_file_that_is_not_the_converted_one(embed_repo):
    model = embed_repo / "emb-onnx" / "1" / "model.onnx"
    data = bytearray(model.read_bytes())
    data[-1] ^= 1
    model.write_bytes(bytes(data))
    problems = check_repository(embed_repo, require_checkpoint=True)
    assert any("sha256 differs from the conversion's manifest" in p for p in problems)


def test_rewriting_replaces_the_models_and_leaves_no_staging_directory(
    embed_repo, encoder_converted, encoder_checkpoint
):
    name = "bert-mean-normalized"
    write_encoder_repository(
        EncoderServing("emb", engine=OnnxEngine.PYTHON, max_batch_size=4),
        encoder_converted(name),
        encoder_checkpoint(name),
        embed_repo,
    )
    assert sorted(p.name for p in embed_repo.iterdir()) == ["emb", "emb-onnx", "emb-tokenizer"]
    assert parse(embed_repo / "emb-onnx" / "config.pbtxt").max_batch_size == 4


def test_a_missing_tokenizer_json_is_named(tmp_path, encoder_converted):
    with pytest.raises(UserError, match=r"tokenizer.json is missing"):
        write_encoder_repository(
            EncoderServing("m"), encoder_converted("bert-mean-normalized"), tmp_path, tmp_path / "repo"
        )


def test_encoder_repo_command_writes_and_checks_the_repository(tmp_path, encoder_converted, encoder_checkpoint, capsys):
    from tritonft.cli import main

    name = "bert-classifier"
    args = ["encoder-repo", "--name", "clf", "--converted", str(encoder_converted(name))]
    args += ["--tokenizer", str(encoder_checkpoint(name)), "--out", str(tmp_path / "repo"), "--engine", "python"]
    assert main(args) == 0
    assert "checked: no problems" in capsys.readouterr().out
    assert parse(tmp_path / "repo" / "clf-onnx" / "config.pbtxt").backend == "python"


def test_encoder_repo_command_refuses_a_directory_that_is_not_a_conversion(tmp_path, encoder_checkpoint, capsys):
    from tritonft.cli import main

    args = ["encoder-repo", "--name", "m", "--converted", str(tmp_path), "--tokenizer", str(tmp_path)]
    assert main([*args, "--out", str(tmp_path / "repo")]) == 1
    assert "point at the OUT/onnx directory of `tritonft convert`" in capsys.readouterr().err
