"""``tritonft probe`` (with and without ``--spec``, HTTP and gRPC) against a real Triton serving a rendered GPT-2
repository. Its FT stand-in answers the prompt's tokens reversed: a continuation that is not an echo, which the
probe's GPT check requires. (``tritonft bench`` against real servers: ``test_bench_tools.py``.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.system.realtriton.repos import PROBE_MODEL, matrix_spec
from tritonft.cli import main
from tritonft.local_triton import LocalTriton

pytestmark = pytest.mark.slow

MODEL = PROBE_MODEL


@pytest.fixture(scope="session")
def spec_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("probe-spec") / "spec.json"
    path.write_text(matrix_spec(MODEL).to_json())
    return path


def url(server: LocalTriton, protocol: str) -> str:
    return f"{protocol}://{server.http_url if protocol == 'http' else server.grpc_url}"


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_probe_with_the_spec_passes_every_check_against_the_full_rendered_contract(
    probe_triton: LocalTriton, spec_file: Path, protocol: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["probe", "--url", url(probe_triton, protocol), "--spec", str(spec_file), "--requests", "3", "--json"])

    report = json.loads(capsys.readouterr().out)
    assert code == 0, report
    assert report["ok"] is True and report["server"]["name"] == "triton"
    checks = {c["check"]: c for c in report["checks"]}
    assert [c["check"] for c in report["checks"] if not c["ok"] or c["degraded"]] == []
    assert checks["metadata"]["detail"] == "inputs/outputs match the rendered contract"
    assert checks["model_config"]["detail"] == "config inputs/outputs match"
    model = report["models"][0]
    assert model["latency"]["count"] == 3
    assert model["sample_answer"] and model["sample_answer"] != model["sample_prompt"]


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_probe_without_a_spec_accepts_the_ensembles_optional_inputs(
    probe_triton: LocalTriton, protocol: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["probe", "--url", url(probe_triton, protocol), "--model", MODEL, "--family", "gpt2", "--requests", "2"]

    code = main(argv)

    captured = capsys.readouterr()
    assert code == 0, captured.out + captured.err
    assert f"metadata[{MODEL}]" in captured.out and "FAIL" not in captured.out
