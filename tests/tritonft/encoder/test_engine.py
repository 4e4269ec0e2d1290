"""The ONNX Runtime engine: an encoder's spec sizes, renders and writes exactly what its conversion holds."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import text_format  # type: ignore[import-untyped]  # no types-protobuf in the lock
from tritonclient.grpc.model_config_pb2 import ModelConfig

from components.common.sizing import cpu_server_sizing
from tritonft.cli import main
from tritonft.convert.tensors import open_checkpoint
from tritonft.encoder.checkpoint import read_encoder_config
from tritonft.encoder.graph import required_tensors
from tritonft.engines import ONNXRUNTIME
from tritonft.engines.base import RepositorySources
from tritonft.engines.onnxruntime import CPU_THREADS_PER_INSTANCE
from tritonft.errors import UserError
from tritonft.repo.check import check_repository
from tritonft.spec import (
    Architecture,
    Batching,
    Device,
    EncoderSpec,
    EncoderTask,
    Family,
    ModelSpec,
    Pooling,
    WeightDType,
)

VARIANTS = (
    "bert-mean-normalized",
    "bert-classifier",
    "roberta-mean-normalized",
    "roberta-classifier",
    "distilbert-mean-normalized",
    "distilbert-classifier",
)


def spec_of(name: str, converted: Path, **changes: Any) -> ModelSpec:
    """The spec a stack would state for the model ``converted`` holds (what its manifest records)."""
    manifest = json.loads((converted / "manifest.json").read_text())
    arch = manifest["architecture"]
    task = EncoderTask(manifest["task"])
    return replace(
        ModelSpec(
            name=name,
            family=Family.BERT,
            hf_repo=f"acme/{name}",
            revision="0" * 40,
            architecture=Architecture(
                d_model=arch["hidden_size"],
                num_heads=arch["num_heads"],
                num_layers=arch["num_layers"],
                d_ff=arch["intermediate_size"],
                vocab_size=arch["vocab_size"],
                max_positions=arch["max_positions"],
            ),
            weight_dtype=WeightDType(manifest["dtype"]),
            batching=Batching(max_batch_size=16, max_queue_delay_us=100),
            encoder=EncoderSpec(
                task=task,
                pooling=Pooling(manifest.get("pooling", "mean")),
                normalize=manifest.get("normalize", True),
                labels=tuple(manifest.get("labels", ())),
                max_seq_length=manifest["max_seq_length"],
                type_vocab_size=arch["type_vocab_size"],
            ),
        ),
        **changes,
    )


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_spec_counts_exactly_the_checkpoint_tensors_the_graph_reads(
    variant: str, encoder_checkpoint: Callable[[str], Path], encoder_converted: Callable[..., Path]
) -> None:
    directory = encoder_checkpoint(variant)
    checkpoint = open_checkpoint(directory)
    config = read_encoder_config(
        directory, json.loads((directory / "config.json").read_text()), set(checkpoint.tensors)
    )
    read = sum(int(_product(checkpoint.shapes[name])) for name in required_tensors(config))
    assert spec_of(variant, encoder_converted(variant)).parameters == read


def _product(shape: Any) -> int:
    total = 1
    for size in shape:
        total *= int(size)
    return total


@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
@pytest.mark.parametrize("variant", VARIANTS)
def test_converted_bytes_are_the_weights_model_onnx_holds(
    variant: str, dtype: str, encoder_converted: Callable[..., Path]
) -> None:
    converted = encoder_converted(variant, dtype)
    expected = ONNXRUNTIME.converted_bytes(spec_of(variant, converted))
    size = (converted / "model.onnx").stat().st_size
    assert expected <= size <= expected + 64 * 1024, "the graph and its constants are a few kilobytes"


@pytest.mark.parametrize("cpu_stand_in", [False, True], ids=["onnxruntime", "stand-in"])
@pytest.mark.parametrize("variant", VARIANTS)
def test_the_engine_writes_the_repository_it_renders_and_the_checker_passes_it(
    variant: str,
    cpu_stand_in: bool,
    tmp_path: Path,
    encoder_checkpoint: Callable[[str], Path],
    encoder_converted: Callable[..., Path],
) -> None:
    converted = encoder_converted(variant)
    spec = spec_of("enc", converted)
    sources = RepositorySources(converted.parent, encoder_checkpoint(variant), cpu_stand_in=cpu_stand_in)
    written = ONNXRUNTIME.write_repository(spec, tmp_path, sources)
    assert written.models == ("enc-tokenizer", "enc-onnx", "enc")
    assert written.config_source == converted / "manifest.json"
    assert {"enc-onnx/1/model.onnx", "enc-tokenizer/1/tokenizer.json"} <= set(written.files)
    if not cpu_stand_in:
        rendered = ONNXRUNTIME.repository_files(spec)
        assert {path: (tmp_path / path).read_bytes() for path in rendered} == rendered
    assert check_repository(tmp_path, require_checkpoint=True) == []
    onnx_config = (tmp_path / "enc-onnx" / "config.pbtxt").read_text()
    assert ('backend: "python"' in onnx_config) is cpu_stand_in
    assert ("KIND_GPU" in onnx_config) is not cpu_stand_in
    assert "max_batch_size: 16" in onnx_config


def test_an_encoder_on_cpu_nodes_renders_cpu_instances_in_the_onnx_runtime_backend(
    encoder_converted: Callable[..., Path],
) -> None:
    spec = replace(spec_of("enc", encoder_converted("bert-mean-normalized")), device=Device.CPU)
    onnx_config = ONNXRUNTIME.repository_files(spec)["enc-onnx/config.pbtxt"].decode()
    assert 'platform: "onnxruntime_onnx"' in onnx_config
    assert "KIND_CPU" in onnx_config and "KIND_GPU" not in onnx_config
    assert "tensorrt" not in onnx_config


def test_an_encoder_on_cpu_nodes_runs_onnx_runtime_with_the_threads_its_pod_requests(
    encoder_converted: Callable[..., Path],
) -> None:
    spec = replace(spec_of("enc", encoder_converted("bert-mean-normalized")), device=Device.CPU)
    config = ModelConfig()
    text_format.Parse(ONNXRUNTIME.repository_files(spec)["enc-onnx/config.pbtxt"].decode(), config)
    threads = int(config.parameters["intra_op_thread_count"].string_value)
    assert threads == CPU_THREADS_PER_INSTANCE
    requested = cpu_server_sizing(spec).cpu_request
    assert int(requested) == spec.instances * threads + 1, "one requested CPU per instance's threads, one for serving"


def test_an_encoder_on_a_gpu_leaves_onnx_runtimes_threads_to_the_backend(
    encoder_converted: Callable[..., Path],
) -> None:
    spec = spec_of("enc", encoder_converted("bert-mean-normalized"))
    config = ModelConfig()
    text_format.Parse(ONNXRUNTIME.repository_files(spec)["enc-onnx/config.pbtxt"].decode(), config)
    assert "intra_op_thread_count" not in config.parameters


def test_a_conversion_that_is_not_the_specs_model_is_refused(
    tmp_path: Path, encoder_checkpoint: Callable[[str], Path], encoder_converted: Callable[..., Path]
) -> None:
    converted = encoder_converted("bert-mean-normalized")
    spec = spec_of("enc", converted)
    assert spec.encoder is not None
    wrong = replace(spec, encoder=replace(spec.encoder, pooling=Pooling.CLS, max_seq_length=64))
    with pytest.raises(UserError) as err:
        ONNXRUNTIME.write_repository(
            wrong, tmp_path, RepositorySources(converted, encoder_checkpoint("bert-mean-normalized"))
        )
    assert "is not the conversion of model 'enc'" in str(err.value)
    assert err.value.problems == [
        "max_seq_length: the spec says 64, the conversion 128",
        "pooling: the spec says 'cls', the conversion 'mean'",
    ]
    assert not any(tmp_path.iterdir())


def test_the_repository_is_not_written_without_the_tokenizer(
    tmp_path: Path, encoder_converted: Callable[..., Path]
) -> None:
    converted = encoder_converted("bert-mean-normalized")
    with pytest.raises(UserError, match=r"tokenizer\.json"):
        ONNXRUNTIME.write_repository(spec_of("enc", converted), tmp_path, RepositorySources(converted))


def test_a_generator_spec_is_refused_by_the_encoder_engine() -> None:
    from tests.components.fixtures import T5_SMALL

    with pytest.raises(UserError, match="is not an encoder served by ONNX Runtime"):
        ONNXRUNTIME.repository_files(T5_SMALL)


def test_convert_sends_the_encoder_options_through_the_engine(
    tmp_path: Path, encoder_checkpoint: Callable[[str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["convert", "--input", str(encoder_checkpoint("bert-mean-normalized")), "--output", str(tmp_path)]
    assert main([*args, "--pooling", "cls", "--max-seq-length", "64"]) == 0
    manifest = json.loads((tmp_path / "onnx" / "manifest.json").read_text())
    assert (manifest["pooling"], manifest["max_seq_length"]) == ("cls", 64)
    assert "converted bert fp32" in capsys.readouterr().out


def test_encoder_options_are_refused_for_a_generator(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    args = ["convert", "--input", str(tmp_path), "--output", str(tmp_path / "out"), "--tp", "1"]
    assert main([*args, "--pooling", "cls", "--optimize"]) != 0
    assert "--pooling, --optimize: encoder options (family bert), not for a 'gpt2' model" in capsys.readouterr().err
