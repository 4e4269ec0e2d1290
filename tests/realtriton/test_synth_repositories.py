"""The model repositories ``tritonft synth`` renders for every stack load READY in a real Triton and answer
through their ensembles over HTTP and gRPC (tokenizer files added, the FT step stood in for)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import tritonclient.http as httpclient

from tests.realtriton.client import PROTOCOLS, ask
from tests.realtriton.conftest import ServeTriton
from tests.realtriton.repos import ROOT
from tritonft.repo.naming import SPEC_FILE, VERSION, RepoNames
from tritonft.repo.render import tokenizer_files
from tritonft.spec import Family, ModelSpec
from tritonft.standin import standin_all
from tritonft.synth.run import synthesize
from tritonft.synth.stackfile import available_stacks, read_project

pytestmark = pytest.mark.slow

STACKS = available_stacks(ROOT, read_project(ROOT))


def served_copy(synth_out: Path, served: Path, tokenizers: dict[Family, Path]) -> list[ModelSpec]:
    """Every ``model_repos/<model>/`` of a synth output merged into one repository, tokenizer files in both
    Python models, FT steps stood in for; returns the specs (from each FT model's provenance file)."""
    specs = []
    for repo in sorted((synth_out / "model_repos").iterdir()):
        shutil.copytree(repo, served, dirs_exist_ok=True)
        spec = ModelSpec.from_json((repo / f"{repo.name}-ft" / SPEC_FILE).read_text())
        names = RepoNames.of(spec)
        for model in (names.preprocessing, names.postprocessing):
            for name, content in tokenizer_files(tokenizers[spec.family]).items():
                (served / model / VERSION / name).write_bytes(content)
        specs.append(spec)
    standin_all(served)
    return specs


@pytest.mark.parametrize("stack", STACKS)
def test_every_synthesized_repository_of_the_stack_is_served_and_answers(
    stack: str, tmp_path: Path, serve_triton: ServeTriton, tokenizers: dict[Family, Path]
) -> None:
    synthesize(stack, out=tmp_path / "synth", project_dir=ROOT)
    specs = served_copy(tmp_path / "synth", tmp_path / "served", tokenizers)
    assert specs, f"stack {stack} renders no model repository"
    server = serve_triton(tmp_path / "served", shared=False)
    try:
        index = httpclient.InferenceServerClient(server.http_url).get_model_repository_index()
        expected = {name for spec in specs for name in RepoNames.of(spec).by_role().values()}
        assert {m["name"]: m.get("state") for m in index} == dict.fromkeys(expected, "READY")
        for spec in specs:
            for protocol in PROTOCOLS:
                assert ask(server, spec.name, ["hello world"], protocol) == [["hello world"]], (spec.name, protocol)
    finally:
        server.stop()
