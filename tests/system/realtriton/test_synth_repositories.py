"""The model repositories ``tritonft synth`` renders for every stack load READY in a real Triton and answer
through their ensembles over HTTP and gRPC: a generator's with tokenizer files added and the FT step stood in for;
an encoder's with the real all-MiniLM-L6-v2 converted by the project and its ONNX step run by the Python-backend
stand-in (this Triton has no ONNX Runtime backend), answering sentence-transformers' golden embedding."""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient
import yaml

from tests.plans import StackPlans
from tests.system.realtriton.client import PROTOCOLS, ask
from tests.system.realtriton.conftest import ServeTriton
from tests.system.realtriton.repos import ROOT
from tests.system.realtriton.test_encoders import infer
from tests.tolerances import FP16_ATOL, FP32_ATOL
from tests.tritonft.encoder.checkpoints import MINILM_SPEC, golden
from tests.tritonft.encoder.conftest import MINILM
from tritonft.encoder.convert import MODEL_FILE
from tritonft.encoder.repo import EncoderNames, make_python_engine
from tritonft.local_triton import TritonRuntime
from tritonft.repo.naming import SPEC_FILE, VERSION, RepoNames
from tritonft.repo.render import tokenizer_files
from tritonft.spec import Family, ModelSpec, WeightDType
from tritonft.standin import standin_all
from tritonft.synth.stackfile import available_stacks, read_project

pytestmark = pytest.mark.slow

STACKS = available_stacks(ROOT, read_project(ROOT))


def stack_specs(synth_out: Path) -> dict[str, ModelSpec]:
    """Each model's spec as the stack's conversion Job receives it (its spec ConfigMap in the synth output)."""
    specs = {}
    for manifest in synth_out.glob("manifests/*/configmap-*-spec.yaml"):
        spec = ModelSpec.from_json(yaml.safe_load(manifest.read_text())["data"]["spec.json"])
        specs[spec.name] = spec
    return specs


def served_encoder_copy(repo: Path, served: Path, spec: ModelSpec, converted: Path, checkpoint: Path) -> None:
    """The synthesized encoder repository with the real conversion's ``model.onnx`` and ``tokenizer.json`` put where
    the conversion Job puts them, its ONNX step turned into the Python-backend stand-in."""
    assert spec.hf_repo == MINILM_SPEC.hf_repo, f"no real checkpoint here for {spec.name} ({spec.hf_repo})"
    shutil.copytree(repo, served, dirs_exist_ok=True)
    names = EncoderNames.of(spec.name)
    (served / names.onnx / VERSION).mkdir(exist_ok=True)
    shutil.copyfile(converted / MODEL_FILE, served / names.onnx / VERSION / MODEL_FILE)
    shutil.copyfile(checkpoint / "tokenizer.json", served / names.tokenizer / VERSION / "tokenizer.json")
    make_python_engine(served / names.onnx)


def served_copy(synth_out: Path, served: Path, tokenizers: dict[Family, Path]) -> list[ModelSpec]:
    """Every generator's ``model_repos/<model>/`` of a synth output merged into one repository, tokenizer files in
    both Python models, FT steps stood in for; returns the specs (from each FT model's provenance file)."""
    specs = []
    for repo in sorted((synth_out / "model_repos").iterdir()):
        if not (repo / f"{repo.name}-ft").is_dir():
            continue  # an encoder: served_encoder_copy
        shutil.copytree(repo, served, dirs_exist_ok=True)
        spec = ModelSpec.from_json((repo / f"{repo.name}-ft" / SPEC_FILE).read_text())
        names = RepoNames.of(spec)
        for model in (names.preprocessing, names.postprocessing):
            for name, content in tokenizer_files(tokenizers[spec.family]).items():
                (served / model / VERSION / name).write_bytes(content)
        specs.append(spec)
    standin_all(served)
    return specs


@pytest.fixture
def minilm_files(
    encoder_converted: Callable[..., Path], encoder_checkpoint: Callable[[str], Path]
) -> Callable[[WeightDType], tuple[Path, Path]]:
    """The real all-MiniLM-L6-v2 converted at a dtype (``OUT/onnx``), and its checkpoint directory."""
    return lambda dtype: (encoder_converted(MINILM, str(dtype)), encoder_checkpoint(MINILM))


@pytest.mark.parametrize("stack", STACKS)
def test_every_synthesized_repository_of_the_stack_is_served_and_answers(  # noqa: PLR0917
    stack: str,
    stack_plan: StackPlans,
    tmp_path: Path,
    serve_triton: ServeTriton,
    newest_runtime: TritonRuntime,
    tokenizers: dict[Family, Path],
    minilm_files: Callable[[WeightDType], tuple[Path, Path]],
) -> None:
    synth, served, served_encoders = stack_plan(stack).out, tmp_path / "served", tmp_path / "served-encoders"
    specs = served_copy(synth, served, tokenizers)
    encoders = [spec for spec in stack_specs(synth).values() if spec.family.is_encoder]
    for spec in encoders:
        served_encoder_copy(synth / "model_repos" / spec.name, served_encoders, spec, *minilm_files(spec.weight_dtype))
    assert specs, f"stack {stack} renders no model repository"
    # Each server image's models on its server: the generators on 2.33.0 (the FT image's), the encoders on 2.51.0.
    server = serve_triton(served, shared=False)
    encoder_server = serve_triton(served_encoders, shared=False, runtime=newest_runtime) if encoders else None
    try:
        index = httpclient.InferenceServerClient(server.http_url).get_model_repository_index()
        expected = {name for spec in specs for name in RepoNames.of(spec).by_role().values()}
        assert {m["name"]: m.get("state") for m in index} == dict.fromkeys(expected, "READY")
        for spec in specs:
            for protocol in PROTOCOLS:
                assert ask(server, spec.name, ["hello world"], protocol) == [["hello world"]], (spec.name, protocol)
        if encoder_server is not None:
            index = httpclient.InferenceServerClient(encoder_server.http_url).get_model_repository_index()
            expected = {name for spec in encoders for name in dataclasses.astuple(EncoderNames.of(spec.name))}
            assert {m["name"]: m.get("state") for m in index} == dict.fromkeys(expected, "READY")
        truth = golden(MINILM)
        for spec in encoders:
            assert encoder_server is not None
            for protocol in PROTOCOLS:
                embedding = infer(encoder_server, spec.name, [truth["texts"][0]], protocol).as_numpy("embedding")
                atol = FP32_ATOL if spec.weight_dtype is WeightDType.FP32 else FP16_ATOL
                np.testing.assert_allclose(embedding[0], truth["embeddings"][0], rtol=0, atol=atol)
    finally:
        server.stop()
        if encoder_server is not None:
            encoder_server.stop()
