"""The probe and a model served by Triton's vLLM backend, without a server: what it sends (NVIDIA's inputs, greedy
sampling parameters, the same ``max_tokens`` directly and through the gateway) and that its target comes from the
spec. On the real Triton + vLLM: ``tests/system/realtriton/test_gateway_vllm.py``."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from tests.tritonft.engines.vllm.test_engine import LLAMA_8B
from tests.tritonft.probe.test_streaming_units import FakeClient
from tritonft.engines.vllm.contract import INPUTS
from tritonft.probe import ModelTarget, ProbeConfig, run_probe
from tritonft.probe.endpoint import Endpoint
from tritonft.probe.expectations import Sample
from tritonft.probe.judge_reference import REFERENCE_STEPS
from tritonft.probe.rendered import target_for_spec
from tritonft.probe.streaming import StreamedAnswer
from tritonft.probe.vllm import PROBE_MAX_TOKENS, generate_body
from tritonft.spec import Family

EXPECTED = (Sample("Hello", " world"),)


def test_a_llama_specs_target_is_asked_as_a_vllm_model_with_nvidias_contract() -> None:
    target = target_for_spec(LLAMA_8B)
    assert (target.vllm, target.streaming, target.max_tokens, target.family) == (True, True, None, Family.LLAMA)
    assert [t.name for t in target.contract.inputs] == [t.name for t in INPUTS]


def test_a_llama_judged_against_its_reference_is_asked_the_references_greedy_steps() -> None:
    target = target_for_spec(LLAMA_8B, reference=True)

    assert (target.vllm, target.reference, target.max_tokens) == (True, True, REFERENCE_STEPS[Family.LLAMA])


def test_an_architecture_without_a_cpu_forward_keeps_the_older_check_under_reference() -> None:
    assert LLAMA_8B.vllm is not None
    mistral = replace(LLAMA_8B, vllm=replace(LLAMA_8B.vllm, architecture="MistralForCausalLM"))

    target = target_for_spec(mistral, reference=True)

    assert (target.reference, target.max_tokens) == (False, None)


def test_the_vllm_flag_round_trips_through_json() -> None:
    target = ModelTarget("llama", Family.LLAMA, vllm=True, expected=EXPECTED)
    assert target.to_dict()["vllm"] is True
    assert ModelTarget.from_dict(target.to_dict()) == target
    assert "vllm" not in ModelTarget("gpt", Family.GPT2).to_dict()


def test_the_http_request_is_greedy_streamed_without_the_prompt() -> None:
    body = generate_body("Hello", 16)
    assert set(body) <= {t.name for t in INPUTS}
    assert (body["text_input"], body["stream"], body["exclude_input_in_output"]) == ("Hello", True, True)
    assert json.loads(body["sampling_parameters"]) == {"max_tokens": 16, "temperature": 0}


class Recorder:
    """Stands in for the vLLM stream (and the gateway): records what the probe asked."""

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.asked: list[dict[str, Any]] = []
        self.completed: list[dict[str, Any]] = []

    def ask(self, endpoint: Endpoint, model: str, prompt: str, **how: Any) -> StreamedAnswer:
        self.asked.append({"model": model, "prompt": prompt, "max_tokens": how["max_tokens"]})
        return StreamedAnswer(self.answer, responses=3, first_s=0.01, last_s=0.03)

    def complete(self, url: str, model: str, prompts: list[str], **how: Any) -> list[str]:
        self.completed.append({"prompts": prompts, "max_tokens": how["max_tokens"]})
        return [self.answer for _ in prompts]


def probe(recorder: Recorder) -> Any:
    target = ModelTarget("llama", Family.LLAMA, expected=EXPECTED, vllm=True)
    config = ProbeConfig(
        "grpc://127.0.0.1:8001", (target,), deadline_s=5, latency_requests=2, gateway_url="http://gw/v1"
    )
    client = FakeClient(served_decoupled=True)
    report = run_probe(config, lambda _e, _h: client, complete=recorder.complete, ask_vllm=recorder.ask)
    return report, client


def test_a_vllm_model_is_asked_its_greedy_stream_and_judged_directly_and_through_the_gateway() -> None:
    recorder = Recorder(" world")
    report, client = probe(recorder)
    assert report.ok, report.failure_message()
    assert client.calls == []  # never the ensemble's text-only stream: the vLLM inputs are needed
    assert recorder.asked == [{"model": "llama", "prompt": "Hello", "max_tokens": PROBE_MAX_TOKENS}] * 3
    assert recorder.completed == [{"prompts": ["Hello"], "max_tokens": PROBE_MAX_TOKENS}]
    model = report.model("llama")
    assert model.streaming and model.first_response_latency is not None


def test_a_vllm_model_answering_otherwise_is_a_wrong_answer_naming_the_prompt() -> None:
    report, _ = probe(Recorder(" there"))
    assert not report.ok
    assert report.model("llama").status == "wrong_answer"
    assert "the answer to 'Hello' is not the expected one" in report.failure_message()
