"""The rendered Python-backend model.py files run end to end against a fake ``triton_python_backend_utils``."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from google.protobuf import json_format, text_format  # type: ignore[import-untyped]
from tritonclient.grpc import model_config_pb2 as mc

from tritonft.repo import write_repository
from tritonft.repo.naming import RepoNames
from tritonft.spec import Family, ModelSpec

from . import fake_pb_utils
from .conftest import CORPUS, make_spec, write_checkpoint

END = {Family.T5: 1, Family.GPT2: 0, Family.GPTJ: 0}  # the tiny test tokenizers' end ids


@pytest.fixture
def triton_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "triton_python_backend_utils", fake_pb_utils)
    monkeypatch.delitem(sys.modules, "tritonft_tokenization", raising=False)


def load_model(model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Import ``<model>/1/model.py`` the way the Python backend does and call ``initialize``."""
    version_dir = model_dir / "1"
    monkeypatch.syspath_prepend(str(version_dir))
    spec = importlib.util.spec_from_file_location(f"model_{model_dir.name.replace('-', '_')}", version_dir / "model.py")
    assert spec is not None and spec.loader is not None
    module: ModuleType = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    config = mc.ModelConfig()
    text_format.Parse((model_dir / "config.pbtxt").read_text(), config)
    model = module.TritonPythonModel()
    model.initialize(
        {
            "model_config": json.dumps(json_format.MessageToDict(config, preserving_proto_field_name=True)),
            "model_repository": str(model_dir),
            "model_version": "1",
        }
    )
    return model


def rendered(tmp_path: Path, family: Family, tokenizer_dir: Path) -> tuple[Path, ModelSpec]:
    spec = make_spec(family)
    version_dir = tmp_path / RepoNames.of(spec).ft / "1"
    write_checkpoint(version_dir, spec, end_id=END[family])
    write_repository(spec, tmp_path, version_dir, tokenizer_dir=tokenizer_dir)
    return tmp_path, spec


@pytest.mark.usefixtures("triton_env")
def test_text_round_trips_through_preprocessing_and_postprocessing(
    tmp_path: Path, family: Family, tokenizer_dir_for: Callable[[Family], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, spec = rendered(tmp_path, family, tokenizer_dir_for(family))
    names = RepoNames.of(spec)
    pre = load_model(root / names.preprocessing, monkeypatch)
    post = load_model(root / names.postprocessing, monkeypatch)
    prompts = [CORPUS[0], "Hello world"]
    request = fake_pb_utils.InferenceRequest(
        {
            "text_input": np.array([[p.encode()] for p in prompts], dtype=object),
            "stop_words": np.array([[b"lamb"], [b""]], dtype=object),
        }
    )
    (response,) = pre.execute([request])
    assert response.error is None
    ids, lengths = response.tensor("input_ids"), response.tensor("input_lengths")
    assert ids.dtype == np.uint32 and lengths.dtype == np.uint32
    assert response.tensor("stop_words_list").shape[:2] == (2, 2)
    assert (response.tensor("request_output_len") == spec.max_output_len).all()
    assert ids[1, int(lengths[1, 0]) :].tolist() == [END[family] if family is not Family.T5 else 0] * (
        ids.shape[1] - int(lengths[1, 0])
    )

    # What FT would send back: GPT repeats the prompt before the completion, T5 returns generated tokens only.
    gpt = family is not Family.T5
    dtype = np.uint32 if gpt else np.int32
    output_ids = np.full((2, 1, ids.shape[1] + 1), END[family], dtype=dtype)
    output_ids[:, 0, : ids.shape[1]] = ids
    sequence_length = lengths.astype(np.int32)
    post_inputs = {"output_ids": output_ids, "sequence_length": sequence_length}
    if gpt:
        post_inputs["input_lengths"] = np.zeros_like(lengths)  # decode the whole echoed prompt
    (answer,) = post.execute([fake_pb_utils.InferenceRequest(post_inputs)])
    assert answer.error is None
    assert [t.decode() for t in answer.tensor("text_output")[:, 0]] == prompts


@pytest.mark.usefixtures("triton_env")
def test_preprocessing_reports_bad_requests_as_errors_not_crashes(
    tmp_path: Path, tokenizer_dir_for: Callable[[Family], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, spec = rendered(tmp_path, Family.GPT2, tokenizer_dir_for(Family.GPT2))
    pre = load_model(root / RepoNames.of(spec).preprocessing, monkeypatch)
    good = fake_pb_utils.InferenceRequest({"text_input": np.array([[b"Hello"]], dtype=object)})
    bad = fake_pb_utils.InferenceRequest({"text_input": np.array([[b"\xff"]], dtype=object)})
    ok, failed = pre.execute([good, bad])
    assert ok.error is None and ok.tensor("input_ids").shape[0] == 1
    assert failed.error is not None and "row 0 is not valid UTF-8" in failed.error.message()
