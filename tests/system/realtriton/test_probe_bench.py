"""``tritonft probe`` (with and without ``--spec``, HTTP and gRPC) and ``tritonft bench`` against a real Triton serving
a rendered GPT-2 repository. Its FT stand-in answers the prompt's tokens reversed: a continuation that is not an
echo, which the probe's GPT check requires."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from tests.system.realtriton.repos import PROBE_MODEL, matrix_spec
from tritonft.bench.results import CSV_COLUMNS
from tritonft.cli import main
from tritonft.local_triton import LocalTriton

pytestmark = pytest.mark.slow

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
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


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_bench_writes_a_table_a_csv_and_a_png(
    probe_triton: LocalTriton, tmp_path: Path, protocol: str, capsys: pytest.CaptureFixture[str]
) -> None:
    csv_path, png_path = tmp_path / "out" / "bench.csv", tmp_path / "out" / "bench.png"
    argv = ["bench", "--url", url(probe_triton, protocol), "--model", MODEL, "--concurrency", "1,2"]

    code = main([*argv, "--duration", "1", "--warmup", "0.2", "--csv", str(csv_path), "--plot", str(png_path)])

    assert code == 0
    table = capsys.readouterr().out
    assert "Throughput (infer/s)" in table and "Concurrency: 2, throughput:" in table
    rows = list(csv.DictReader(csv_path.read_text().splitlines()))
    assert tuple(rows[0]) == CSV_COLUMNS
    assert [int(r["concurrency"]) for r in rows] == [1, 2]
    for row in rows:
        assert int(row["requests"]) > 0 and int(row["errors"]) == 0
        p50, p90, p95, p99 = (float(row[k]) for k in ("p50_ms", "p90_ms", "p95_ms", "p99_ms"))
        assert 0 < p50 <= p90 <= p95 <= p99
    assert png_path.read_bytes().startswith(PNG_SIGNATURE)
    assert sorted(p.name for p in csv_path.parent.iterdir()) == ["bench.csv", "bench.png"]


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_bench_reports_an_unknown_model_as_a_user_error_and_writes_nothing(
    probe_triton: LocalTriton, tmp_path: Path, protocol: str, capsys: pytest.CaptureFixture[str]
) -> None:
    csv_path = tmp_path / "bench.csv"
    argv = ["bench", "--url", url(probe_triton, protocol), "--model", "nope", "--duration", "1"]

    code = main([*argv, "--csv", str(csv_path)])

    assert code == 1
    err = capsys.readouterr().err
    assert "model 'nope'" in err and "did not answer a first request" in err
    assert not csv_path.exists()
