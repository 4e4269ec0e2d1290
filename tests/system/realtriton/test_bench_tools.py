"""``tritonft bench`` for real: AIPerf against the gateway and perf_analyzer against Triton, both real, in front of
one FasterTransformer-path generator run by the reference engine (streaming) and the real all-MiniLM-L6-v2
(``bench_stack``). The results carry the tools' own figures (compared with the files the tools wrote), the plots
open as images, AIPerf's token counts are the gateway's ``usage`` on the generation routes (AIPerf reads none on
embeddings), and a target answering errors
stops the sweep with a clear message and exit 1. Sweeps are small: two levels, a few requests (2 shared cores)."""

from __future__ import annotations

import csv
import io
import json
import urllib.request
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from tests.system.realtriton.bench_stack import EMBEDDER, GENERATOR, render_generator, write_prompts
from tests.system.realtriton.conftest import ServeTriton
from tests.system.realtriton.golden import TP
from tests.tritonft.gateway.server import GatewayProcess
from tests.tritonft.gateway.server import started as _started
from tritonft.cli import main
from tritonft.encoder.repo import EncoderServing, OnnxEngine, write_encoder_repository
from tritonft.local_triton import LocalTriton, TritonRuntime

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
"""The first test's setup runs the whole sweep (both tools, three targets, two levels, the plots): 130 s alone on two
cores, past the suite's 300 s limit at load 15 (a warm run beside helpers' tests lost the module to it)."""

OUTPUT_TOKENS = 8
"""Within the golden spec's max_output_len (12)."""
REQUESTS = 6
GOODPUT_MS = 60_000
"""An SLO every request meets here: goodput then equals AIPerf's throughput."""


@pytest.fixture(scope="module")
def bench_triton(  # noqa: PLR0917  (pytest passes fixtures by name)
    serve_triton: ServeTriton,
    tmp_path_factory: pytest.TempPathFactory,
    converted: Callable[..., Path],
    encoder_converted: Callable[..., Path],
    encoder_checkpoint: Callable[[str], Path],
    newest_runtime: TritonRuntime,
) -> LocalTriton:
    generator, encoder = tmp_path_factory.mktemp("bench-gen"), tmp_path_factory.mktemp("bench-enc")
    render_generator(converted("gpt2", TP), generator, tmp_path_factory.mktemp("bench-scratch"))
    serving = EncoderServing(EMBEDDER, max_batch_size=16, engine=OnnxEngine.PYTHON)
    name = "all-minilm-l6-v2"
    write_encoder_repository(serving, encoder_converted(name), encoder_checkpoint(name), encoder)
    # the reference engine's Python 3.10 code and the encoders' onnxruntime run on the newest server
    return serve_triton([generator, encoder], runtime=newest_runtime)


@pytest.fixture(scope="module")
def gateway(
    bench_triton: LocalTriton, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[GatewayProcess]:
    from tests.system.realtriton.bench_stack import generator_spec

    workdir = tmp_path_factory.mktemp("bench-gw")
    process = GatewayProcess(
        bench_triton.grpc_url, [generator_spec()], workdir, ["--embedding-model", f"{EMBEDDER}:16"]
    )
    with _started(process, request) as running:
        yield running


@dataclass(frozen=True)
class Run:
    code: int
    out: Path
    stdout: str
    stderr: str

    def rows(self) -> list[dict[str, str]]:
        return list(csv.DictReader((self.out / "bench.csv").open()))

    def aiperf_export(self, slug: str) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(
            (self.out / "raw" / slug / "aiperf" / "profile_export_aiperf.json").read_text()
        )
        return data

    def aiperf_records(self, slug: str) -> list[dict[str, Any]]:
        lines = (self.out / "raw" / slug / "aiperf" / "profile_export.jsonl").read_text().splitlines()
        return [json.loads(line) for line in lines if line.strip()]

    def perf_analyzer_row(self, slug: str) -> dict[str, str]:
        (row,) = csv.DictReader((self.out / "raw" / slug / "perf_analyzer.csv").open())
        return row


def gateway_tokenizer(directory: Path) -> Path:
    """A local Hugging Face tokenizer directory for AIPerf (its prompts come from the prompt file; its token
    counts from the server's usage): the word tokenizer as tokenizer.json."""
    from tests.system.realtriton.bench_stack import write_tolerant_word_tokenizer

    return write_tolerant_word_tokenizer(128, directory / "aiperf-tokenizer")


@pytest.fixture(scope="module")
def sweep(
    gateway: GatewayProcess, bench_triton: LocalTriton, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Run]:
    """One sweep at concurrency 1 and 2: streamed chat through the gateway (AIPerf), and both models' KServe V2
    endpoints (perf_analyzer)."""
    out = tmp_path_factory.mktemp("sweep") / "results"
    argv = ["--chat", GENERATOR, "--kserve", GENERATOR, "--kserve", EMBEDDER, "--concurrency", "1,2"]
    yield _run_captured(gateway, bench_triton, out, argv)


def _run_captured(gateway: GatewayProcess, triton: LocalTriton, out: Path, argv: list[str]) -> Run:
    import contextlib

    stdout, stderr = io.StringIO(), io.StringIO()
    common = ["bench", "--gateway", f"{gateway.url}/v1", "--triton", f"grpc://{triton.grpc_url}"]
    out.parent.mkdir(parents=True, exist_ok=True)
    common += ["--prompts", str(write_prompts(out.parent / "prompts.jsonl"))]
    common += ["--tokenizer", str(gateway_tokenizer(out.parent)), "--output-tokens", str(OUTPUT_TOKENS)]
    common += ["--requests", str(REQUESTS), "--warmup-requests", "1", "--out", str(out)]
    common += ["--perf-analyzer-arg=--stability-percentage=1000", "--perf-analyzer-arg=--max-trials=3"]
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = main([*common, *argv])
    return Run(code, out, stdout.getvalue(), stderr.getvalue())


def test_the_sweep_runs_both_tools_at_every_level_without_errors(sweep: Run) -> None:
    assert sweep.code == 0, sweep.stderr
    rows = sweep.rows()
    assert [(r["tool"], r["route"], r["model"], r["level"]) for r in rows] == [
        ("aiperf", "chat", GENERATOR, "1"),
        ("aiperf", "chat", GENERATOR, "2"),
        ("perf_analyzer", "kserve", GENERATOR, "1"),
        ("perf_analyzer", "kserve", GENERATOR, "2"),
        ("perf_analyzer", "kserve", EMBEDDER, "1"),
        ("perf_analyzer", "kserve", EMBEDDER, "2"),
    ]
    assert all(float(r["errors"]) == 0 and float(r["throughput_rps"]) > 0 for r in rows)


def test_progress_is_shown_for_every_run(sweep: Run) -> None:
    assert "[1/6] aiperf chat:ref-gpt2 concurrency 1 ..." in sweep.stderr
    assert "[6/6] done in" in sweep.stderr and "tritonft bench: 6 runs" in sweep.stderr


def test_aiperf_rows_are_aiperfs_own_figures(sweep: Run) -> None:
    for row in (r for r in sweep.rows() if r["tool"] == "aiperf"):
        export = sweep.aiperf_export(f"chat-{GENERATOR}-{row['level']}")
        assert float(row["throughput_rps"]) == export["request_throughput"]["avg"]
        assert float(row["latency_p95_ms"]) == export["request_latency"]["p95"]
        assert float(row["ttft_p95_ms"]) == export["time_to_first_token"]["p95"]
        assert float(row["itl_p95_ms"]) == export["inter_token_latency"]["p95"]
        assert float(row["requests"]) == export["request_count"]["avg"] == REQUESTS


def test_perf_analyzer_rows_are_its_own_figures(sweep: Run) -> None:
    for row in (r for r in sweep.rows() if r["tool"] == "perf_analyzer"):
        report = sweep.perf_analyzer_row(f"kserve-{row['model']}-{row['level']}")
        assert float(row["throughput_rps"]) == float(report["Inferences/Second"])
        assert float(row["latency_p95_ms"]) == float(report["p95 latency"]) / 1000
        assert int(report["Concurrency"]) == int(row["level"])


def test_the_json_keeps_each_tools_whole_record(sweep: Run) -> None:
    points = json.loads((sweep.out / "bench.json").read_text())["points"]
    assert points[0]["raw"] == sweep.aiperf_export(f"chat-{GENERATOR}-1")
    assert points[2]["raw"] == sweep.perf_analyzer_row(f"kserve-{GENERATOR}-1")


@pytest.mark.parametrize("name", ["throughput_latency", "streaming_latency"])
def test_the_plots_open_as_images(sweep: Run, name: str) -> None:
    with Image.open(sweep.out / f"{name}.png") as image:
        image.verify()
        assert image.format == "PNG" and image.size[0] >= 800
    assert ET.parse(sweep.out / f"{name}.svg").getroot().tag.endswith("svg")


def test_the_stream_asks_for_usage_and_aiperf_counts_the_gateways(sweep: Run) -> None:
    slug = f"chat-{GENERATOR}-2"
    inputs = json.loads((sweep.out / "raw" / slug / "aiperf" / "inputs.json").read_text())
    payloads = [p for session in inputs["data"] for p in session["payloads"]]
    assert payloads and all(p["stream"] and p["stream_options"] == {"include_usage": True} for p in payloads)
    assert_usage_counted(sweep, slug, "usage_completion_tokens")


def assert_usage_counted(run: Run, slug: str, tag: str) -> None:
    """Every measured request has the server's ``usage`` figure, and the run's total is their sum."""
    measured = [r for r in run.aiperf_records(slug) if r["metadata"]["benchmark_phase"] == "profiling"]
    per_request = [r["metrics"][tag]["value"] for r in measured]
    assert len(per_request) == REQUESTS and all(v > 0 for v in per_request)
    export = run.aiperf_export(slug)
    assert export[tag]["sum"] == sum(per_request)
    if tag == "usage_completion_tokens":
        assert export["total_usage_completion_tokens"]["avg"] == sum(per_request)
        assert all(v <= OUTPUT_TOKENS for v in per_request)


@pytest.fixture(scope="module")
def other_routes(gateway: GatewayProcess, bench_triton: LocalTriton, tmp_path_factory: pytest.TempPathFactory) -> Run:
    """Completions and embeddings at one level, with a goodput SLO."""
    out = tmp_path_factory.mktemp("routes") / "results"
    argv = ["--completions", GENERATOR, "--embeddings", EMBEDDER, "--concurrency", "2"]
    argv += ["--goodput", f"request_latency:{GOODPUT_MS}"]
    return _run_captured(gateway, bench_triton, out, argv)


def test_completions_count_the_gateways_usage(other_routes: Run) -> None:
    assert other_routes.code == 0, other_routes.stderr
    assert_usage_counted(other_routes, f"completions-{GENERATOR}-2", "usage_completion_tokens")


def test_goodput_is_aiperfs_figure_against_the_slo(other_routes: Run) -> None:
    assert other_routes.code == 0, other_routes.stderr
    for row in other_routes.rows():
        export = other_routes.aiperf_export(f"{row['route']}-{row['model']}-2")
        goodput = export["goodput"]["avg"]
        assert float(row["goodput_rps"]) == goodput == pytest.approx(export["request_throughput"]["avg"])


def test_embeddings_have_no_token_figures_aiperf_did_not_report(other_routes: Run, gateway: GatewayProcess) -> None:
    """AIPerf 0.13 reads no ``usage`` on /v1/embeddings (its parser keeps only the vectors), so the sweep has no token
    figures there and invents none; the gateway's answer does carry OpenAI's ``usage`` for any client that reads it."""
    assert other_routes.code == 0, other_routes.stderr
    (row,) = [r for r in other_routes.rows() if r["route"] == "embeddings"]
    assert float(row["throughput_rps"]) > 0 and float(row["requests"]) == REQUESTS
    assert row["output_tokens"] == row["output_tokens_per_s"] == row["ttft_p95_ms"] == ""
    export = other_routes.aiperf_export(f"embeddings-{EMBEDDER}-2")
    assert not [tag for tag in export if tag.startswith(("usage_", "total_usage_")) or tag.endswith("sequence_length")]
    body = json.dumps({"model": EMBEDDER, "input": ["w5 w6 w7", "w8"]}).encode()
    post = urllib.request.Request(f"{gateway.url}/v1/embeddings", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(post, timeout=30) as answer:
        usage = json.loads(answer.read())["usage"]
    assert usage["prompt_tokens"] == usage["total_tokens"] > 0


def test_a_gateway_answering_errors_stops_the_sweep_naming_the_answer(
    gateway: GatewayProcess, bench_triton: LocalTriton, tmp_path: Path
) -> None:
    run = _run_captured(
        gateway,
        bench_triton,
        tmp_path / "r",
        ["--completions", GENERATOR, "--concurrency", "1", "--output-tokens", "64"],
    )
    assert run.code == 1
    assert "AIPerf failed on completions:ref-gpt2 at concurrency 1" in run.stderr
    assert "400 Bad Request" in run.stderr and "max_tokens must be between 1 and 12" in run.stderr


def test_a_model_perf_analyzer_cannot_feed_is_its_error_and_exit_1(
    gateway: GatewayProcess, bench_triton: LocalTriton, tmp_path: Path
) -> None:
    run = _run_captured(
        gateway, bench_triton, tmp_path / "r", ["--kserve", GENERATOR, "--concurrency", "1", "--input-name", "nope"]
    )
    assert run.code == 1
    assert "perf_analyzer failed on kserve:ref-gpt2 at concurrency 1" in run.stderr
    assert "missing tensor text_input" in run.stderr


def test_a_model_the_gateway_does_not_serve_is_named_before_any_tool_runs(
    gateway: GatewayProcess, bench_triton: LocalTriton, tmp_path: Path
) -> None:
    run = _run_captured(gateway, bench_triton, tmp_path / "r", ["--chat", "nope", "--concurrency", "1"])
    assert run.code == 1 and f"does not serve nope; it serves {EMBEDDER}, {GENERATOR}" in run.stderr
    assert not (tmp_path / "r" / "raw").exists()
