"""The rendered ``model_warmup`` samples (:func:`tritonft.repo.pbtxt.add_warmup`) loaded and run by the real servers:
tritonserver 2.33.0 (NGC 23.04, the FasterTransformer image's) and 2.51.0 (the newest a wheel gives), one test each.

Every family and the streaming (decoupled) GPT-2 of the matrix are rendered, their FT step stood in for by the echo
stand-in that records what it receives. Triton runs a model's warmup sample before it reports the model ready and
fails the model's load (and, with ``--exit-on-error``, the server) when the sample fails: so a server that comes up
READY has run every sample (the FT step's and the detokenizer's) without error, and the FT step's recording shows
the sample arrived as rendered, data files read."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest

from tests.system.realtriton.conftest import ServeTriton
from tests.system.realtriton.repos import MATRIX, render_with_cli
from tritonft.local_triton import TritonRuntime
from tritonft.repo.naming import RepoNames
from tritonft.repo.pbtxt import WARMUP_VALUE
from tritonft.spec import Family
from tritonft.standin import received, set_behaviour, standin_all

pytestmark = pytest.mark.slow

MODELS = ("t5-tp1", "gpt2-tp1", "gptj-tp1", "gpt2-stream")
FIRST_INPUT = {Family.T5: ("sequence_length", "max_output_len"), Family.GPT2: ("input_lengths", "request_output_len")}


def warmup_repository(tmp: Path, tokenizers: dict[Family, Path]) -> Path:
    out = tmp / "repo"
    for spec in (s for s in MATRIX if s.name in MODELS):
        scratch = tmp / f"scratch-{spec.name}"
        scratch.mkdir()
        render_with_cli(spec, out, tokenizers[spec.family], scratch)
    standin_all(out)
    for spec in (s for s in MATRIX if s.name in MODELS):
        set_behaviour(out / RepoNames.of(spec).ft, record=True)
    return out


def ready_models(http_url: str) -> set[str]:
    request = urllib.request.Request(f"http://{http_url}/v2/repository/index", data=b"{}", method="POST")
    with urllib.request.urlopen(request, timeout=10) as answer:
        return {entry["name"] for entry in json.loads(answer.read()) if entry.get("state") == "READY"}


def server_version(http_url: str) -> str:
    with urllib.request.urlopen(f"http://{http_url}/v2", timeout=10) as answer:
        return str(json.loads(answer.read())["version"])


def check_warmed_up(repository: Path, http_url: str) -> None:
    expected = {name for spec in MATRIX if spec.name in MODELS for name in RepoNames.of(spec).by_role().values()}
    assert expected <= ready_models(http_url)
    for spec in (s for s in MATRIX if s.name in MODELS):
        family = Family.T5 if spec.family is Family.T5 else Family.GPT2
        length, output_len = FIRST_INPUT[family]
        (sample, *_) = received(repository / RepoNames.of(spec).ft)
        assert sample["input_ids"][1:] == ([1, 1], [[WARMUP_VALUE]]), spec.name
        assert sample[length][2] == [WARMUP_VALUE], spec.name
        assert sample[output_len][2] in ([WARMUP_VALUE], [[WARMUP_VALUE]]), spec.name


def test_every_warmup_sample_runs_on_the_ft_image_s_server_2_33_0(
    serve_triton: ServeTriton,
    triton_runtime: TritonRuntime,
    tokenizers: dict[Family, Path],
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    repository = warmup_repository(tmp_path_factory.mktemp("warmup-2330"), tokenizers)
    server = serve_triton(repository, shared=False, runtime=triton_runtime)
    assert server_version(server.http_url) == "2.33.0"
    check_warmed_up(repository, server.http_url)


def test_every_warmup_sample_runs_on_the_newest_server_2_51_0(
    serve_triton: ServeTriton,
    newest_runtime: TritonRuntime,
    tokenizers: dict[Family, Path],
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    repository = warmup_repository(tmp_path_factory.mktemp("warmup-2510"), tokenizers)
    server = serve_triton(repository, shared=False, runtime=newest_runtime)
    assert server_version(server.http_url) == "2.51.0"
    check_warmed_up(repository, server.http_url)
