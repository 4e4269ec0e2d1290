"""``tritonft bench``'s command line: the target from the stack's outputs or flags, every problem named before a
tool starts, a target that refuses connections as a clear error and exit 1, and an in-cluster Job's log turned
back into results."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from tritonft.bench.job import results_line
from tritonft.bench.plan import Point, Route, Workload
from tritonft.bench.results import from_aiperf, to_json
from tritonft.cli import main
from tritonft.local_triton import free_port

OUTPUTS = {
    "environment": "dev",
    "namespace": "tritonft-dev",
    "openaiBaseUrl": "https://triton.dev.example.com/v1",
    "endpoints": {"gpt2": "https://gpt2.triton.dev.example.com", "minilm": None},
    "models": ["gpt2", "minilm"],
}


@pytest.fixture
def outputs(tmp_path: Path) -> Path:
    path = tmp_path / "outputs.json"
    path.write_text(json.dumps(OUTPUTS))
    return path


def job_args(outputs: Path, *argv: str) -> list[str]:
    """The Job's bench arguments: resolution without measuring (``--in-cluster`` prints the Job)."""
    return ["bench", "--stack-outputs", str(outputs), *argv, "--in-cluster", "--image", "img@sha256:" + "0" * 64]


def test_the_stack_outputs_give_the_gateway_and_each_models_endpoint(
    outputs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(job_args(outputs, "--chat", "gpt2", "--kserve", "gpt2")) == 0
    out = capsys.readouterr().out
    assert "- https://triton.dev.example.com/v1" in out and "- https://gpt2.triton.dev.example.com" in out


def test_without_a_route_every_model_with_an_endpoint_is_asked_for_and_one_without_is_named(
    outputs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(job_args(outputs))
    err = capsys.readouterr().err
    assert code == 1 and "--kserve minilm: no KServe V2 endpoint" in err and "null" in err


def test_the_openai_routes_without_a_gateway_name_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["bench", "--chat", "gpt2", "--tokenizer", "builtin"])
    assert code == 1 and "--gateway URL or --stack-outputs" in capsys.readouterr().err


def test_nothing_to_measure_says_how_to_name_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--gateway", "http://127.0.0.1:1/v1"]) == 1
    assert "--completions/--chat/--embeddings/--kserve MODEL" in capsys.readouterr().err


def test_stack_outputs_that_are_not_an_object_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "o.json"
    path.write_text("[1]")
    assert main(["bench", "--stack-outputs", str(path)]) == 1
    assert "pulumi stack output --json" in capsys.readouterr().err


def test_the_gateway_routes_need_a_tokenizer(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--gateway", "http://127.0.0.1:1/v1", "--chat", "gpt2"]) == 1
    assert "--tokenizer DIR is needed" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--concurrency", "0"], "--concurrency '0'"),
        (["--request-rate", "x"], "--request-rate 'x'"),
        (["--goodput", "ttft"], "--goodput 'ttft'"),
        (["--requests", "0"], "--requests must be positive"),
    ],
)
def test_bad_load_flags_are_named(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--triton", "grpc://127.0.0.1:1", "--kserve", "m", *argv]) == 1
    assert message in capsys.readouterr().err


def test_a_gateway_that_refuses_connections_is_a_clear_error_and_nothing_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    argv = ["bench", "--gateway", url, "--completions", "gpt2", "--tokenizer", "builtin", "--out", str(tmp_path / "o")]

    code = main(argv)

    err = capsys.readouterr().err
    assert code == 1 and f"the gateway at {url[:-3]} cannot be reached" in err and "refused" in err.lower()
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("scheme", ["http", "grpc"])
def test_a_triton_that_refuses_connections_is_a_clear_error(
    scheme: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"{scheme}://127.0.0.1:{free_port()}"
    code = main(["bench", "--triton", url, "--kserve", "gpt2", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 1 and f"Triton at {url} cannot be reached" in err


def test_a_header_file_that_cannot_be_read_names_the_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["bench", "--triton", "http://127.0.0.1:1", "--kserve", "m"]
    assert main([*argv, "--header-from-file", f"Authorization={tmp_path / 'none'}"]) == 1
    assert "--header-from-file 'Authorization=" in capsys.readouterr().err


def test_collect_writes_a_jobs_results_as_a_local_sweeps(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    export = {
        "request_throughput": {"avg": 10.0},
        "request_latency": {"p50": 50.0, "p95": 80.0},
        "time_to_first_token": {"p50": 20.0, "p95": 30.0},
        "inter_token_latency": {"p50": 2.0, "p95": 3.0},
    }
    chat = Workload(Route.CHAT, "gpt2", "http://gw:8080")
    points = [from_aiperf(Point(chat, level), "concurrency", export) for level in (1, 2)]
    log = tmp_path / "bench.log"
    log.write_text("[1/2] ...\n" + results_line(json.loads(to_json(points, {"title": "dev"}))) + "\n")

    code = main(["bench", "--collect", str(log), "--out", str(tmp_path / "out")])

    assert code == 0
    rows = list(csv.DictReader((tmp_path / "out" / "bench.csv").open()))
    assert [(r["route"], r["level"], r["ttft_p95_ms"]) for r in rows] == [("chat", "1", "30.0"), ("chat", "2", "30.0")]
    written = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert written == [
        "bench.csv",
        "bench.json",
        "streaming_latency.png",
        "streaming_latency.svg",
        "throughput_latency.png",
        "throughput_latency.svg",
    ]
    assert json.loads((tmp_path / "out" / "bench.json").read_text())["meta"]["collected_from"] == str(log)
