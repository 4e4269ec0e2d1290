"""A ``stream: true`` request that fails before the first chunk of its completion gets the HTTP error the same
request unstreamed gets (status, OpenAI error body, ``Retry-After``), never 200 and an error event; an error after
the first chunk arrives as an SSE error event.

The gateway runs as its container runs it. "Asleep" is a gateway whose Triton port has nothing listening (a model
scaled to zero has no replica); "awake" is one in front of the real Triton serving the matrix repository (FT step
stood in for: GPT answers echo the prompt, a decoupled model sends one response per token).
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from email.message import Message
from pathlib import Path
from typing import Any

import openai
import pytest

from tests.system.realtriton.repos import MATRIX, matrix_spec
from tests.system.realtriton.test_prometheus_signal import wait_for
from tests.tritonft.gateway.server import GatewayProcess, started
from tritonft.local_triton import LocalTriton, free_port
from tritonft.repo.naming import RepoNames
from tritonft.standin import set_behaviour

pytestmark = pytest.mark.slow

SLEEPING = ("gpt2-tp1", "gpt2-stream")
"""Served with ``--scales-to-zero``: one model answering in one piece, one decoupled (streaming) model."""
DOWN = "gptj-tp1"
"""Does not scale to zero: its Triton unreachable is an outage, not a model waking up."""
TOO_LONG = " ".join(["hello world"] * 80)
"""Over the matrix models' max_input_len (64 tokens): Triton's preprocessing refuses it."""


def start_gateway(
    triton_grpc: str, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest, *extra: str
) -> Iterator[GatewayProcess]:
    with started(GatewayProcess(triton_grpc, MATRIX, tmp_path_factory.mktemp("gateway"), extra), request) as running:
        yield running


@pytest.fixture(scope="module")
def asleep(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[GatewayProcess]:
    flags = [arg for name in SLEEPING for arg in ("--scales-to-zero", name)]
    yield from start_gateway(f"127.0.0.1:{free_port()}", tmp_path_factory, request, *flags)


@pytest.fixture(scope="module")
def awake(
    matrix_triton: LocalTriton, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[GatewayProcess]:
    yield from start_gateway(matrix_triton.grpc_url, tmp_path_factory, request)


def peer(gateway: GatewayProcess) -> openai.OpenAI:
    """The official client, not retrying: the test sees the first answer (it retries a 503 by itself otherwise)."""
    return openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="unused", max_retries=0, timeout=30)


def post(gateway: GatewayProcess, path: str, body: dict[str, Any]) -> tuple[int, Message, bytes]:
    """Status, headers and whole body of a raw POST (an error status is an answer here, not an exception)."""
    data = json.dumps(body).encode()
    call = urllib.request.Request(f"{gateway.url}{path}", data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(call, timeout=30) as answer:
            return answer.status, answer.headers, answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, exc.read()


def events(body: bytes) -> list[Any]:
    """The server-sent events of ``body``: each ``data:`` payload as JSON, ``[DONE]`` as the string."""
    payloads = [frame.removeprefix(b"data: ") for frame in body.split(b"\n\n") if frame]
    return [p.decode() if p == b"[DONE]" else json.loads(p) for p in payloads]


def sample(metrics_url: str, series: str) -> float:
    """The value of one series on a Prometheus text endpoint (0 when absent)."""
    with urllib.request.urlopen(metrics_url, timeout=5) as answer:
        text = answer.read().decode()
    found = re.search(rf"^{re.escape(series)} (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def answered_count(gateway: GatewayProcess, model: str, status: int) -> float:
    """``tritonft_gateway_requests_total`` of the completions route for ``model`` and ``status``."""
    series = f'tritonft_gateway_requests_total{{model="{model}",route="completions",status="{status}"}}'
    return sample(f"{gateway.url}/metrics", series)


def refusal(error: openai.APIStatusError) -> tuple[int, str | None, str | None]:
    """(status, error code, Retry-After) of an error answer."""
    return error.status_code, error.code, error.response.headers.get("retry-after")


@pytest.mark.parametrize("model", SLEEPING)
def test_a_streamed_completion_for_a_sleeping_model_is_a_503_model_starting_with_retry_after(
    asleep: GatewayProcess, model: str
) -> None:
    with pytest.raises(openai.APIStatusError) as caught:
        peer(asleep).completions.create(model=model, prompt="hello world", max_tokens=4, stream=True)
    assert refusal(caught.value) == (503, "model_starting", "60")
    assert f"model '{model}' has no running replica" in caught.value.message


@pytest.mark.parametrize("model", SLEEPING)
def test_a_streamed_chat_for_a_sleeping_model_is_a_503_model_starting_with_retry_after(
    asleep: GatewayProcess, model: str
) -> None:
    with pytest.raises(openai.APIStatusError) as caught:
        peer(asleep).chat.completions.create(
            model=model, messages=[{"role": "user", "content": "hi"}], max_tokens=4, stream=True
        )
    assert refusal(caught.value) == (503, "model_starting", "60")


def test_an_unstreamed_completion_for_a_sleeping_streaming_model_is_a_503_model_starting(
    asleep: GatewayProcess,
) -> None:
    with pytest.raises(openai.APIStatusError) as caught:
        peer(asleep).completions.create(model="gpt2-stream", prompt="hello world", max_tokens=4)
    assert refusal(caught.value) == (503, "model_starting", "60")


def test_a_refused_stream_is_a_json_error_answer_not_an_event_stream(
    asleep: GatewayProcess,
) -> None:
    status, headers, body = post(
        asleep, "/v1/completions", {"model": "gpt2-stream", "prompt": "hello", "max_tokens": 4, "stream": True}
    )
    assert status == 503
    assert headers["content-type"] == "application/json"
    assert json.loads(body)["error"]["code"] == "model_starting"


def test_a_streamed_completion_for_an_unreachable_model_that_does_not_scale_to_zero_is_a_503_triton_down(
    asleep: GatewayProcess,
) -> None:
    with pytest.raises(openai.APIStatusError) as caught:
        peer(asleep).completions.create(model=DOWN, prompt="hello world", max_tokens=4, stream=True)
    assert refusal(caught.value) == (503, "triton_down", None)


def test_the_status_of_a_refused_stream_is_the_one_counted_and_logged(asleep: GatewayProcess) -> None:
    model = "gpt2-stream"

    def logged() -> list[int]:
        entries = asleep.access_entries(timeout_s=0)
        return [e["status"] for e in entries if e["model"] == model and e["path"] == "/v1/completions"]

    counted, seen = answered_count(asleep, model, 503), len(logged())
    post(asleep, "/v1/completions", {"model": model, "prompt": "hello", "max_tokens": 4, "stream": True})
    # the line and the count are written once the answer is sent: the client may read it first
    assert wait_for("the refused stream counted", lambda: answered_count(asleep, model, 503) == counted + 1, 5)
    assert answered_count(asleep, model, 200) == 0
    assert wait_for("the refused stream's access-log line", lambda: logged()[seen:], 5) == [503]


@pytest.mark.parametrize("model", ["gpt2-tp1", "gpt2-stream"])
def test_a_streamed_prompt_triton_refuses_is_a_400_not_an_event(awake: GatewayProcess, model: str) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        peer(awake).completions.create(model=model, prompt=TOO_LONG, max_tokens=4, stream=True)
    assert caught.value.code == "context_length_exceeded"


@pytest.mark.parametrize("model", ["gpt2-tp1", "gpt2-stream"])
def test_an_error_after_the_first_chunk_arrives_as_an_sse_error_event(awake: GatewayProcess, model: str) -> None:
    body = {"model": model, "prompt": ["hello world", TOO_LONG], "max_tokens": 16, "stream": True}
    status, headers, raw = post(awake, "/v1/completions", body)
    assert status == 200
    assert headers["content-type"].startswith("text/event-stream")
    *chunks, error, done = events(raw)
    assert {c["choices"][0]["index"] for c in chunks} == {0}
    assert "".join(c["choices"][0]["text"] for c in chunks) == "hello world"
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    assert error["error"]["code"] == "context_length_exceeded"
    assert done == "[DONE]"


def test_a_streamed_chat_from_the_streaming_model_arrives_in_several_pieces_that_make_the_answer(
    awake: GatewayProcess,
) -> None:
    messages: Any = [{"role": "system", "content": "be brief"}]
    whole = peer(awake).chat.completions.create(model="gpt2-stream", messages=messages, max_tokens=16)
    stream = peer(awake).chat.completions.create(model="gpt2-stream", messages=messages, max_tokens=16, stream=True)
    deltas = [chunk.choices[0].delta for chunk in stream]
    assert deltas[0].role == "assistant"
    contents = [d.content for d in deltas if d.content]
    assert len(contents) > 1
    assert "".join(contents).strip() == whole.choices[0].message.content


def test_a_streamed_request_whose_deadline_passes_before_the_first_token_is_a_504(
    matrix_triton: LocalTriton, matrix_repository: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    ft = matrix_repository / RepoNames.of(matrix_spec("gpt2-stream")).ft
    hurried = GatewayProcess(matrix_triton.grpc_url, MATRIX, tmp_path, extra=["--deadline", "1"])
    with started(hurried, request) as gateway:
        set_behaviour(ft, sleep_s=3)
        try:
            with pytest.raises(openai.APIStatusError) as caught:
                peer(gateway).completions.create(model="gpt2-stream", prompt="hello", max_tokens=4, stream=True)
        finally:
            set_behaviour(ft)
    assert caught.value.status_code == 504
    assert caught.value.code == "timeout"


def test_a_streamed_chat_never_sends_the_start_of_the_stop_phrase_it_ends_at(awake: GatewayProcess) -> None:
    # the stand-in echoes the template, so the model's reply runs into the next "User:" turn, token by token
    messages: Any = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi there"}]
    stream = peer(awake).chat.completions.create(model="gpt2-stream", messages=messages, max_tokens=32, stream=True)
    chunks = list(stream)
    assert "".join(c.choices[0].delta.content or "" for c in chunks).strip() == "System: be brief"
    assert chunks[-1].choices[0].finish_reason == "stop"


def successes(triton: LocalTriton, model: str) -> float:
    """Triton's own count of the requests ``model`` completed."""
    return sample(triton.metrics_url, f'nv_inference_request_success{{model="{model}",version="1"}}')


def test_a_stream_abandoned_at_its_stop_phrase_is_cancelled_at_triton(
    awake: GatewayProcess, matrix_triton: LocalTriton, matrix_repository: Path
) -> None:
    # Paced, the model still generates after the stop phrase. Triton does not stop a composing model's request,
    # but a cancelled ensemble runs no further step: each response the model sends after the cancellation is one
    # postprocessing run fewer than when the stream is read to its end.
    names = RepoNames.of(matrix_spec("gpt2-stream"))
    prompt = "one two three four five six seven eight"

    def streamed(**stop: Any) -> tuple[str, float]:
        ft, post = successes(matrix_triton, names.ft), successes(matrix_triton, names.postprocessing)
        stream = peer(awake).completions.create(model=names.ensemble, prompt=prompt, max_tokens=24, stream=True, **stop)
        text = "".join(c.choices[0].text for c in stream)
        wait_for("the model to end its generation", lambda: successes(matrix_triton, names.ft) > ft, 15)
        return text, successes(matrix_triton, names.postprocessing) - post

    set_behaviour(matrix_repository / names.ft, token_interval_s=0.1)
    try:
        whole, read_to_the_end = streamed()
        cut, abandoned = streamed(stop=["two"])
    finally:
        set_behaviour(matrix_repository / names.ft)
    assert whole.startswith("one two three") and cut.strip() == "one"
    assert abandoned < read_to_the_end - 2, (
        f"postprocessing ran {abandoned} times when stopped, {read_to_the_end} in all"
    )


def test_a_streamed_call_is_timed_to_its_first_response_and_to_its_end(awake: GatewayProcess) -> None:
    timings = ("tritonft_gateway_triton_first_response_seconds_count", "tritonft_gateway_triton_seconds_count")

    def counts() -> list[float]:
        return [sample(f"{awake.url}/metrics", f'{name}{{model="gpt2-stream"}}') for name in timings]

    before = counts()
    list(peer(awake).completions.create(model="gpt2-stream", prompt="hello world", max_tokens=8, stream=True))
    assert [after - was for after, was in zip(counts(), before, strict=True)] == [1.0, 1.0]
