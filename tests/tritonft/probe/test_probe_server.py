"""The probe against MLServer (KServe V2 over HTTP and gRPC) for what a real Triton cannot be made to show: a
translating T5, unready and slow models, a missing config endpoint, a renamed contract. The CLI's healthy path,
with and without ``--spec``, runs against a real Triton (``tests/system/realtriton/test_probe_bench.py``)."""

from __future__ import annotations

import time

import pytest

from tests.tritonft.probe.conftest import SLOW_DELAY_S, Server, free_port
from tritonft.cli import main
from tritonft.probe import ModelStatus, ModelTarget, ProbeConfig, Protocol, TextContract, run_probe
from tritonft.probe.expectations import load_translation_set
from tritonft.spec import Family

pytestmark = pytest.mark.slow

T5 = ModelTarget("t5", Family.T5)
GPT = ModelTarget("gpt", Family.GPT2)


def url_for(server: Server, protocol: Protocol) -> str:
    return server.http_url if protocol is Protocol.HTTP else server.grpc_url


@pytest.mark.parametrize("protocol", list(Protocol))
def test_healthy_models_pass_every_check(mlserver: Server, protocol: Protocol) -> None:
    report = run_probe(ProbeConfig(url_for(mlserver, protocol), (T5, GPT), deadline_s=20, latency_requests=5))

    assert report.ok, report.failure_message()
    assert report.protocol == protocol.value
    assert report.server["name"] == "mlserver"
    passed = {c.label for c in report.checks if c.ok and not c.degraded}
    assert {"server_live", "server_ready", "model_ready[t5]", "inference[t5]", "latency[gpt]"} <= passed
    t5 = report.model("t5")
    assert t5.status is ModelStatus.OK
    assert t5.bleu == pytest.approx(100.0)
    assert t5.sample_answer == load_translation_set().pairs[0][1]
    assert t5.latency is not None and t5.latency.count == 5 and 0 < t5.latency.p50_ms <= t5.latency.p95_ms
    gpt = report.model("gpt")
    assert gpt.sample_prompt is not None and gpt.sample_answer is not None
    assert gpt.sample_answer.startswith(gpt.sample_prompt) and len(gpt.sample_answer) > len(gpt.sample_prompt)


@pytest.mark.parametrize("protocol", list(Protocol))
def test_missing_model_config_endpoint_degrades_and_says_so(mlserver: Server, protocol: Protocol) -> None:
    report = run_probe(ProbeConfig(url_for(mlserver, protocol), (GPT,), deadline_s=20, latency_requests=1))

    (config_check,) = report.degradations
    assert config_check.label == "model_config[gpt]"
    assert "no model-configuration endpoint" in config_check.detail and "mlserver" in config_check.detail
    assert report.ok


@pytest.mark.parametrize("protocol", list(Protocol))
def test_server_down_fails_server_live_within_the_deadline(protocol: Protocol) -> None:
    port = free_port()  # nothing listens here
    url = f"http://127.0.0.1:{port}" if protocol is Protocol.HTTP else f"grpc://127.0.0.1:{port}"
    started = time.monotonic()
    report = run_probe(ProbeConfig(url, (T5,), deadline_s=1.5))
    elapsed = time.monotonic() - started

    assert not report.ok
    (failure,) = report.failures
    assert failure.check == "server_live"
    assert failure.attempts > 1  # retried with backoff
    assert "deadline" in failure.detail
    assert report.model("t5").status is ModelStatus.NOT_CHECKED
    assert elapsed < 1.5 + 3.0


@pytest.mark.parametrize("protocol", list(Protocol))
def test_unknown_model_fails_model_ready_with_the_servers_words(mlserver: Server, protocol: Protocol) -> None:
    report = run_probe(ProbeConfig(url_for(mlserver, protocol), (ModelTarget("no-such-model"),), deadline_s=1.5))

    (failure,) = report.failures
    assert failure.label == "model_ready[no-such-model]"
    assert "not found" in failure.detail.lower()
    assert report.model("no-such-model").status is ModelStatus.NOT_READY


def test_model_that_never_becomes_ready_is_named(mlserver_with_unready_model: Server) -> None:
    targets = (T5, ModelTarget("never-ready"))
    report = run_probe(ProbeConfig(mlserver_with_unready_model.http_url, targets, deadline_s=2, latency_requests=1))

    failures = {c.label: c.detail for c in report.failures}
    assert set(failures) == {"server_ready", "model_ready[never-ready]"}
    assert "known to the server but not ready" in failures["model_ready[never-ready]"]
    assert report.model("never-ready").status is ModelStatus.NOT_READY
    assert report.model("t5").status is ModelStatus.OK  # the ready model was still checked


@pytest.mark.parametrize("protocol", list(Protocol))
def test_wrong_translation_fails_the_bleu_check(mlserver: Server, protocol: Protocol) -> None:
    report = run_probe(ProbeConfig(url_for(mlserver, protocol), (ModelTarget("t5-babbler", Family.T5),), deadline_s=10))

    (failure,) = report.failures
    assert failure.label == "inference[t5-babbler]"
    assert failure.detail.startswith("BLEU ") and "< 15.0" in failure.detail
    assert "Lorem ipsum" in failure.detail  # shows what the model said
    babbler = report.model("t5-babbler")
    assert babbler.status is ModelStatus.WRONG_ANSWER
    assert babbler.bleu is not None and babbler.bleu < 15.0


@pytest.mark.parametrize("protocol", list(Protocol))
def test_slow_server_is_cut_off_at_the_deadline(mlserver: Server, protocol: Protocol) -> None:
    deadline = 1.5
    started = time.monotonic()
    report = run_probe(ProbeConfig(url_for(mlserver, protocol), (ModelTarget("slow"),), deadline_s=deadline))
    elapsed = time.monotonic() - started

    (failure,) = report.failures
    assert failure.label == "inference[slow]"
    assert "no answer within" in failure.detail and "deadline" in failure.detail
    assert elapsed < min(SLOW_DELAY_S, deadline + 2.0)


def test_served_tensors_that_differ_from_the_contract_fail_metadata(mlserver: Server) -> None:
    report = run_probe(ProbeConfig(mlserver.http_url, (ModelTarget("renamed"),), deadline_s=10))

    (failure,) = report.failures
    assert failure.label == "metadata[renamed]"
    assert "'text_output' (BYTES) is missing" in failure.detail and "'answer'" in failure.detail
    assert report.model("renamed").status is ModelStatus.CONTRACT_MISMATCH


def test_a_custom_contract_matches_the_renamed_model(mlserver: Server) -> None:
    contract = TextContract.simple("text_input", "answer")
    report = run_probe(
        ProbeConfig(mlserver.grpc_url, (ModelTarget("renamed", Family.GPTJ, contract),), latency_requests=2)
    )

    assert report.ok, report.failure_message()


def test_cli_probe_exits_1_and_names_the_failed_check(mlserver: Server, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["probe", "--url", mlserver.http_url, "--model", "t5-babbler", "--family", "t5", "--deadline", "10"])

    captured = capsys.readouterr()
    assert code == 1
    assert "FAIL  inference[t5-babbler]" in captured.out
    assert "inference[t5-babbler]: BLEU" in captured.err
