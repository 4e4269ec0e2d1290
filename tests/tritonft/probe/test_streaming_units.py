"""The probe's streaming pieces without a server: how responses make an answer, how generate-stream events read,
and how the runner decides to stream (a fake client records which call it got)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from tritonft.probe import ModelReport, ModelStatus, ModelTarget, ProbeConfig, ProbeReport, run_probe
from tritonft.probe.contract import DEFAULT_TEXT_CONTRACT, TextContract
from tritonft.probe.endpoint import Endpoint, Protocol
from tritonft.probe.retry import PermanentError
from tritonft.probe.runner import decoupled
from tritonft.probe.stats import LatencySummary
from tritonft.probe.streaming import StreamedAnswer, assemble, event_text, generate_stream_url, sse_events
from tritonft.spec import Family

PROMPT = "Once upon a time"


def test_cumulative_responses_give_the_last_one_without_the_prompts_echo() -> None:
    pieces = [f"{PROMPT} there", f"{PROMPT} there was", f"{PROMPT} there was a king"]

    assert assemble(pieces, PROMPT) == " there was a king"


def test_responses_that_each_carry_a_new_piece_are_joined() -> None:
    assert assemble([" there", " was", " a king"], PROMPT) == " there was a king"


def test_no_response_is_no_answer() -> None:
    assert assemble([], PROMPT) == ""


def test_server_sent_events_are_split_on_blank_lines() -> None:
    lines = [b'data: {"a": 1}\n', b"\n", b"data: line one\n", b"data: line two\n", b"\n", b'data: {"b": 2}']

    assert list(sse_events(lines)) == ['{"a": 1}', "line one\nline two", '{"b": 2}']


def test_an_event_gives_the_text_output_and_an_error_event_raises_the_servers_words() -> None:
    assert event_text('{"model_name": "m", "text_output": "hi"}', DEFAULT_TEXT_CONTRACT, "ask") == "hi"
    assert event_text('{"model_name": "m"}', DEFAULT_TEXT_CONTRACT, "ask") is None
    with pytest.raises(PermanentError, match="error event: in ensemble 'm', boom"):
        event_text('{"error": "in ensemble \'m\', boom"}', DEFAULT_TEXT_CONTRACT, "ask")


def test_the_generate_stream_url_keeps_the_ingress_prefix_and_quotes_the_model() -> None:
    endpoint = Endpoint("triton.example.com:443/v2-prefix", Protocol.HTTP, ssl=True)

    assert generate_stream_url(endpoint, "gpt 2") == (
        "https://triton.example.com:443/v2-prefix/v2/models/gpt%202/generate_stream"
    )


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({"model_transaction_policy": {"decoupled": True}}, True),
        ({"modelTransactionPolicy": {"decoupled": True}}, True),
        ({"model_transaction_policy": {}}, False),
        ({}, False),
    ],
)
def test_a_config_is_decoupled_only_when_its_transaction_policy_says_so(config: dict[str, Any], expected: bool) -> None:
    assert decoupled(config) is expected


class FakeClient:
    """A Triton with one GPT model, decoupled or not; records which inference call the probe made."""

    def __init__(self, served_decoupled: bool) -> None:
        self.served_decoupled = served_decoupled
        self.calls: list[str] = []

    def server_live(self, timeout_s: float) -> bool:
        return True

    def server_ready(self, timeout_s: float) -> bool:
        return True

    def server_metadata(self, timeout_s: float) -> dict[str, Any]:
        return {"name": "triton", "version": "2.51.0"}

    def model_ready(self, model: str, timeout_s: float) -> bool:
        return True

    def model_metadata(self, model: str, timeout_s: float) -> dict[str, Any]:
        return {
            "inputs": [{"name": "text_input", "datatype": "BYTES"}],
            "outputs": [{"name": "text_output", "datatype": "BYTES"}],
        }

    def model_config(self, model: str, timeout_s: float) -> dict[str, Any] | None:
        tensors = {
            "input": [{"name": "text_input", "data_type": "TYPE_STRING"}],
            "output": [{"name": "text_output", "data_type": "TYPE_STRING"}],
        }
        return {**tensors, "model_transaction_policy": {"decoupled": self.served_decoupled}}

    def infer_text(self, model: str, contract: TextContract, texts: list[str], timeout_s: float) -> list[str]:
        self.calls.append("infer")
        return [" and then"]

    def stream_text(self, model: str, contract: TextContract, prompt: str, timeout_s: float) -> StreamedAnswer:
        self.calls.append("stream")
        return StreamedAnswer(" and then", responses=2, first_s=0.010, last_s=0.030)

    def infer_tensors(
        self, model: str, input_name: str, texts: list[str], outputs: Sequence[str], timeout_s: float
    ) -> dict[str, Any]:
        raise AssertionError("a generator is asked for text, never for tensors")

    def close(self) -> None:
        pass


def probe_with(client: FakeClient, target: ModelTarget) -> ProbeReport:
    config = ProbeConfig("grpc://127.0.0.1:8001", (target,), deadline_s=5, latency_requests=2)
    return run_probe(config, client_factory=lambda _e, _h: client)


def test_a_model_served_decoupled_is_streamed_and_both_latencies_are_reported() -> None:
    client = FakeClient(served_decoupled=True)

    report = probe_with(client, ModelTarget("gpt", Family.GPT2))

    assert report.ok, report.failure_message()
    assert client.calls == ["stream"] * 3  # the judged prompt, then two timed requests
    model = report.model("gpt")
    assert model.streaming
    assert model.first_response_latency is not None and model.first_response_latency.p50_ms == pytest.approx(10.0)


def test_a_model_served_unary_is_asked_in_one_call() -> None:
    client = FakeClient(served_decoupled=False)

    report = probe_with(client, ModelTarget("gpt", Family.GPT2))

    assert report.ok and client.calls == ["infer"] * 3
    assert not report.model("gpt").streaming and report.model("gpt").first_response_latency is None


def test_a_model_rendered_streaming_but_served_unary_is_a_contract_mismatch() -> None:
    report = probe_with(FakeClient(served_decoupled=False), ModelTarget("gpt", Family.GPT2, streaming=True))

    (failure,) = report.failures
    assert failure.label == "model_config[gpt]"
    assert "rendered decoupled (streaming: true) but the served one is not" in failure.detail
    assert report.model("gpt").status is ModelStatus.CONTRACT_MISMATCH


def test_the_streaming_flag_and_first_response_latency_round_trip_through_json() -> None:
    latency = LatencySummary(count=2, p50_ms=30.0, p95_ms=31.0, mean_ms=30.0, max_ms=31.0)
    first = LatencySummary(count=2, p50_ms=10.0, p95_ms=11.0, mean_ms=10.0, max_ms=11.0)
    model = ModelReport("gpt", "gpt2", ModelStatus.OK, "p", "a", None, latency, True, first)
    report = ProbeReport("grpc://h:1", "grpc", True, 0.1, models=(model,))

    assert ProbeReport.from_dict(report.to_dict()) == report
    target = ModelTarget("gpt", Family.GPT2, streaming=True)
    assert ModelTarget.from_dict(target.to_dict()) == target
    assert "streaming" not in ModelTarget("gpt").to_dict(), "unchanged inputs for the stacks that do not stream"
