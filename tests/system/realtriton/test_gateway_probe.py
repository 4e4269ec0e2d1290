"""The integration probe through the OpenAI gateway, and the gateway's per-model routing, on the real Triton.

Two real servers: ``probe_triton`` serves GPT-2 with a stand-in that answers the prompt's tokens reversed (a
continuation the probe's GPT judgement accepts) and the matrix server, whose stand-ins echo the prompt (which the
judgement refuses: the continuation after the echo is empty). The gateway runs as the container runs it.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import replace
from pathlib import Path

import pytest

from tests.system.realtriton.repos import PROBE_MODEL as MODEL
from tests.system.realtriton.repos import matrix_spec
from tests.tritonft.gateway.server import GatewayProcess
from tests.tritonft.gateway.server import started as running
from tritonft.cli import main
from tritonft.local_triton import LocalTriton, free_port
from tritonft.probe import ModelStatus, ModelTarget, ProbeConfig, run_probe
from tritonft.probe.expectations import Sample
from tritonft.probe.rendered import contract_for_spec

pytestmark = pytest.mark.slow

SPEC = matrix_spec(MODEL)


def probe_config(triton: LocalTriton, gateway_url: str, deadline_s: float = 60.0) -> ProbeConfig:
    target = ModelTarget(SPEC.name, SPEC.family, contract_for_spec(SPEC), SPEC.max_output_len)
    return ProbeConfig(
        url=f"http://{triton.http_url}",
        models=(target,),
        deadline_s=deadline_s,
        call_timeout_s=10.0,
        latency_requests=2,
        gateway_url=gateway_url,
    )


def test_the_probe_asks_the_judged_prompt_through_the_gateway(
    probe_triton: LocalTriton, tmp_path: Path, request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]
) -> None:
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(SPEC.to_json())
    with running(GatewayProcess(probe_triton.grpc_url, [SPEC], tmp_path), request) as gateway:
        argv = ["probe", "--url", f"http://{probe_triton.http_url}", "--spec", str(spec_path)]
        code = main([*argv, "--requests", "2", "--gateway", f"{gateway.url}/v1", "--json"])
        access = gateway.access_entries(until=lambda e: (e["path"], e["status"]) == ("/v1/completions", 200))

    report = json.loads(capsys.readouterr().out)
    assert code == 0, report
    (check,) = [c for c in report["checks"] if c["check"] == "gateway"]
    assert check["ok"] and check["model"] == MODEL
    assert check["detail"] == "POST /v1/completions: non-empty continuation for 1 prompt(s)"
    assert ("/v1/completions", 200, MODEL) in [(e["path"], e["status"], e["model"]) for e in access]


def test_a_gateway_that_answers_wrong_fails_the_probe_naming_the_gateway(
    probe_triton: LocalTriton, matrix_triton: LocalTriton, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # The gateway is routed to the matrix server, whose GPT-2 echoes the prompt: right over V2, wrong through /v1.
    with running(GatewayProcess(matrix_triton.grpc_url, [SPEC], tmp_path), request) as gateway:
        report = run_probe(probe_config(probe_triton, f"{gateway.url}/v1"))

    assert not report.ok
    assert report.model(MODEL).status is ModelStatus.GATEWAY_FAILED
    assert report.failure_message().startswith(
        f"gateway[{MODEL}]: the OpenAI gateway answered wrong (POST /v1/completions): empty continuation of the prompt"
    )


def test_an_unreachable_gateway_fails_the_probe_within_its_deadline(probe_triton: LocalTriton) -> None:
    nowhere = f"http://127.0.0.1:{free_port()}/v1"
    report = run_probe(probe_config(probe_triton, nowhere, deadline_s=8.0))

    assert not report.ok and report.elapsed_s < 8.0 + 5.0
    (failure,) = report.failures
    assert failure.label == f"gateway[{MODEL}]"
    assert failure.detail.startswith(f"the OpenAI gateway did not answer: POST {nowhere}/completions")
    assert "refused" in failure.detail.lower()


def test_each_model_is_answered_by_the_triton_it_is_routed_to(
    probe_triton: LocalTriton, matrix_triton: LocalTriton, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    stream = matrix_spec("gpt2-stream")
    routes = ["--triton-url", f"gpt2-stream={matrix_triton.grpc_url}"]
    gateway = GatewayProcess(f"{MODEL}={probe_triton.grpc_url}", [SPEC, stream], tmp_path, extra=routes)
    with running(gateway, request) as started:
        answers = {model: complete(started.url, model, "hello world") for model in (MODEL, "gpt2-stream")}

    assert answers["gpt2-stream"] == "hello world"  # the matrix server echoes
    assert answers[MODEL] not in ("", "hello world")  # the probe server reverses the tokens


def test_ready_stays_up_while_some_model_is_served_and_names_the_others(
    probe_triton: LocalTriton, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    routes = ["--triton-url", f"gpt2-stream=127.0.0.1:{free_port()}"]
    gateway = GatewayProcess(f"{MODEL}={probe_triton.grpc_url}", [SPEC, matrix_spec("gpt2-stream")], tmp_path, routes)
    with running(gateway, request) as started, urllib.request.urlopen(f"{started.url}/health/ready", timeout=10) as ok:
        status, body = ok.status, ok.read().decode()

    assert (status, body) == (200, "not ready: gpt2-stream")


def complete(base: str, model: str, prompt: str) -> str:
    """The text of one greedy completion (``urllib``: the openai client's own tests live in test_gateway.py)."""
    body = json.dumps({"model": model, "prompt": prompt, "max_tokens": 8, "temperature": 0}).encode()
    request = urllib.request.Request(
        f"{base}/v1/completions", data=body, headers={"Content-Type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return str(json.loads(answer.read())["choices"][0]["text"])
    except urllib.error.HTTPError as exc:
        raise AssertionError(f"{model}: HTTP {exc.code}: {exc.read().decode()}") from exc


def exact_config(direct: LocalTriton, gateway_url: str, prompt: str, answer: str) -> ProbeConfig:
    config = probe_config(direct, gateway_url)
    return replace(config, models=tuple(replace(t, expected=(Sample(prompt, answer),)) for t in config.models))


def test_expected_answers_judge_the_gateway_leg_exactly(
    matrix_triton: LocalTriton, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # The matrix server's GPT-2 echoes the prompt: the family's judgement refuses it, the exact expected answer not.
    with running(GatewayProcess(matrix_triton.grpc_url, [SPEC], tmp_path), request) as gateway:
        report = run_probe(exact_config(matrix_triton, f"{gateway.url}/v1", "hello world", "hello world"))

    assert report.ok, report.failure_message()
    (check,) = [c for c in report.checks if c.check == "gateway"]
    assert check.detail == "POST /v1/completions: the expected answer, exactly, for 1 prompt(s)"


def test_a_gateway_answer_other_than_the_expected_one_fails_naming_the_prompt(
    probe_triton: LocalTriton, matrix_triton: LocalTriton, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # Direct: the matrix server echoes, as expected. Through the gateway: the probe server reverses the tokens.
    with running(GatewayProcess(probe_triton.grpc_url, [SPEC], tmp_path), request) as gateway:
        report = run_probe(exact_config(matrix_triton, f"{gateway.url}/v1", "hello world", "hello world"))

    assert report.model(MODEL).status is ModelStatus.GATEWAY_FAILED
    assert report.failure_message().startswith(
        f"gateway[{MODEL}]: the OpenAI gateway answered wrong (POST /v1/completions): "
        "the answer to 'hello world' is not the expected one"
    )
