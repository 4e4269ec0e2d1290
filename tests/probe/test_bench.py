"""``tritonft bench`` against the real MLServer, and its pure parts (concurrency parsing, table, CSV)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from tests.probe.conftest import Server
from tritonft.bench.cli import parse_concurrency
from tritonft.bench.results import CSV_COLUMNS, LevelResult, format_table, to_csv
from tritonft.cli import main
from tritonft.errors import UserError

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
@pytest.mark.parametrize("scheme", ["http", "grpc"])
def test_bench_writes_a_table_a_csv_and_a_png(
    mlserver: Server, tmp_path: Path, scheme: str, capsys: pytest.CaptureFixture[str]
) -> None:
    url = mlserver.http_url if scheme == "http" else mlserver.grpc_url
    csv_path, png_path = tmp_path / "out" / "bench.csv", tmp_path / "out" / "bench.png"
    argv = ["bench", "--url", url, "--model", "t5", "--concurrency", "1,2", "--duration", "1", "--warmup", "0.2"]

    code = main([*argv, "--csv", str(csv_path), "--plot", str(png_path)])

    assert code == 0
    table = capsys.readouterr().out
    assert "Throughput (infer/s)" in table and "Concurrency: 2, throughput:" in table
    rows = list(csv.DictReader(csv_path.read_text().splitlines()))
    assert tuple(rows[0]) == CSV_COLUMNS
    assert [int(r["concurrency"]) for r in rows] == [1, 2]
    for row in rows:
        assert int(row["requests"]) > 0 and int(row["errors"]) == 0
        assert float(row["throughput_rps"]) > 0
        p50, p90, p95, p99 = (float(row[k]) for k in ("p50_ms", "p90_ms", "p95_ms", "p99_ms"))
        assert 0 < p50 <= p90 <= p95 <= p99
    png = png_path.read_bytes()
    assert png.startswith(PNG_SIGNATURE)
    assert len(png) > 10_000  # axes, three lines, labels: far more than an empty canvas
    assert sorted(p.name for p in csv_path.parent.iterdir()) == ["bench.csv", "bench.png"]  # no temp files left


@pytest.mark.slow
def test_bench_reports_an_unanswering_model_as_a_user_error(
    mlserver: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    csv_path = tmp_path / "bench.csv"
    code = main(["bench", "--url", mlserver.http_url, "--model", "nope", "--duration", "1", "--csv", str(csv_path)])

    assert code == 1
    assert "model 'nope'" in capsys.readouterr().err
    assert not csv_path.exists()


def test_concurrency_list_is_parsed_in_order() -> None:
    assert parse_concurrency("1, 2,4,8") == (1, 2, 4, 8)


@pytest.mark.parametrize("bad", ["", "0", "1,x", "2,2", "-1"])
def test_bad_concurrency_names_the_flag(bad: str) -> None:
    with pytest.raises(UserError, match="--concurrency"):
        parse_concurrency(bad)


def test_level_result_percentiles_and_throughput() -> None:
    result = LevelResult.from_latencies(4, [0.001 * i for i in range(1, 101)], errors=2, window_s=2.0)
    assert result.requests == 100 and result.throughput_rps == 50.0
    assert result.p50_ms == pytest.approx(50.5) and result.p99_ms == pytest.approx(99.01)


def test_a_level_without_successes_shows_dashes_and_empty_csv_cells() -> None:
    empty = LevelResult.from_latencies(8, [], errors=5, window_s=1.0)
    assert "        8         0       5" in format_table([empty])
    (row,) = csv.DictReader(to_csv([empty]).splitlines())
    assert row["p95_ms"] == "" and row["errors"] == "5"
