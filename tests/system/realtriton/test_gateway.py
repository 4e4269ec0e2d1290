"""The OpenAI-compatible gateway in front of the real Triton (matrix repository, FT step stood in for: GPT answers
echo the prompt), with the official ``openai`` client as the peer."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from tests.system.realtriton.repos import MATRIX
from tests.tritonft.gateway.server import GatewayProcess
from tests.tritonft.gateway.server import started as _started
from tritonft.local_triton import LocalTriton, free_port
from tritonft.repo.naming import RepoNames
from tritonft.standin import set_behaviour

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def gateway(
    matrix_triton: LocalTriton, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[GatewayProcess]:
    with _started(
        GatewayProcess(matrix_triton.grpc_url, MATRIX, tmp_path_factory.mktemp("gateway")), request
    ) as running:
        yield running


@pytest.fixture(scope="module")
def client(gateway: GatewayProcess) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="unused", max_retries=0, timeout=30)


def test_a_completion_answers_the_prompt_through_the_ensemble(client: openai.OpenAI) -> None:
    answer = client.completions.create(model="gpt2-tp1", prompt="hello world", max_tokens=16, temperature=0)
    assert [c.text for c in answer.choices] == ["hello world"]
    assert answer.model == "gpt2-tp1"
    assert answer.object == "text_completion"


def test_a_list_of_prompts_gets_one_choice_per_prompt_in_order(client: openai.OpenAI) -> None:
    prompts = ["hello world", "the quick fox", "once upon a time"]
    answer = client.completions.create(model="gpt2-tp2", prompt=prompts, max_tokens=16, seed=3)
    assert [(c.index, c.text) for c in answer.choices] == list(enumerate(prompts))


def test_a_stop_phrase_with_a_line_break_ends_the_completion_before_it(client: openai.OpenAI) -> None:
    prompt = "first line\nsecond line"
    answer = client.completions.create(model="gpt2-tp1", prompt=prompt, max_tokens=16, stop="line\nsecond")
    assert answer.choices[0].text == "first "
    assert answer.choices[0].finish_reason == "stop"


def test_every_family_answers_through_the_gateway(client: openai.OpenAI) -> None:
    for model in ("t5-tp1", "gptj-tp1"):
        answer = client.completions.create(model=model, prompt="hello world", max_tokens=16, top_p=0.9)
        assert answer.choices[0].text.strip() != "", model


def test_the_streaming_model_streams_the_completion_in_growing_pieces(client: openai.OpenAI) -> None:
    stream = client.completions.create(model="gpt2-stream", prompt="hello world", max_tokens=16, stream=True)
    pieces = [chunk.choices[0].text for chunk in stream]
    assert len([p for p in pieces if p]) > 1
    assert "".join(pieces) == "hello world"


def test_a_unary_model_streams_its_answer_as_one_event(client: openai.OpenAI) -> None:
    stream = client.completions.create(model="gpt2-tp1", prompt="hello world", max_tokens=16, stream=True)
    chunks = list(stream)
    assert [c.choices[0].text for c in chunks] == ["hello world", ""]
    assert chunks[-1].choices[0].finish_reason is not None


def test_chat_sends_the_documented_template_to_the_model(client: openai.OpenAI) -> None:
    answer = client.chat.completions.create(
        model="gpt2-tp1",
        messages=[{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi there"}],
        max_tokens=32,
    )
    # the stand-in echoes the rendered template; the reply ends where the next "User:" turn starts
    assert answer.choices[0].message.content == "System: be brief"
    assert answer.choices[0].finish_reason == "stop"
    assert answer.choices[0].message.role == "assistant"


def test_chat_is_refused_for_t5(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError, match="no chat template"):
        client.chat.completions.create(model="t5-tp1", messages=[{"role": "user", "content": "hi"}])


def test_models_lists_every_served_model(client: openai.OpenAI) -> None:
    assert sorted(m.id for m in client.models.list()) == sorted(spec.name for spec in MATRIX)


def test_an_unknown_model_is_a_404_naming_the_served_ones(client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        client.completions.create(model="gpt4", prompt="hi")
    assert caught.value.code == "model_not_found"
    assert "gpt2-tp1" in caught.value.message


def test_a_prompt_over_max_input_len_is_a_400_context_length_error(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.completions.create(model="gpt2-tp1", prompt=" ".join(["hello world"] * 80), max_tokens=4)
    assert caught.value.code == "context_length_exceeded"
    assert "at most 64" in caught.value.message


@pytest.mark.parametrize(
    ("field", "value"), [("max_tokens", 33), ("temperature", 3.0), ("top_p", -0.1), ("n", 99), ("stop", [""])]
)
def test_a_bad_parameter_is_a_400_naming_it(client: openai.OpenAI, field: str, value: object) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.completions.create(model="gpt2-tp1", prompt="hi", extra_body={field: value})
    assert caught.value.param == field


def test_a_body_over_the_size_limit_is_a_413(client: openai.OpenAI) -> None:
    with pytest.raises(openai.APIStatusError) as caught:
        client.completions.create(model="gpt2-tp1", prompt="x" * (2 << 20))
    assert caught.value.status_code == 413


def test_the_metrics_count_answers_by_route_model_and_status(gateway: GatewayProcess, client: openai.OpenAI) -> None:
    client.completions.create(model="gptj-tp2", prompt="hello", max_tokens=4)
    with urllib.request.urlopen(f"{gateway.url}/metrics", timeout=5) as answer:
        text = answer.read().decode()
    assert 'tritonft_gateway_requests_total{model="gptj-tp2",route="completions",status="200"}' in text


def test_access_log_lines_are_json_with_status_and_model(gateway: GatewayProcess, client: openai.OpenAI) -> None:
    client.completions.create(model="t5-tp2", prompt="hello", max_tokens=4)

    def answered(e: dict[str, Any]) -> bool:
        return bool(e["model"] == "t5-tp2" and e["status"] == 200 and e["path"] == "/v1/completions")

    assert any(answered(e) for e in gateway.access_entries(until=answered))


def test_ready_reflects_triton(gateway: GatewayProcess) -> None:
    with urllib.request.urlopen(f"{gateway.url}/health/ready", timeout=5) as answer:
        assert answer.status == 200


def test_a_deadline_that_expires_is_a_504_and_the_gateway_keeps_serving(
    matrix_triton: LocalTriton,
    matrix_repository: Path,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    ft = matrix_repository / RepoNames.of(next(s for s in MATRIX if s.name == "gptj-tp2")).ft
    slow = GatewayProcess(matrix_triton.grpc_url, MATRIX, tmp_path, extra=["--deadline", "1"])
    with _started(slow, request) as running:
        peer = openai.OpenAI(base_url=f"{running.url}/v1", api_key="unused", max_retries=0, timeout=30)
        set_behaviour(ft, sleep_s=3)
        try:
            with pytest.raises(openai.APIStatusError) as caught:
                peer.completions.create(model="gptj-tp2", prompt="hello", max_tokens=4)
        finally:
            set_behaviour(ft)
        assert caught.value.status_code == 504
        assert "1 s deadline" in caught.value.message
        assert peer.completions.create(model="gpt2-tp1", prompt="hello", max_tokens=4).choices[0].text == "hello"


def test_triton_down_is_a_503_and_not_ready(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    nowhere = GatewayProcess(f"127.0.0.1:{free_port()}", MATRIX, tmp_path)
    with _started(nowhere, request) as running:
        peer = openai.OpenAI(base_url=f"{running.url}/v1", api_key="unused", max_retries=0, timeout=30)
        with pytest.raises(openai.APIStatusError) as caught:
            peer.completions.create(model="gpt2-tp1", prompt="hello")
        assert caught.value.status_code == 503
        assert caught.value.code == "triton_down"
        with pytest.raises(urllib.error.HTTPError) as ready:
            urllib.request.urlopen(f"{running.url}/health/ready", timeout=5)
        assert ready.value.code == 503
