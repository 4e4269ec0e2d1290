"""``tritonft bench`` failing against MLServer (fault injection), and its pure parts (concurrency parsing, table, CSV).

The healthy path runs against a real Triton: ``tests/system/realtriton/test_probe_bench.py``.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from tests.tritonft.probe.conftest import Server
from tritonft.bench.cli import parse_concurrency
from tritonft.bench.results import LevelResult, format_table, to_csv
from tritonft.cli import main
from tritonft.errors import UserError

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


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
