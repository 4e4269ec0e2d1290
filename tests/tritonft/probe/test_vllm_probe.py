"""The probe and a model served by Triton's vLLM backend, without a server: what it sends (NVIDIA's inputs, greedy
sampling parameters, the same ``max_tokens`` directly and through the gateway) and that its target comes from the
spec. On the real Triton + vLLM: ``tests/system/realtriton/test_gateway_vllm.py``."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.tritonft.engines.vllm.test_engine import LLAMA_8B
from tests.tritonft.probe.test_streaming_units import FakeClient
from tritonft.engines.vllm.contract import INPUTS
from tritonft.errors import UserError
from tritonft.probe import ModelTarget, ProbeConfig, run_probe
from tritonft.probe.cli import add_arguments, config_from_args
from tritonft.probe.endpoint import Endpoint
from tritonft.probe.expectations import Sample
from tritonft.probe.judge_reference import (
    CHAT_CONVERSATIONS,
    REFERENCE_PARAMETER,
    REFERENCE_STEPS,
    JudgeReference,
    PromptReference,
    conversation_label,
)
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
    assert json.loads(body["sampling_parameters"])["max_tokens"] == 16
    assert (body["return_finish_reason"], body["return_num_input_tokens"]) == (True, True)


def test_every_sampling_knob_a_served_default_could_change_is_sent_at_the_references_value() -> None:
    sent = json.loads(generate_body("Hello", 16)["sampling_parameters"])

    assert sent == {
        "max_tokens": 16,
        "temperature": 0,
        "repetition_penalty": 1.0,
        "presence_penalty": 0.0,
        "frequency_penalty": 0.0,
        "min_tokens": 0,
        "ignore_eos": False,
        "skip_special_tokens": True,
    }


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


CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}{{ message['role'] }}: {{ message['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)
DROPS_SYSTEM = CHAT_TEMPLATE.replace("in messages %}", "in messages if message['role'] != 'system' %}")
MESSAGES = tuple(CHAT_CONVERSATIONS[0])
EXPECTED_RENDERING = (
    "system: Answer with exactly one word, in French.\nuser: What color is the sky on a clear day?\nassistant:"
)
REFERENCE = JudgeReference(
    Family.LLAMA,
    "org/tiny",
    "0" * 40,
    "fp32",
    0.1,
    (
        PromptReference("Hello", " world", steps=2, ended=False, prompt_tokens=2),
        PromptReference(
            conversation_label(MESSAGES),
            "Bleu.",
            steps=3,
            ended=True,
            prompt_tokens=30,
            messages=MESSAGES,
            rendered=EXPECTED_RENDERING,
        ),
    ),
    ("<s>", "</s>"),
)


class ReferenceClient(FakeClient):
    """A Triton whose vLLM model's configuration carries :data:`REFERENCE`."""

    def __init__(self) -> None:
        super().__init__(served_decoupled=True)

    def model_config(self, model: str, timeout_s: float) -> dict[str, Any] | None:
        config = super().model_config(model, timeout_s) or {}
        return {**config, "parameters": {REFERENCE_PARAMETER: {"string_value": REFERENCE.to_json()}}}


class Engine:
    """Stands in for a greedy vLLM serving the right weights: its answer and token count for each text it is sent
    (any other text: an English sentence cut by its length)."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def ask(self, endpoint: Endpoint, model: str, prompt: str, **how: Any) -> StreamedAnswer:
        self.asked.append(prompt)
        known = {"Hello": (" world", "length", 2), EXPECTED_RENDERING: ("Bleu.", "stop", 30)}
        text, reason, tokens = known.get(prompt, (" The sky is blue", "length", 21))
        return StreamedAnswer(text, 2, 0.01, 0.02, finish_reason=reason, prompt_tokens=tokens)


def judged(tmp_path: Path, template: str | None) -> tuple[Any, Engine]:
    target = ModelTarget("llama", Family.LLAMA, max_tokens=16, vllm=True, reference=True)
    if template is not None:
        config = tmp_path / "tokenizer_config.json"
        config.write_text(json.dumps({"bos_token": "<s>", "eos_token": "</s>", "chat_template": template}))
        target = replace(target, tokenizer_config=str(config))
    engine = Engine()
    config_ = ProbeConfig("http://127.0.0.1:8000", (target,), deadline_s=5, latency_requests=1)
    client = ReferenceClient()
    return run_probe(config_, lambda _e, _h: client, ask_vllm=engine.ask), engine


def test_a_chat_is_rendered_from_the_versions_tokenizer_config_as_the_gateway_renders_it(tmp_path: Path) -> None:
    report, engine = judged(tmp_path, CHAT_TEMPLATE)

    assert report.ok, report.failure_message()
    assert engine.asked[:2] == ["Hello", EXPECTED_RENDERING], "the template's <s> dropped: the tokenizer adds it"


def test_a_version_whose_template_drops_the_system_message_fails_naming_the_conversation_and_both_answers(
    tmp_path: Path,
) -> None:
    report, engine = judged(tmp_path, DROPS_SYSTEM)

    assert not report.ok
    message = report.failure_message()
    assert "user: What color is the sky on a clear day?\nassistant:" in engine.asked
    assert (
        f"the answer to {conversation_label(MESSAGES)!r} is not the reference's: served ' The sky is blue', "
        "reference 'Bleu.' (ended)" in message
    ), message
    assert "the system message's content 'Answer with exactly one word, in French.' is not in it at all" in message


def test_a_reference_with_a_chat_judged_without_the_versions_tokenizer_config_fails_saying_how_to_give_it(
    tmp_path: Path,
) -> None:
    report, _ = judged(tmp_path, None)

    assert not report.ok
    assert "the judge was given no tokenizer_config.json of the version" in report.failure_message()
    assert "--tokenizer-config MODEL=PATH" in report.failure_message()


def probe_command(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(["--url", "http://127.0.0.1:8000", *argv])


def test_the_probe_command_renders_a_vllm_models_chats_from_the_tokenizer_config_it_is_given(tmp_path: Path) -> None:
    spec = tmp_path / "llama.json"
    spec.write_text(LLAMA_8B.to_json())
    config = tmp_path / "tokenizer_config.json"
    config.write_text("{}")

    probed = config_from_args(
        probe_command("--spec", str(spec), "--reference", "--tokenizer-config", f"{LLAMA_8B.name}={config}")
    )

    (target,) = probed.models
    assert target.tokenizer_config == str(config)


def test_the_probe_command_refuses_a_tokenizer_config_for_a_model_it_does_not_judge(tmp_path: Path) -> None:
    spec = tmp_path / "llama.json"
    spec.write_text(LLAMA_8B.to_json())

    with pytest.raises(UserError, match=r"--tokenizer-config qwen=x.json: no --spec is a vLLM model named 'qwen'"):
        config_from_args(probe_command("--spec", str(spec), "--reference", "--tokenizer-config", "qwen=x.json"))
