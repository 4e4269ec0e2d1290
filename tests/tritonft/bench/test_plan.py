"""The sweep's plan: the standard tools' command lines (AIPerf for the OpenAI routes, perf_analyzer for KServe V2),
the load levels and SLOs as given, and no credential on any command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tritonft.bench.plan import (
    AiperfInputs,
    LoadMode,
    PerfAnalyzerInputs,
    Point,
    Route,
    SweepSettings,
    Workload,
    aiperf_command,
    aiperf_launcher,
    gateway_base,
    headers_environment,
    parse_goodput,
    parse_levels,
    perf_analyzer_command,
    perf_analyzer_data,
    perf_analyzer_headers,
    points,
)

GATEWAY = "http://127.0.0.1:8080"
INPUTS = AiperfInputs("/tok", Path("/p.jsonl"))
COUNTED = SweepSettings(mode=LoadMode.CONCURRENCY, levels=(1, 4), requests=20)


def flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def aiperf(route: Route, settings: SweepSettings = COUNTED, level: float = 4) -> list[str]:
    return aiperf_command(Point(Workload(route, "gpt2", GATEWAY), level), settings, INPUTS, Path("/out/a"))


def test_chat_is_profiled_streamed_on_aiperfs_chat_endpoint() -> None:
    argv = aiperf(Route.CHAT)
    assert flag(argv, "--endpoint-type") == "chat" and "--streaming" in argv


@pytest.mark.parametrize("route", [Route.COMPLETIONS, Route.EMBEDDINGS])
def test_the_other_routes_are_not_streamed(route: Route) -> None:
    argv = aiperf(route)
    assert flag(argv, "--endpoint-type") == route.value and "--streaming" not in argv


@pytest.mark.parametrize("route", [Route.COMPLETIONS, Route.CHAT, Route.EMBEDDINGS])
def test_every_route_counts_tokens_from_the_servers_usage(route: Route) -> None:
    assert "--use-server-token-count" in aiperf(route)


def test_generation_routes_ask_max_tokens_the_gateway_reads() -> None:
    argv = aiperf(Route.COMPLETIONS, SweepSettings(LoadMode.CONCURRENCY, (1,), requests=5, output_tokens=12))
    assert flag(argv, "--output-tokens-mean") == "12" and "--use-legacy-max-tokens" in argv
    assert "--output-tokens-mean" not in aiperf(Route.EMBEDDINGS)


def test_a_concurrency_point_loads_at_its_level_for_the_request_count() -> None:
    argv = aiperf(Route.CHAT, level=4)
    assert flag(argv, "--concurrency") == "4" and flag(argv, "--request-count") == "20"
    assert "--request-rate" not in argv and "--benchmark-duration" not in argv


def test_a_request_rate_point_with_a_duration() -> None:
    settings = SweepSettings(LoadMode.REQUEST_RATE, (2.5,), duration_s=30)
    argv = aiperf(Route.COMPLETIONS, settings, level=2.5)
    assert flag(argv, "--request-rate") == "2.5" and flag(argv, "--benchmark-duration") == "30"
    assert "--concurrency" not in argv and "--request-count" not in argv


def test_goodput_slos_are_passed_as_aiperfs_metric_thresholds() -> None:
    settings = SweepSettings(
        LoadMode.CONCURRENCY, (1,), requests=5, goodput=parse_goodput("ttft:200,request_latency:500")
    )
    assert flag(aiperf(Route.CHAT, settings), "--goodput") == "ttft:200 request_latency:500"


def test_a_prompt_file_is_aiperfs_single_turn_dataset_and_otherwise_prompts_are_synthetic() -> None:
    argv = aiperf(Route.CHAT)
    assert flag(argv, "--input-file") == "/p.jsonl" and flag(argv, "--custom-dataset-type") == "single_turn"
    synthetic = aiperf_command(
        Point(Workload(Route.CHAT, "gpt2", GATEWAY), 1), COUNTED, AiperfInputs("builtin"), Path("/out")
    )
    assert "--input-file" not in synthetic and flag(synthetic, "--synthetic-input-tokens-mean") == "32"


def test_the_launcher_hands_aiperf_the_headers_without_putting_them_on_its_command_line(tmp_path: Path) -> None:
    # a stand-in `aiperf.cli.app` that reports the arguments AIPerf would parse and its own process command line
    package = tmp_path / "aiperf"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "cli.py").write_text(
        "import json, os, sys\n"
        "def app():\n"
        "    cmdline = open(f'/proc/{os.getpid()}/cmdline', 'rb').read().decode()\n"
        "    print(json.dumps({'argv': sys.argv, 'cmdline': cmdline, 'env': list(os.environ)}))\n"
        "    return 0\n"
    )
    headers = {"Authorization": "Bearer s3cret"}
    env = {**os.environ, "PYTHONPATH": str(tmp_path), **headers_environment(headers)}
    argv = [*aiperf_launcher(Path(sys.executable)), *aiperf(Route.CHAT)]

    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=True)

    seen = json.loads(done.stdout)
    assert seen["argv"][-2:] == ["--header", "Authorization:Bearer s3cret"]
    assert seen["argv"][1:-2] == aiperf(Route.CHAT)
    assert "s3cret" not in seen["cmdline"] and "s3cret" not in " ".join(argv)
    assert "TRITONFT_BENCH_HEADERS" not in seen["env"]


def test_no_headers_no_environment() -> None:
    assert headers_environment({}) == {}


def kserve_point(url: str, level: float = 2) -> Point:
    return Point(Workload(Route.KSERVE, "t5", url), level)


PA_INPUTS = PerfAnalyzerInputs(Path("/in.json"))


def test_perf_analyzer_measures_a_grpc_endpoint_at_one_concurrency_in_count_windows() -> None:
    argv = perf_analyzer_command(
        Path("/pa"), kserve_point("grpc://triton:8001"), COUNTED, inputs=PA_INPUTS, report=Path("/r.csv"), headers={}
    )
    assert argv[:7] == ["/pa", "-m", "t5", "-u", "triton:8001", "-i", "grpc"]
    assert flag(argv, "--concurrency-range") == "2:2" and flag(argv, "--measurement-request-count") == "20"
    assert flag(argv, "--input-data") == "/in.json" and "--shape=text_input:1" in argv and flag(argv, "-f") == "/r.csv"


def test_perf_analyzer_over_https_verifies_the_peer_with_the_given_ca() -> None:
    settings = SweepSettings(LoadMode.REQUEST_RATE, (5,), duration_s=2, perf_analyzer_args=("--max-trials=3",))
    argv = perf_analyzer_command(
        Path("/pa"),
        kserve_point("https://t5.example.com", 5),
        settings,
        inputs=PA_INPUTS,
        report=Path("/r.csv"),
        headers={"X-Trace": "1"},
        ca_file=Path("/ca.pem"),
    )
    assert flag(argv, "-u") == "t5.example.com:443" and flag(argv, "-i") == "http"
    assert flag(argv, "--request-rate-range") == "5:5" and flag(argv, "--measurement-interval") == "2000"
    assert flag(argv, "--ssl-https-ca-certificates-file") == "/ca.pem" and flag(argv, "--ssl-https-verify-peer") == "1"
    assert flag(argv, "-H") == "X-Trace:1" and argv[-1] == "--max-trials=3"


def test_perf_analyzer_over_grpcs_uses_ssl() -> None:
    argv = perf_analyzer_command(
        Path("/pa"), kserve_point("grpcs://t5.example.com"), COUNTED, inputs=PA_INPUTS, report=Path("/r"), headers={}
    )
    assert "--ssl-grpc-use-ssl" in argv and flag(argv, "-u") == "t5.example.com:443"


@pytest.mark.parametrize("name", ["Authorization", "cookie", "X-API-Key"])
def test_perf_analyzer_is_refused_credentials_it_could_only_show_in_the_process_list(name: str) -> None:
    with pytest.raises(ValueError, match=f"not sending {name}.*--in-cluster"):
        perf_analyzer_headers({name: "secret"})


def test_perf_analyzers_input_is_the_prompt_for_the_text_input() -> None:
    assert json.loads(perf_analyzer_data("Hello", "text")) == {"data": [{"text": ["Hello"]}]}


def test_points_sweep_each_workload_through_every_level_in_turn() -> None:
    a, b = Workload(Route.CHAT, "gpt2", GATEWAY), Workload(Route.KSERVE, "gpt2", "grpc://t:8001")
    assert [(p.workload, p.level) for p in points([a, b], (1, 2))] == [(a, 1), (a, 2), (b, 1), (b, 2)]


def test_point_slugs_name_route_model_and_level_as_safe_directory_names() -> None:
    assert Point(Workload(Route.CHAT, "org/m:1", GATEWAY), 2.5).slug == "chat-org-m-1-2p5"


def test_levels_keep_their_order() -> None:
    assert parse_levels("--concurrency", "4, 1,2", integers=True) == (4, 1, 2)
    assert parse_levels("--request-rate", "0.5,2", integers=False) == (0.5, 2)


@pytest.mark.parametrize("bad", ["", "0", "1,x", "2,2", "-1", "1.5", "5000"])
def test_bad_concurrency_names_the_flag(bad: str) -> None:
    with pytest.raises(ValueError, match="--concurrency"):
        parse_levels("--concurrency", bad, integers=True)


@pytest.mark.parametrize("bad", ["ttft", "ttft:", "ttft:-1", ":5", "ttft:x"])
def test_bad_goodput_names_the_flag_and_the_form(bad: str) -> None:
    with pytest.raises(ValueError, match=r"--goodput.*METRIC:THRESHOLD"):
        parse_goodput(bad)


@pytest.mark.parametrize(
    ("url", "base"),
    [
        ("https://triton.dev.example.com/v1", "https://triton.dev.example.com"),
        ("http://127.0.0.1:8080/v1/", "http://127.0.0.1:8080"),
        ("http://127.0.0.1:8080", "http://127.0.0.1:8080"),
        ("https://host/prefix/v1", "https://host/prefix"),
    ],
)
def test_the_gateway_base_is_openaiBaseUrl_without_v1(url: str, base: str) -> None:  # noqa: N802
    assert gateway_base(url) == base


def test_a_gateway_url_must_be_http() -> None:
    with pytest.raises(ValueError, match="not an http"):
        gateway_base("grpc://host:8001")


def test_a_streaming_model_is_measured_over_a_grpc_stream() -> None:
    point = Point(Workload(Route.KSERVE, "gpt2", "grpc://t:8001", decoupled=True), 1)
    argv = perf_analyzer_command(Path("/pa"), point, COUNTED, inputs=PA_INPUTS, report=Path("/r"), headers={})
    assert "--streaming" in argv


def test_a_streaming_model_over_http_asks_for_its_grpc_endpoint() -> None:
    point = Point(Workload(Route.KSERVE, "gpt2", "http://t:8000", decoupled=True), 1)
    with pytest.raises(ValueError, match=r"streams \(decoupled\).*grpc"):
        perf_analyzer_command(Path("/pa"), point, COUNTED, inputs=PA_INPUTS, report=Path("/r"), headers={})
