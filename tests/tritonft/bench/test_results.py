"""Results carry the tools' own figures: AIPerf's export tags and perf_analyzer's CSV, into one CSV/JSON; the plots
are images a person can open."""

from __future__ import annotations

import csv
import io
import json
import xml.etree.ElementTree as ET

import pytest
from PIL import Image

from tritonft.bench.plan import Point, Route, Workload
from tritonft.bench.plots import streaming_latency, throughput_latency
from tritonft.bench.results import (
    CSV_COLUMNS,
    SweepPoint,
    format_table,
    from_aiperf,
    from_json,
    from_perf_analyzer,
    read_perf_analyzer_csv,
    to_csv,
    to_json,
)

CHAT = Point(Workload(Route.CHAT, "gpt2", "http://gw:8080"), 4)
KSERVE = Point(Workload(Route.KSERVE, "gpt2", "grpc://t:8001"), 4)


def metric(**stats: float) -> dict[str, object]:
    return {"unit": "ms", **stats}


EXPORT = {
    "request_throughput": {"unit": "requests/sec", "avg": 12.5},
    "request_latency": metric(avg=80.0, p50=75.5, p90=101.0, p95=110.25, p99=130.0),
    "time_to_first_token": metric(p50=20.5, p95=31.0),
    "inter_token_latency": metric(p50=3.25, p95=4.5),
    "output_token_throughput": {"unit": "tokens/sec", "avg": 190.0},
    "total_usage_completion_tokens": {"unit": "tokens", "avg": 320.0},
    "request_count": {"unit": "requests", "avg": 20.0},
    "goodput": {"unit": "requests/sec", "avg": 9.0},
    "error_summary": [],
}


def test_an_aiperf_point_reads_each_figure_from_its_metric_tag() -> None:
    point = from_aiperf(CHAT, "concurrency", EXPORT)
    assert (point.tool, point.route, point.model, point.level) == ("aiperf", "chat", "gpt2", 4)
    assert point.throughput_rps == 12.5 and point.requests == 20.0 and point.errors == 0
    assert (point.latency_p50_ms, point.latency_p95_ms, point.latency_p99_ms) == (75.5, 110.25, 130.0)
    assert (point.ttft_p50_ms, point.ttft_p95_ms, point.itl_p50_ms, point.itl_p95_ms) == (20.5, 31.0, 3.25, 4.5)
    assert point.output_tokens == 320.0 and point.output_tokens_per_s == 190.0 and point.goodput_rps == 9.0
    assert point.raw == EXPORT and point.streaming


def test_a_route_without_streaming_figures_has_none() -> None:
    export = {k: v for k, v in EXPORT.items() if k not in ("time_to_first_token", "inter_token_latency", "goodput")}
    point = from_aiperf(CHAT, "concurrency", export)
    assert point.ttft_p95_ms is None and point.itl_p50_ms is None and point.goodput_rps is None
    assert not point.streaming


def test_aiperf_errors_come_from_its_error_count_or_summary() -> None:
    counted = from_aiperf(CHAT, "concurrency", {**EXPORT, "error_request_count": {"avg": 3.0}})
    summed = from_aiperf(CHAT, "concurrency", {**EXPORT, "error_summary": [{"count": 2}, {"count": 1}]})
    assert counted.errors == 3 and summed.errors == 3


PA_CSV = (
    "Concurrency,Inferences/Second,Client Send,Network+Server Send/Recv,Server Queue,Server Compute Input,"
    "Server Compute Infer,Server Compute Output,Client Recv,p50 latency,p90 latency,p95 latency,p99 latency,"
    "Avg latency,request/response,response wait\n"
    "4,321.5,10,200,50,20,3000,40,5,11500,13000,14250,17000,12000,0,0\n"
)


def test_a_perf_analyzer_point_is_its_csv_row_latencies_from_microseconds_to_ms() -> None:
    point = from_perf_analyzer(KSERVE, "concurrency", read_perf_analyzer_csv(PA_CSV))
    assert (point.tool, point.route, point.throughput_rps) == ("perf_analyzer", "kserve", 321.5)
    assert (point.latency_p50_ms, point.latency_p90_ms, point.latency_p95_ms) == (11.5, 13.0, 14.25)
    assert (point.latency_p99_ms, point.latency_avg_ms) == (17.0, 12.0)
    assert point.raw["Inferences/Second"] == "321.5"


def test_a_perf_analyzer_report_without_a_row_is_an_error() -> None:
    with pytest.raises(ValueError, match="0 measurement rows"):
        read_perf_analyzer_csv(PA_CSV.splitlines()[0] + "\n")


def sweep() -> list[SweepPoint]:
    pa = read_perf_analyzer_csv(PA_CSV)
    return [
        from_aiperf(Point(CHAT.workload, 1), "concurrency", EXPORT),
        from_aiperf(CHAT, "concurrency", {**EXPORT, "request_throughput": {"avg": 20.0}}),
        from_perf_analyzer(Point(KSERVE.workload, 1), "concurrency", pa),
        from_perf_analyzer(KSERVE, "concurrency", pa),
    ]


def test_the_csv_has_one_row_per_point_and_empty_cells_for_missing_figures() -> None:
    rows = list(csv.DictReader(io.StringIO(to_csv(sweep()))))
    assert tuple(rows[0]) == CSV_COLUMNS and "raw" not in rows[0]
    assert [(r["tool"], r["level"]) for r in rows] == [
        ("aiperf", "1"),
        ("aiperf", "4"),
        ("perf_analyzer", "1"),
        ("perf_analyzer", "4"),
    ]
    assert rows[1]["throughput_rps"] == "20.0" and rows[2]["ttft_p50_ms"] == ""


def test_the_json_keeps_each_tools_record_and_reads_back_into_the_same_points() -> None:
    document = json.loads(to_json(sweep(), {"title": "dev"}))
    assert document["meta"] == {"title": "dev"} and document["points"][0]["raw"] == EXPORT
    assert from_json(document) == sweep()


def test_the_table_shows_a_dash_for_what_a_tool_does_not_measure() -> None:
    table = format_table(sweep()).splitlines()
    assert "TTFT p95" in table[0] and len(table) == 5
    assert table[3].split()[:4] == ["perf_analyzer", "kserve", "gpt2", "1"] and " - " in table[3]


@pytest.mark.parametrize("fmt", ["png", "svg"])
def test_the_throughput_latency_plot_is_an_image(fmt: str) -> None:
    data = throughput_latency(sweep(), "dev", fmt)
    if fmt == "png":
        image = Image.open(io.BytesIO(data))
        assert image.format == "PNG" and image.size == (800, 500)
    else:
        assert ET.fromstring(data).tag.endswith("svg")


def test_the_streaming_plot_draws_ttft_and_itl_against_the_level() -> None:
    data = streaming_latency(sweep(), "dev", "png")
    assert data is not None
    assert Image.open(io.BytesIO(data)).size == (1100, 450)


def test_no_streaming_plot_without_a_streamed_route() -> None:
    assert streaming_latency([p for p in sweep() if p.tool == "perf_analyzer"], "dev") is None


def test_an_unknown_plot_format_is_refused() -> None:
    with pytest.raises(ValueError, match="plot format 'pdf'"):
        throughput_latency(sweep(), "dev", "pdf")
