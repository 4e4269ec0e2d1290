"""OpenAI requests for a vLLM model -> NVIDIA's vLLM-backend contract, and its responses -> OpenAI bodies (pure).

The wire truth (the real Triton + the real vLLM engine behind the gateway) is
``tests/system/realtriton/test_gateway_vllm.py``; here each rule of :mod:`tritonft.gateway.vllm` on its own.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.tritonft.engines.vllm.checkpoints import CHAT_TEMPLATE, golden
from tests.tritonft.gateway.openai_schema import load, violations
from tritonft.engines.vllm.contract import INPUTS
from tritonft.gateway.config import ServedModel
from tritonft.gateway.errors import ApiError
from tritonft.gateway.parameters import PARAMETERS, VLLM_PARAMETERS
from tritonft.gateway.streaming import Chunks
from tritonft.gateway.triton import raw_value
from tritonft.gateway.vllm import (
    Answer,
    Choice,
    Piece,
    chat_body,
    chat_prompt,
    collect,
    completion_body,
    engine_error,
    infer_request,
    read_piece,
    vllm_request,
)
from tritonft.spec import Family

TOKENIZER_CONFIG = json.dumps({"bos_token": "<s>", "eos_token": "</s>", "chat_template": CHAT_TEMPLATE})
CONTEXT = 8192
LLAMA = ServedModel("llama", Family.LLAMA, True, 128, 512, 1, TOKENIZER_CONFIG, context_len=CONTEXT)
"""FasterTransformer's spec defaults (128 out, 512 in) are in the spec of every model; a vLLM model ignores them."""
PLAIN = ServedModel("plain", Family.LLAMA, True, 128, 512, context_len=CONTEXT)
VLLM_PAGE = Path(__file__).resolve().parents[3] / "docs" / "vllm.md"


def sampling(body: dict[str, Any], *, chat: bool = False) -> dict[str, Any]:
    return dict(json.loads(vllm_request({"model": "llama"} | body, LLAMA, chat=chat).sampling))


def refused(body: dict[str, Any], *, chat: bool = False, model: ServedModel = LLAMA) -> ApiError:
    with pytest.raises(ApiError) as caught:
        vllm_request({"model": model.name} | body, model, chat=chat)
    assert caught.value.status == 400
    return caught.value


def test_greedy_n_asks_vllm_one_completion_and_copies_it() -> None:
    req = vllm_request({"model": "llama", "prompt": "hi", "n": 3, "temperature": 0}, LLAMA)
    assert (json.loads(req.sampling)["n"], req.engine_n, req.n) == (1, 1, 3)
    answer = collect([Piece(("a",), ("length",), 2, (1,))], req.engine_n, req.n // req.engine_n)
    assert answer.choices == (Choice("a", "length", 1),) * 3


def test_sampled_n_asks_vllm_n_completions() -> None:
    req = vllm_request({"model": "llama", "prompt": "hi", "n": 3, "seed": 1}, LLAMA)
    assert (json.loads(req.sampling)["n"], req.engine_n) == (3, 3)


def test_nothing_sent_is_openais_defaults_in_vllms_names() -> None:
    assert sampling({"prompt": "hi"}) == {"max_tokens": 16, "temperature": 1.0, "n": 1}


def test_a_chat_without_max_tokens_may_take_the_rest_of_the_context() -> None:
    messages = [{"role": "user", "content": "hi"}]
    assert sampling({"messages": messages}, chat=True)["max_tokens"] == CONTEXT


def test_max_tokens_is_accepted_up_to_the_context_not_ft_max_output_len() -> None:
    assert sampling({"prompt": "hi", "max_tokens": CONTEXT})["max_tokens"] == CONTEXT
    assert sampling({"prompt": "hi", "max_tokens": 4096})["max_tokens"] == 4096


def test_a_max_tokens_beyond_the_context_names_the_context() -> None:
    error = refused({"prompt": "hi", "max_tokens": CONTEXT + 1})
    assert error.param == "max_tokens"
    assert f"the model's context is {CONTEXT} tokens" in error.message


def test_max_completion_tokens_is_honoured_on_chat() -> None:
    messages = [{"role": "user", "content": "hi"}]
    assert sampling({"messages": messages, "max_completion_tokens": 300}, chat=True)["max_tokens"] == 300
    both = {"messages": messages, "max_completion_tokens": 300, "max_tokens": 300}
    assert sampling(both, chat=True)["max_tokens"] == 300
    disagreeing = refused({"messages": messages, "max_completion_tokens": 300, "max_tokens": 200}, chat=True)
    assert disagreeing.param == "max_completion_tokens"


def test_every_honoured_parameter_reaches_vllms_sampling_parameters() -> None:
    body = {
        "prompt": "hi",
        "max_tokens": 5,
        "temperature": 0,
        "top_p": 0.5,
        "n": 2,
        "stop": ["a", "b"],
        "seed": 3,
        "presence_penalty": 0.5,
        "frequency_penalty": -1,
        "logprobs": 2,
    }
    assert sampling(body) == {
        "max_tokens": 5,
        "temperature": 0.0,
        "top_p": 0.5,
        "n": 1,
        "stop": ["a", "b"],
        "seed": 3,
        "presence_penalty": 0.5,
        "frequency_penalty": -1.0,
        "logprobs": 2,
    }


def test_chat_top_logprobs_are_vllms_logprobs() -> None:
    messages = [{"role": "user", "content": "hi"}]
    assert sampling({"messages": messages, "logprobs": True, "top_logprobs": 4}, chat=True)["logprobs"] == 4
    assert sampling({"messages": messages, "logprobs": True}, chat=True)["logprobs"] == 0
    assert "logprobs" not in sampling({"messages": messages}, chat=True)


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"prompt": ""}, "prompt"),
        ({"prompt": ["ok", ""]}, "prompt"),
        ({"prompt": [1, 2]}, "prompt"),
        ({"prompt": "hi", "max_tokens": CONTEXT + 1}, "max_tokens"),
        ({"prompt": "hi", "max_tokens": "many"}, "max_tokens"),
        ({"prompt": "hi", "temperature": "hot"}, "temperature"),
        ({"prompt": "hi", "top_p": 0}, "top_p"),
        ({"prompt": "hi", "presence_penalty": 2.5}, "presence_penalty"),
        ({"prompt": "hi", "n": 9}, "n"),
        ({"prompt": "hi", "n": 2, "stream": True}, "n"),
        ({"prompt": "hi", "best_of": 3}, "best_of"),
        ({"prompt": "hi", "logprobs": 6}, "logprobs"),
        ({"prompt": "hi", "logprobs": 1, "stream": True}, "logprobs"),
        ({"prompt": "hi", "logprobs": 1, "echo": True}, "echo"),
        ({"prompt": "hi", "logit_bias": {"5": 1}}, "logit_bias"),
        ({"prompt": "hi", "suffix": "x"}, "suffix"),
        ({"prompt": "hi", "temprature": 1}, "temprature"),
    ],
    ids=lambda v: json.dumps(v) if isinstance(v, dict) else v,
)
def test_what_cannot_be_honoured_is_refused_by_name(body: dict[str, Any], param: str) -> None:
    assert refused(body).param == param


def test_best_of_equal_to_n_is_accepted() -> None:
    assert sampling({"prompt": "hi", "n": 2, "best_of": 2})["n"] == 2


def test_the_ft_penalty_refusal_does_not_apply_to_a_vllm_model() -> None:
    assert sampling({"prompt": "hi", "frequency_penalty": 1})["frequency_penalty"] == 1.0


def test_chat_is_rendered_by_the_models_own_template_as_transformers_renders_it() -> None:
    for case in golden("tiny-llama")["chats"]:
        # the tokenizer adds BOS itself: the template's own is dropped (transformers' ids show one BOS)
        assert chat_prompt(LLAMA, case["messages"]) == case["text"].removeprefix("<s>")


def test_a_developer_message_is_rendered_as_system() -> None:
    messages = [{"role": "developer", "content": "be brief"}, {"role": "user", "content": "hi"}]
    assert chat_prompt(LLAMA, messages) == "system: be brief\nuser: hi\nassistant:"


def test_a_tokenizer_that_adds_no_bos_keeps_the_templates() -> None:
    config = json.loads(TOKENIZER_CONFIG) | {"add_bos_token": False}
    model = ServedModel("llama", Family.LLAMA, True, 64, 256, 1, json.dumps(config))
    assert chat_prompt(model, [{"role": "user", "content": "hi"}]).startswith("<s>user: hi")


def test_chat_messages_are_still_held_against_openais_schemas() -> None:
    assert refused({"messages": [{"role": "tool", "content": "x"}]}, chat=True).param == "messages[0].role"


def test_chat_for_a_model_without_its_tokenizer_config_is_refused_naming_the_model() -> None:
    error = refused({"messages": [{"role": "user", "content": "hi"}]}, chat=True, model=PLAIN)
    assert error.param == "model"
    assert "tokenizer_config.json" in error.message


def inputs(request: Any) -> dict[str, bytes]:
    return {t.name: raw for t, raw in zip(request.inputs, request.raw_input_contents, strict=True)}


def test_the_request_is_nvidias_contract_with_the_prompt_excluded_and_the_counts_asked() -> None:
    req = vllm_request({"model": "llama", "prompt": "hi", "stream": True}, LLAMA)
    sent = inputs(infer_request(req, "hi"))
    assert set(sent) <= {t.name for t in INPUTS}
    assert sent["text_input"] == raw_value("BYTES", "hi")
    assert sent["sampling_parameters"] == raw_value("BYTES", req.sampling)
    for flag in ("stream", "exclude_input_in_output", "return_num_input_tokens", "return_num_output_tokens"):
        assert sent[flag] == raw_value("BOOL", True), flag
    assert "return_logprobs" not in sent


def test_a_unary_request_asks_vllm_for_one_final_answer_and_logprobs_when_wanted() -> None:
    req = vllm_request({"model": "llama", "prompt": "hi", "logprobs": 1}, LLAMA)
    sent = inputs(infer_request(req, "hi"))
    assert (sent["stream"], sent["return_logprobs"]) == (raw_value("BOOL", False), raw_value("BOOL", True))


def response(outputs: dict[str, tuple[str, list[Any]]]) -> Any:
    from tritonclient.grpc import service_pb2

    tensors, raws = [], []
    for name, (datatype, values) in outputs.items():
        tensors.append(service_pb2.ModelInferResponse.InferOutputTensor(name=name, datatype=datatype))
        raws.append(b"".join(raw_value(datatype, v) for v in values))
    return service_pb2.ModelInferResponse(outputs=tensors, raw_output_contents=raws)


STEP = {
    "7": {"logprob": -0.5, "rank": 2, "decoded_token": " b"},
    "5": {"logprob": -0.1, "rank": 1, "decoded_token": "a"},
}


def test_a_response_is_read_output_by_output() -> None:
    piece = read_piece(
        response(
            {
                "text_output": ("BYTES", ["x", "y"]),
                "finish_reason": ("BYTES", ["length", "None"]),
                "num_input_tokens": ("UINT32", [4]),
                "num_output_tokens": ("UINT32", [2, 1]),
                "logprobs": ("BYTES", [json.dumps([STEP]), "null"]),
            }
        )
    )
    assert piece == Piece(("x", "y"), ("length", "None"), 4, (2, 1), ((STEP,), ()))


def test_a_response_without_text_is_a_502() -> None:
    with pytest.raises(ApiError) as caught:
        read_piece(response({"num_input_tokens": ("UINT32", [4])}))
    assert caught.value.status == 502


def test_streamed_pieces_make_up_the_answer_and_the_engines_counts() -> None:
    pieces = [Piece(("He",), ("None",), 3, (1,)), Piece(("llo",), ("None",), 3, (2,)), Piece(("",), ("stop",), 3, (0,))]
    assert collect(pieces, 1) == Answer((Choice("Hello", "stop", 3),), 3)


def test_vllms_length_is_openais_length_and_everything_else_stop() -> None:
    answer = collect([Piece(("a", "b", "c"), ("length", "stop", "repetition"), 1, (1, 1, 1))], 3)
    assert [c.finish_reason for c in answer.choices] == ["length", "stop", "stop"]


def test_completion_logprobs_are_the_chosen_token_and_its_alternatives() -> None:
    req = vllm_request({"model": "llama", "prompt": "p", "logprobs": 1}, LLAMA)
    choice = Choice(" ba", "length", 2, (STEP, STEP))
    logprobs = completion_body("c", 0, req, [Answer((choice,), 1)])["choices"][0]["logprobs"]
    assert logprobs == {
        "tokens": [" b", " b"],
        "token_logprobs": [-0.5, -0.5],
        "top_logprobs": [{"a": -0.1, " b": -0.5}, {"a": -0.1, " b": -0.5}],
        "text_offset": [0, 2],
    }


def test_chat_top_logprobs_are_the_most_likely_best_first() -> None:
    req = vllm_request(
        {"model": "llama", "messages": [{"role": "user", "content": "hi"}], "logprobs": True, "top_logprobs": 2},
        LLAMA,
        chat=True,
    )
    content = chat_body("c", 0, req, Answer((Choice(" b", "stop", 1, (STEP,)),), 1))["choices"][0]["logprobs"]
    assert content["content"][0]["token"] == " b"
    assert [t["token"] for t in content["content"][0]["top_logprobs"]] == ["a", " b"]


def test_echo_puts_the_prompt_before_each_choice() -> None:
    req = vllm_request({"model": "llama", "prompt": ["p", "q"], "echo": True, "n": 2}, LLAMA)
    answers = [Answer((Choice("1", "stop", 1), Choice("2", "stop", 1)), 1)] * 2
    body = completion_body("c", 0, req, answers)
    assert [(c["index"], c["text"]) for c in body["choices"]] == [(0, "p1"), (1, "p2"), (2, "q1"), (3, "q2")]
    assert body["usage"] == {"prompt_tokens": 2, "completion_tokens": 4, "total_tokens": 6}


@pytest.mark.parametrize("logprobs", [None, 2])
def test_the_bodies_conform_to_openais_schemas(logprobs: int | None) -> None:
    extra = {} if logprobs is None else {"logprobs": logprobs}
    req = vllm_request({"model": "llama", "prompt": "p"} | extra, LLAMA)
    answer = Answer((Choice(" b", "length", 1, (STEP,)),), 1)
    assert violations(load().validator("CreateCompletionResponse"), completion_body("c", 0, req, [answer])) == []
    chat_extra = {} if logprobs is None else {"logprobs": True, "top_logprobs": logprobs}
    chat = vllm_request(
        {"model": "llama", "messages": [{"role": "user", "content": "hi"}]} | chat_extra, LLAMA, chat=True
    )
    assert violations(load().validator("CreateChatCompletionResponse"), chat_body("c", 0, chat, answer)) == []


def test_the_stream_chunks_of_a_vllm_answer_conform() -> None:
    chunks = Chunks("chatcmpl-1", 1, "llama", chat=True, include_usage=True)
    events = [*chunks.opening(), chunks.piece(0, "hi", None), chunks.piece(0, "", "stop")]
    validator = load().chunk_validator("CreateChatCompletionStreamResponse")
    assert [violations(validator, json.loads(e.removeprefix(b"data: "))) for e in events] == [[]] * 3


@pytest.mark.parametrize(
    ("message", "prompt"),
    [
        (  # vLLM 0.11's input processor (NVIDIA's r25.12 image) and later
            "Error generating stream: The decoder prompt (length 300) is longer than the maximum model length of "
            "256. Make sure that `max_model_len` is no smaller than the number of text tokens.",
            300,
        ),
        (  # a prompt of exactly the context: the answer's token does not fit
            "Error generating stream: The decoder prompt (length 256) plus the number of requested output tokens "
            "(at least 1) is longer than the maximum model length of 256. Make sure that ...",
            257,
        ),
        (  # vLLM 0.32's renderer
            "Error generating stream: This model's maximum context length is 256 tokens. However, your prompt "
            "contains at least 257 input tokens, which exceeds this limit even without any output tokens.",
            257,
        ),
        (  # vLLM 0.27's renderer (NVIDIA's r26.08 image: the deployed one), the prompt's tokens counted
            "Error generating stream: This model's maximum context length is 256 tokens. However, you requested 0 "
            "output tokens and your prompt contains at least 257 input tokens, for a total of at least 257 tokens. "
            "Please reduce the length of the input prompt or the number of requested output tokens. "
            "(parameter=input_tokens, value=257)",
            257,
        ),
        (  # vLLM 0.27's renderer, a text longer than the context's tokens can spell
            "Error generating stream: This model's maximum context length is 256 tokens. However, you requested 16 "
            "output tokens and your prompt contains 9000 characters (more than 4800 characters, which is the upper "
            "bound for 240 input tokens). Please reduce the length of the input prompt or the number of requested "
            "output tokens.",
            241,
        ),
    ],
    ids=["0.11", "exactly-the-context", "0.32-renderer", "0.27-renderer-tokens", "0.27-renderer-characters"],
)
def test_a_prompt_over_the_context_is_context_length_exceeded_in_openais_words(message: str, prompt: int) -> None:
    error = engine_error(message, 60)
    assert (error.status, error.param, error.code) == (400, "prompt", "context_length_exceeded")
    assert error.message.startswith(
        f"This model's maximum context length is 256 tokens. However, your request has {prompt} input tokens"
    )


@pytest.mark.parametrize(
    "message",
    ["Request for unknown model: 'late' is not found", "Request for unknown model: 'late' has no available versions"],
)
def test_a_model_triton_has_not_ready_is_a_503_with_retry_after(message: str) -> None:
    error = engine_error(message, 60)
    assert (error.status, error.code, error.retry_after_s) == (503, "model_not_ready", 30)
    assert message in error.message


def test_any_other_engine_error_keeps_vllms_words() -> None:
    error = engine_error("Error generating stream: boom", 60)
    assert error.status == 502
    assert "Error generating stream: boom" in error.message


def readme_vllm_table() -> dict[str, tuple[bool, str]]:
    lines = VLLM_PAGE.read_text(encoding="utf-8").splitlines()
    start = lines.index("| parameter | vLLM models | status |") + 2
    rows = {}
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        name, note, status = (cell.strip() for cell in line.strip("|").split(" | "))
        rows[name.strip("`")] = (status == "supported", note)
    return rows


def test_the_documented_vllm_table_is_the_gateways() -> None:
    assert readme_vllm_table() == {name: (v.supported, v.note) for name, v in VLLM_PARAMETERS.items()}


def test_every_vllm_verdict_is_a_row_of_the_table() -> None:
    assert set(VLLM_PARAMETERS) <= {p.name for p in PARAMETERS}


class FakeTriton:
    """Answers every stream with the given responses (what the vLLM backend sends for one request)."""

    def __init__(self, responses: list[Any]) -> None:
        self.responses = responses
        self.requests: list[Any] = []

    async def stream_responses(self, request: Any, deadline_s: float, error: Any) -> Any:
        self.requests.append(request)
        for item in self.responses:
            yield item


def streamed_events(body: dict[str, Any], responses: list[Any], *, chat: bool = False) -> list[dict[str, Any]]:
    import asyncio

    from tritonft.gateway.vllm import Engine, events

    usage = {"stream_options": {"include_usage": True}}
    req = vllm_request({"model": "llama", "stream": True} | usage | body, LLAMA, chat=chat)
    chunks = Chunks("c", 0, "llama", chat=chat, include_usage=True)

    async def run() -> list[dict[str, Any]]:
        engine = Engine(FakeTriton(responses), 60)  # type: ignore[arg-type]  # the stream is all events() uses
        return [json.loads(e.removeprefix(b"data: ")) async for e in events(engine, req, chunks)]

    return asyncio.run(run())


def step(texts: list[str], finish: list[str]) -> Any:
    return response(
        {
            "text_output": ("BYTES", texts),
            "finish_reason": ("BYTES", finish),
            "num_input_tokens": ("UINT32", [2]),
            "num_output_tokens": ("UINT32", [1] * len(texts)),
        }
    )


def test_a_stream_sends_each_piece_then_the_finish_then_the_engines_usage() -> None:
    answers = [step(["He"], ["None"]), step(["llo"], ["None"]), step([""], ["length"])]
    events = streamed_events({"prompt": "p", "echo": True}, answers)
    pieces = [(c["index"], c["text"], c["finish_reason"]) for e in events for c in e["choices"]]
    assert pieces == [(0, "pHe", None), (0, "llo", None), (0, "", "length")]
    assert events[-1] == events[-1] | {
        "choices": [],
        "usage": {"prompt_tokens": 2, "completion_tokens": 3, "total_tokens": 5},
    }


def test_nothing_is_streamed_before_the_models_first_response() -> None:
    import asyncio

    from tritonft.gateway.vllm import Engine, events

    class Refusing(FakeTriton):
        async def stream_responses(self, request: Any, deadline_s: float, error: Any) -> Any:
            self.requests.append(request)
            if self.requests:  # refused before any response, as Triton refuses a prompt over the context
                raise engine_error(
                    "Error generating stream: The decoder prompt (length 9) is longer than the maximum model length "
                    "of 8.",
                    60,
                )
            yield None

    req = vllm_request(
        {"model": "llama", "messages": [{"role": "user", "content": "hi"}], "stream": True},
        LLAMA,
        chat=True,
    )

    async def first() -> bytes:
        stream = events(Engine(Refusing([]), 60), req, Chunks("c", 0, "llama", chat=True))  # type: ignore[arg-type]
        return await stream.__anext__()

    with pytest.raises(ApiError) as caught:
        asyncio.run(first())
    assert caught.value.code == "context_length_exceeded"


def test_a_vllm_models_context_is_its_max_model_len_else_its_positions() -> None:
    from dataclasses import replace

    from tests.tritonft.engines.vllm.test_engine import LLAMA_8B

    assert ServedModel.from_spec(LLAMA_8B).context_len == 8192
    assert LLAMA_8B.vllm is not None
    unbounded = replace(LLAMA_8B, vllm=replace(LLAMA_8B.vllm, max_model_len=None))
    assert ServedModel.from_spec(unbounded).context_len == 131072


def test_a_fastertransformer_model_keeps_its_own_limits_and_has_no_context() -> None:
    from tests.components.fixtures import T5_SMALL

    served = ServedModel.from_spec(T5_SMALL)
    assert (served.context_len, served.max_output_len) == (0, T5_SMALL.max_output_len)


@pytest.mark.parametrize(
    ("reason", "status", "code"), [("abort", 503, "engine_aborted"), ("error", 500, "engine_error")]
)
def test_an_answer_the_engine_ended_is_an_error_not_a_stop(reason: str, status: int, code: str) -> None:
    with pytest.raises(ApiError) as caught:
        collect([Piece(("half an ans",), (reason,), 2, (3,))], 1)
    assert (caught.value.status, caught.value.code) == (status, code)
    assert f"vLLM's finish_reason: {reason}" in caught.value.message
