"""Pure parts of the probe: endpoint parsing, contract comparison, answer judging, retries, report round trip."""

from __future__ import annotations

import json

import pytest

from tritonft.probe import (
    CheckOutcome,
    Endpoint,
    LatencySummary,
    ModelReport,
    ModelStatus,
    ProbeReport,
    Protocol,
    TensorSpec,
    TextContract,
    parse_endpoint,
)
from tritonft.probe.contract import compare_metadata, compare_model_config
from tritonft.probe.expectations import judge, load_translation_set, samples_for
from tritonft.probe.retry import Deadline, PermanentError, RetriesExhaustedError, TransientError, retry
from tritonft.probe.stats import percentile
from tritonft.spec import Family


@pytest.mark.parametrize(
    ("url", "protocol", "expected"),
    [
        ("http://127.0.0.1:8000", None, Endpoint("127.0.0.1:8000", Protocol.HTTP)),
        (
            "https://triton.example.com/v2-prefix/",
            None,
            Endpoint("triton.example.com:443/v2-prefix", Protocol.HTTP, True),
        ),
        ("grpc://127.0.0.1", None, Endpoint("127.0.0.1:8001", Protocol.GRPC)),
        ("127.0.0.1", "grpc", Endpoint("127.0.0.1:8001", Protocol.GRPC)),
        ("127.0.0.1", None, Endpoint("127.0.0.1:8000", Protocol.HTTP)),
        ("grpcs://[::1]:9000", None, Endpoint("[::1]:9000", Protocol.GRPC, True)),
    ],
)
def test_endpoint_forms(url: str, protocol: str | None, expected: Endpoint) -> None:
    assert parse_endpoint(url, protocol) == expected


@pytest.mark.parametrize(
    ("url", "protocol", "message"),
    [
        ("", None, "empty"),
        ("ftp://host", None, "scheme 'ftp'"),
        ("grpc://host:8001", "http", "protocol 'http' was requested"),
        ("grpc://host:8001/path", None, "cannot have a path"),
        ("http://host:99999", None, "invalid port"),
    ],
)
def test_bad_endpoints_say_what_to_fix(url: str, protocol: str | None, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_endpoint(url, protocol)


def test_metadata_matching_the_contract_has_no_problems() -> None:
    metadata = {
        "inputs": [{"name": "text_input", "datatype": "BYTES"}],
        "outputs": [{"name": "text_output", "datatype": "BYTES"}],
    }
    assert compare_metadata(TextContract(), metadata) == []


def test_metadata_differences_are_all_listed() -> None:
    metadata = {
        "inputs": [{"name": "text_input", "datatype": "INT32"}, {"name": "max_output_len", "datatype": "UINT32"}],
        "outputs": [],
    }
    assert compare_metadata(TextContract(), metadata) == [
        "input 'text_input' has datatype INT32, expected BYTES",
        "input 'max_output_len' (UINT32) is not in the rendered contract",
        "output 'text_output' (BYTES) is missing; the server declares []",
    ]


def test_text_only_contract_accepts_the_ensembles_extra_tensors() -> None:
    metadata = {
        "inputs": [{"name": "text_input", "datatype": "BYTES"}, {"name": "bad_words", "datatype": "BYTES"}],
        "outputs": [{"name": "text_output", "datatype": "BYTES"}, {"name": "cum_log_probs", "datatype": "FP32"}],
    }
    assert compare_metadata(TextContract.simple(), metadata) == []


def test_text_only_contract_accepts_optional_config_inputs_and_names_a_required_one() -> None:
    config = {
        "input": [
            {"name": "text_input", "data_type": "TYPE_STRING"},
            {"name": "max_output_len", "data_type": "TYPE_UINT32", "optional": True},
            {"name": "request_id", "data_type": "TYPE_UINT64"},
        ],
        "output": [{"name": "text_output", "data_type": "TYPE_STRING"}],
    }
    assert compare_model_config(TextContract.simple(), config) == [
        "config input 'request_id' is required (not optional) but the probe sends only 'text_input', "
        "so the server would refuse every request"
    ]


def test_model_config_types_are_mapped_to_v2_names() -> None:
    config = {
        "input": [{"name": "text_input", "data_type": "TYPE_STRING"}],
        "output": [{"name": "text_output", "data_type": "TYPE_FP32"}],
    }
    assert compare_model_config(TextContract(), config) == [
        "config output 'text_output' has datatype FP32, expected BYTES"
    ]


def test_contract_text_tensors_must_be_declared_bytes_tensors() -> None:
    with pytest.raises(ValueError, match="text_output 'answer' is not one of the declared tensors"):
        TextContract(text_output="answer")
    with pytest.raises(ValueError, match="must be BYTES"):
        TextContract(inputs=(TensorSpec("text_input", "INT32"),))


def test_contract_round_trips_through_json() -> None:
    contract = TextContract.simple("text_input", "text_output")
    assert TextContract.from_dict(json.loads(json.dumps(contract.to_dict()))) == contract


def test_bundled_translation_set_uses_the_t5_prefix_and_notes_its_source() -> None:
    dataset = load_translation_set()
    assert len(dataset.pairs) >= 5
    assert "seed 000" in dataset.source
    assert samples_for(Family.T5)[0].prompt == f"translate English to German: {dataset.pairs[0][0]}"


def test_reference_translations_pass_and_untranslated_text_fails() -> None:
    samples = samples_for(Family.T5)
    references = [s.reference or "" for s in samples]
    assert judge(Family.T5, samples, references).ok
    echoed = judge(Family.T5, samples, [s.prompt for s in samples])
    assert not echoed.ok and echoed.score is not None and echoed.score < 15


def test_gpt_answer_that_only_echoes_the_prompt_fails() -> None:
    samples = samples_for(Family.GPTJ)
    verdict = judge(Family.GPTJ, samples, [samples[0].prompt + "  "])
    assert not verdict.ok and "empty continuation" in verdict.detail
    assert judge(Family.GPTJ, samples, [samples[0].prompt + " and so on"]).ok


def test_without_family_only_a_non_empty_answer_is_required_and_the_verdict_says_so() -> None:
    verdict = judge(None, samples_for(None), ["anything"])
    assert verdict.ok and "only" in verdict.detail


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_retry_backs_off_and_stops_at_the_deadline() -> None:
    clock = FakeClock()
    deadline = Deadline(10.0, clock=clock)
    timeouts: list[float] = []

    def always_down(timeout: float) -> None:
        timeouts.append(timeout)
        clock.now += timeout  # the call used its whole timeout
        raise TransientError("connection refused")

    with pytest.raises(RetriesExhaustedError, match="connection refused") as caught:
        retry(always_down, deadline, per_call_timeout_s=4.0, sleep=clock.sleep)

    assert caught.value.timed_out
    assert clock.now == pytest.approx(10.0)  # never past the deadline
    assert timeouts == pytest.approx([4.0, 4.0, 1.4])  # 4 + 0.2 s pause + 4 + 0.4 s pause: the last call is shortened


def test_retry_returns_after_transient_failures() -> None:
    clock = FakeClock()
    failures = [TransientError("503"), TransientError("503")]

    def flaky(_timeout: float) -> str:
        if failures:
            raise failures.pop()
        return "ready"

    done = retry(flaky, Deadline(60, clock=clock), 5.0, sleep=clock.sleep)
    assert (done.value, done.attempts) == ("ready", 3)
    assert clock.now == pytest.approx(0.2 + 0.4)  # exponential backoff


def test_permanent_errors_are_not_retried() -> None:
    calls = []

    def bad_request(_timeout: float) -> None:
        calls.append(1)
        raise PermanentError("400: bad input")

    with pytest.raises(RetriesExhaustedError) as caught:
        retry(bad_request, Deadline(60), 5.0, sleep=lambda _s: None)
    assert len(calls) == 1 and not caught.value.timed_out


def test_percentile_interpolates_linearly() -> None:
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert percentile([5.0], 95) == 5.0
    with pytest.raises(ValueError):
        percentile([], 50)


def test_report_round_trips_through_json() -> None:
    report = ProbeReport(
        endpoint="grpc://127.0.0.1:8001",
        protocol="grpc",
        ok=False,
        elapsed_s=1.5,
        server={"name": "triton", "version": "2.50"},
        checks=(
            CheckOutcome("server_live", True, "ok", 0.1),
            CheckOutcome("inference", False, "BLEU 1.0 < 15.0", 0.2, model="t5", attempts=8),
        ),
        models=(ModelReport("t5", "t5", ModelStatus.WRONG_ANSWER, "p", "a", 1.0, LatencySummary(3, 1, 2, 1.5, 2)),),
    )
    again = ProbeReport.from_dict(json.loads(json.dumps(report.to_dict())))
    assert again == report
    assert again.failure_message() == "inference[t5]: BLEU 1.0 < 15.0"


def test_the_rendered_contract_lists_every_tensor_of_the_ensemble() -> None:
    from components.settings.catalog import KNOWN_MODELS
    from tritonft.probe.rendered import contract_for_spec
    from tritonft.spec import ModelSpec

    family, arch = KNOWN_MODELS["t5-small"]
    spec = ModelSpec("t5-small", family, "t5-small", "df1b051c49625cf57a3d0d8d3863ed4d13564fe4", arch)
    contract = contract_for_spec(spec)
    names = [t.name for t in contract.inputs]
    assert names[0] == "text_input" and "max_output_len" in names
    assert dict((t.name, t.datatype) for t in contract.inputs)["max_output_len"] == "UINT32"
    assert [t.to_dict() for t in contract.outputs] == [
        {"name": "text_output", "datatype": "BYTES"},
        {"name": "input_lengths", "datatype": "UINT32"},
        {"name": "output_lengths", "datatype": "INT32"},
        {"name": "output_tokens", "datatype": "BYTES"},
        {"name": "output_log_probs", "datatype": "FP32"},
    ]
    assert contract.text_input == "text_input" and contract.text_output == "text_output"
