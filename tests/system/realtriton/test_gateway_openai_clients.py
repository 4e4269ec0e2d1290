"""The OpenAI gateway as the clients people use see it: LangChain (``OpenAI``, ``ChatOpenAI``), LiteLLM
(``completion``, ``text_completion``) and the ``openai`` SDK, against the real Triton serving the matrix repository
(FT step stood in for: a GPT answer echoes the prompt's tokens) and the golden GPT-2 with the reference engine
(for log-probabilities). Token counts are checked against the served tokenizer's own ids."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam
from pydantic import SecretStr

from tests.system.realtriton.golden import SERVED, TP, golden_cases, golden_spec, render_golden, words
from tests.system.realtriton.repos import MATRIX, matrix_spec
from tests.tolerances import LOGPROB_ATOL
from tests.tritonft.gateway.server import GatewayProcess
from tests.tritonft.gateway.server import started as _started
from tests.tritonft.reference.checkpoints import MAX_NEW_TOKENS
from tritonft.gateway.parameters import CHAT, COMPLETIONS, PARAMETERS
from tritonft.local_triton import LocalTriton, TritonRuntime
from tritonft.reference import GenerationRequest, build_model, generate, load_checkpoint
from tritonft.repo.naming import RepoNames
from tritonft.repo.tokenization import TextTokenizer, load_tokenizer
from tritonft.spec import Family
from tritonft.standin import received, set_behaviour

pytestmark = pytest.mark.slow

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # LiteLLM fetches its cost map at import otherwise

PROMPT = "hello world"
CHAT_MESSAGES: list[ChatCompletionMessageParam] = [
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": "hi there"},
]
CHAT_TEMPLATE = "System: be brief\nUser: hi there\nAssistant:"
CHAT_MAX_TOKENS = 2
"""The chat replies here stop after this many tokens: the stand-in echoes the template, which begins ``System:``."""


@pytest.fixture(scope="module")
def gateway(
    matrix_triton: LocalTriton, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[GatewayProcess]:
    with _started(
        GatewayProcess(matrix_triton.grpc_url, MATRIX, tmp_path_factory.mktemp("gateway")), request
    ) as running:
        yield running


@pytest.fixture(scope="module")
def base_url(gateway: GatewayProcess) -> str:
    return f"{gateway.url}/v1"


@pytest.fixture(scope="module")
def client(base_url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0, timeout=30)


@pytest.fixture(scope="module")
def gpt_tokenizer(tokenizers: dict[Family, Path]) -> TextTokenizer:
    return load_tokenizer(tokenizers[Family.GPT2])


def tokens(tokenizer: TextTokenizer, text: str) -> int:
    return len(tokenizer.encode(text, add_special_tokens=True))


def chat_reply(tokenizer: TextTokenizer) -> str:
    """What the stand-in answers the chat template in :data:`CHAT_MAX_TOKENS` tokens."""
    return tokenizer.decode(tokenizer.encode(CHAT_TEMPLATE, add_special_tokens=True)[:CHAT_MAX_TOKENS]).strip()


def echoed(tokenizer: TextTokenizer, prompt: str, max_tokens: int) -> int:
    """How many tokens the stand-in generates for ``prompt``: its tokens, up to ``max_tokens``."""
    return min(tokens(tokenizer, prompt), max_tokens)


# --- the openai SDK ---------------------------------------------------------------------------------------------


def test_a_completion_reports_usage_counted_from_the_tokenizers_ids(
    client: openai.OpenAI, gpt_tokenizer: TextTokenizer
) -> None:
    answer = client.completions.create(model="gpt2-tp1", prompt=PROMPT, max_tokens=16, temperature=0)
    assert answer.usage is not None
    assert answer.usage.prompt_tokens == tokens(gpt_tokenizer, PROMPT)
    assert answer.usage.completion_tokens == echoed(gpt_tokenizer, PROMPT, 16)
    assert answer.usage.total_tokens == answer.usage.prompt_tokens + answer.usage.completion_tokens


def test_a_completion_cut_by_max_tokens_counts_only_the_generated_tokens(
    client: openai.OpenAI, gpt_tokenizer: TextTokenizer
) -> None:
    prompt = "the quick brown fox jumps over the lazy dog"
    answer = client.completions.create(model="gpt2-tp2", prompt=prompt, max_tokens=3, temperature=0)
    assert answer.usage is not None
    assert (answer.usage.prompt_tokens, answer.usage.completion_tokens) == (tokens(gpt_tokenizer, prompt), 3)


def test_a_chat_answer_reports_usage(client: openai.OpenAI, gpt_tokenizer: TextTokenizer) -> None:
    answer = client.chat.completions.create(model="gpt2-tp1", messages=CHAT_MESSAGES, max_tokens=CHAT_MAX_TOKENS)
    assert answer.usage is not None
    assert answer.usage.prompt_tokens == tokens(gpt_tokenizer, CHAT_TEMPLATE)
    assert answer.usage.completion_tokens == CHAT_MAX_TOKENS


def test_a_list_of_prompts_counts_every_prompt_and_every_choice(
    client: openai.OpenAI, gpt_tokenizer: TextTokenizer
) -> None:
    prompts = ["hello world", "once upon a time"]
    answer = client.completions.create(model="gptj-tp1", prompt=prompts, max_tokens=16, temperature=0)
    assert answer.usage is not None
    assert answer.usage.prompt_tokens == sum(tokens(gpt_tokenizer, p) for p in prompts)
    assert answer.usage.completion_tokens == sum(echoed(gpt_tokenizer, p, 16) for p in prompts)


def test_t5_counts_its_appended_end_token_as_a_prompt_token(
    client: openai.OpenAI, tokenizers: dict[Family, Path]
) -> None:
    t5 = load_tokenizer(tokenizers[Family.T5])
    answer = client.completions.create(model="t5-tp1", prompt=PROMPT, max_tokens=16, temperature=0)
    assert answer.usage is not None
    assert answer.usage.prompt_tokens == len(t5.encode(PROMPT, add_special_tokens=True)) + 1


@pytest.mark.parametrize("model", ["gpt2-stream", "gpt2-tp1"])
def test_a_stream_that_asks_for_usage_ends_with_a_usage_chunk(
    client: openai.OpenAI, gpt_tokenizer: TextTokenizer, model: str
) -> None:
    stream = client.completions.create(
        model=model, prompt=PROMPT, max_tokens=16, temperature=0, stream=True, stream_options={"include_usage": True}
    )
    chunks = list(stream)
    last = chunks[-1]
    assert last.choices == []
    assert last.usage is not None
    assert (last.usage.prompt_tokens, last.usage.completion_tokens) == (
        tokens(gpt_tokenizer, PROMPT),
        echoed(gpt_tokenizer, PROMPT, 16),
    )
    assert all(chunk.usage is None for chunk in chunks[:-1])
    assert "".join(c.choices[0].text for c in chunks[:-1]) == PROMPT


def test_a_streaming_models_unstreamed_answer_reports_usage(
    client: openai.OpenAI, gpt_tokenizer: TextTokenizer
) -> None:
    answer = client.completions.create(model="gpt2-stream", prompt=PROMPT, max_tokens=16, temperature=0)
    assert answer.choices[0].text == PROMPT
    assert answer.usage is not None
    assert (answer.usage.prompt_tokens, answer.usage.completion_tokens) == (
        tokens(gpt_tokenizer, PROMPT),
        echoed(gpt_tokenizer, PROMPT, 16),
    )


def test_n_greedy_choices_are_indexed_and_counted(client: openai.OpenAI, gpt_tokenizer: TextTokenizer) -> None:
    answer = client.completions.create(
        model="gpt2-tp1", prompt=["hello world", "once"], max_tokens=16, n=3, temperature=0
    )
    assert [(c.index, c.text) for c in answer.choices] == [(i, "hello world") for i in range(3)] + [
        (3 + i, "once") for i in range(3)
    ]
    assert answer.usage is not None
    assert answer.usage.completion_tokens == 3 * (
        echoed(gpt_tokenizer, "hello world", 16) + echoed(gpt_tokenizer, "once", 16)
    )


def test_n_sampled_choices_are_rows_seeded_one_apart(client: openai.OpenAI, matrix_repository: Path) -> None:
    ft = matrix_repository / RepoNames.of(next(s for s in MATRIX if s.name == "gptj-tp2")).ft
    set_behaviour(ft, record=True)
    try:
        answer = client.completions.create(model="gptj-tp2", prompt=PROMPT, max_tokens=4, n=3, seed=40, temperature=0.8)
    finally:
        set_behaviour(ft)
    assert [c.index for c in answer.choices] == [0, 1, 2]
    seeds = sorted(r["random_seed"][2][0] for r in received(ft) if "random_seed" in r)
    assert seeds[-3:] == [40, 41, 42]


def test_n_over_the_batch_limit_is_a_400_naming_the_limit(client: openai.OpenAI) -> None:
    limit = matrix_spec("gpt2-tp1").batching.max_batch_size
    with pytest.raises(openai.BadRequestError) as caught:
        client.completions.create(model="gpt2-tp1", prompt=["a", "b"], n=limit // 2 + 1, max_tokens=4)
    assert caught.value.param == "n"
    assert f"max_batch_size is {limit}" in caught.value.message


def test_best_of_with_greedy_decoding_is_beam_search_returning_n_beams(
    client: openai.OpenAI, matrix_repository: Path
) -> None:
    ft = matrix_repository / RepoNames.of(next(s for s in MATRIX if s.name == "gpt2-tp2")).ft
    set_behaviour(ft, record=True)
    try:
        answer = client.completions.create(model="gpt2-tp2", prompt=PROMPT, max_tokens=8, n=2, best_of=3, temperature=0)
    finally:
        set_behaviour(ft)
    assert [c.index for c in answer.choices] == [0, 1]
    assert [r["beam_width"][2] for r in received(ft) if "beam_width" in r][-1] == [3]


def test_echo_puts_the_prompt_before_the_completion(client: openai.OpenAI) -> None:
    answer = client.completions.create(model="gpt2-tp1", prompt=PROMPT, max_tokens=16, temperature=0, echo=True)
    assert answer.choices[0].text == PROMPT + PROMPT
    streamed = client.completions.create(model="gpt2-stream", prompt=PROMPT, max_tokens=16, echo=True, stream=True)
    assert "".join(c.choices[0].text for c in streamed) == PROMPT + PROMPT


REFUSED = {
    "presence_penalty": 0.5,
    "frequency_penalty": 1.0,
    "logit_bias": {"50": 5},
    "suffix": "end",
    "response_format": {"type": "json_object"},
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
    "tool_choice": "auto",
    "functions": [{"name": "f", "parameters": {}}],
    "function_call": "auto",
    "modalities": ["text", "audio"],
    "audio": {"voice": "alloy", "format": "wav"},
    "prediction": {"type": "content", "content": "x"},
    "reasoning_effort": "low",
    "web_search_options": {},
    "service_tier": "flex",
    "store": True,
    "metadata": {"k": "v"},
    "verbosity": "low",
    "moderation": {"model": "omni-moderation-latest"},
    "prompt_cache_options": {"ttl": "30m"},
    "prompt_cache_retention": "24h",
}


def test_every_refused_parameter_has_a_refused_value_here() -> None:
    assert set(REFUSED) | {"parallel_tool_calls"} == {p.name for p in PARAMETERS if not p.supported}


@pytest.mark.parametrize("parameter", [p for p in PARAMETERS if not p.supported and p.name in REFUSED], ids=str)
def test_a_refused_parameter_is_a_400_naming_it_and_the_gateway_keeps_serving(
    client: openai.OpenAI, parameter: Any
) -> None:
    value = REFUSED[parameter.name]
    with pytest.raises(openai.BadRequestError) as caught:
        if COMPLETIONS in parameter.routes:
            client.completions.create(model="gpt2-tp1", prompt=PROMPT, extra_body={parameter.name: value})
        else:
            client.chat.completions.create(
                model="gpt2-tp1",
                messages=CHAT_MESSAGES,
                extra_body={parameter.name: value},
            )
    assert caught.value.param == parameter.name
    assert parameter.name in caught.value.message
    assert client.completions.create(model="gpt2-tp1", prompt=PROMPT, max_tokens=4).choices[0].text


def test_an_unknown_parameter_is_a_400_naming_it(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.completions.create(model="gpt2-tp1", prompt=PROMPT, extra_body={"top_k": 5})
    assert caught.value.param == "top_k"
    assert caught.value.code == "unknown_parameter"


@pytest.mark.parametrize(
    ("route", "extra", "param"),
    [
        (COMPLETIONS, {"logprobs": 2}, "logprobs"),
        (CHAT, {"logprobs": True, "top_logprobs": 3}, "top_logprobs"),
        (COMPLETIONS, {"logprobs": 0, "stream": True}, "logprobs"),
        (COMPLETIONS, {"logprobs": 0, "echo": True}, "echo"),
        (COMPLETIONS, {"best_of": 2, "n": 3}, "best_of"),
    ],
)
def test_what_ft_cannot_give_is_a_400_saying_why(
    client: openai.OpenAI, route: str, extra: dict[str, Any], param: str
) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        if route == COMPLETIONS:
            client.completions.create(model="gpt2-tp1", prompt=PROMPT, extra_body=extra)
        else:
            client.chat.completions.create(model="gpt2-tp1", messages=CHAT_MESSAGES, extra_body=extra)
    assert caught.value.param == param


# --- LangChain ----------------------------------------------------------------------------------------------------


def test_langchain_openai_invokes_and_reads_the_token_usage(base_url: str, gpt_tokenizer: TextTokenizer) -> None:
    from langchain_openai import OpenAI

    llm = OpenAI(
        base_url=base_url, api_key=SecretStr("unused"), model="gpt2-tp1", max_tokens=16, temperature=0, max_retries=0
    )
    assert llm.invoke(PROMPT) == PROMPT
    result = llm.generate([PROMPT])
    assert result.llm_output is not None
    usage = result.llm_output["token_usage"]
    assert usage["prompt_tokens"] == tokens(gpt_tokenizer, PROMPT)
    assert usage["completion_tokens"] == echoed(gpt_tokenizer, PROMPT, 16)


def test_langchain_openai_streams(base_url: str) -> None:
    from langchain_openai import OpenAI

    llm = OpenAI(
        base_url=base_url, api_key=SecretStr("unused"), model="gpt2-stream", max_tokens=16, temperature=0, max_retries=0
    )
    pieces = list(llm.stream(PROMPT))
    assert len([p for p in pieces if p]) > 1
    assert "".join(pieces) == PROMPT


@pytest.mark.parametrize("streaming", [False, True], ids=["invoke", "stream"])
def test_langchain_chat_openai_answers_with_usage_metadata(
    base_url: str, gpt_tokenizer: TextTokenizer, streaming: bool
) -> None:
    from langchain_core.messages import BaseMessageChunk, HumanMessage, SystemMessage
    from langchain_openai import ChatOpenAI

    chat = ChatOpenAI(
        base_url=base_url,
        api_key=SecretStr("unused"),
        model="gpt2-stream" if streaming else "gpt2-tp1",
        max_tokens=CHAT_MAX_TOKENS,  # type: ignore[call-arg]
        temperature=0,
        max_retries=0,
        stream_usage=True,
    )
    messages = [SystemMessage("be brief"), HumanMessage("hi there")]
    if streaming:
        chunks = list(chat.stream(messages))
        assert len(chunks) > 1
        message: Any = chunks[0]
        for chunk in chunks[1:]:
            message = message + chunk
        assert isinstance(message, BaseMessageChunk)
    else:
        message = chat.invoke(messages)
    assert message.content == chat_reply(gpt_tokenizer)
    assert message.usage_metadata is not None
    assert message.usage_metadata["input_tokens"] == tokens(gpt_tokenizer, CHAT_TEMPLATE)
    assert message.usage_metadata["output_tokens"] == CHAT_MAX_TOKENS


def test_langchain_chat_openai_content_parts_are_answered_as_the_same_text(
    base_url: str, gpt_tokenizer: TextTokenizer
) -> None:
    from langchain_core.messages import HumanMessage, SystemMessage
    from langchain_openai import ChatOpenAI

    chat = ChatOpenAI(
        base_url=base_url,
        api_key=SecretStr("unused"),
        model="gpt2-tp1",
        max_tokens=CHAT_MAX_TOKENS,  # type: ignore[call-arg]
        temperature=0,
        max_retries=0,
    )
    parts = [
        SystemMessage([{"type": "text", "text": "be brief"}]),
        HumanMessage([{"type": "text", "text": "hi there"}]),
    ]
    sent = chat._get_request_payload(parts)["messages"]  # LangChain sends each as a list of text parts
    assert [m["content"] for m in sent] == [
        [{"type": "text", "text": "be brief"}],
        [{"type": "text", "text": "hi there"}],
    ]
    assert chat.invoke(parts).content == chat_reply(gpt_tokenizer)


def test_langchain_chat_openai_image_part_is_a_400_naming_the_part(base_url: str) -> None:
    from langchain_core.messages import HumanMessage
    from langchain_openai import ChatOpenAI

    chat = ChatOpenAI(base_url=base_url, api_key=SecretStr("unused"), model="gpt2-tp1", max_retries=0)
    image = {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}
    with pytest.raises(openai.BadRequestError) as caught:
        chat.invoke([HumanMessage([{"type": "text", "text": "what is this?"}, image])])
    assert caught.value.param == "messages[0].content[1].type"
    assert "text only" in caught.value.message


# --- LiteLLM ------------------------------------------------------------------------------------------------------


OFFLINE_LITELLM = """
import json, socket, sys
attempts = []
LOCAL = {"127.0.0.1", "::1", "localhost"}
real_getaddrinfo, real_connect = socket.getaddrinfo, socket.socket.connect
def getaddrinfo(host, *args, **kwargs):
    if host is not None and host not in LOCAL:
        attempts.append(str(host))
        raise OSError("offline")
    return real_getaddrinfo(host, *args, **kwargs)
def connect(self, address):
    if isinstance(address, tuple) and address[0] not in LOCAL:
        attempts.append(str(address[0]))
        raise OSError("offline")
    return real_connect(self, address)
socket.getaddrinfo, socket.socket.connect = getaddrinfo, connect
import litellm
answer = litellm.text_completion(
    model="text-completion-openai/gpt2-tp1", api_base=sys.argv[1], api_key="unused", prompt="hello world",
    max_tokens=16, temperature=0,
)
print(json.dumps({"attempts": attempts, "text": answer.choices[0].text, "costs": len(litellm.model_cost)}))
"""
"""LiteLLM imported and called with every name lookup and connection off loopback refused and recorded."""


def test_litellm_imports_and_answers_without_leaving_the_machine(base_url: str) -> None:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    done = subprocess.run(
        [sys.executable, "-c", OFFLINE_LITELLM, base_url],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["attempts"] == []
    assert report["text"] == PROMPT
    assert report["costs"] > 0  # the cost map bundled with the package


def test_litellm_completion_answers_a_chat_with_usage(base_url: str, gpt_tokenizer: TextTokenizer) -> None:
    import litellm

    answer: Any = litellm.completion(
        model="openai/gpt2-tp1",
        api_base=base_url,
        api_key="unused",
        messages=CHAT_MESSAGES,
        max_tokens=CHAT_MAX_TOKENS,
        temperature=0,
    )
    assert answer.choices[0].message.content == chat_reply(gpt_tokenizer)
    assert answer.usage.prompt_tokens == tokens(gpt_tokenizer, CHAT_TEMPLATE)
    assert answer.usage.completion_tokens == CHAT_MAX_TOKENS


def test_litellm_text_completion_answers_with_usage(base_url: str, gpt_tokenizer: TextTokenizer) -> None:
    import litellm

    answer: Any = litellm.text_completion(
        model="text-completion-openai/gpt2-tp2",
        api_base=base_url,
        api_key="unused",
        prompt=PROMPT,
        max_tokens=16,
        temperature=0,
    )
    assert answer.choices[0].text == PROMPT
    assert answer.usage.prompt_tokens == tokens(gpt_tokenizer, PROMPT)
    assert answer.usage.completion_tokens == echoed(gpt_tokenizer, PROMPT, 16)


# --- log-probabilities: the reference engine's own values ----------------------------------------------------------


@pytest.fixture(scope="module")
def golden_gateway(
    serve_triton: Callable[..., LocalTriton],
    newest_runtime: TritonRuntime,
    converted: Callable[..., Path],
    tmp_path_factory: pytest.TempPathFactory,
    request: pytest.FixtureRequest,
) -> Iterator[GatewayProcess]:
    out, scratch = tmp_path_factory.mktemp("golden-gpt2-repo"), tmp_path_factory.mktemp("golden-gpt2-scratch")
    spec = render_golden("gpt2", converted("gpt2", TP), out, scratch)
    server = serve_triton(out, runtime=newest_runtime)  # the reference engine is Python 3.10 code: 2.51.0's stub
    with _started(GatewayProcess(server.grpc_url, [spec], tmp_path_factory.mktemp("golden-gateway")), request) as gw:
        yield gw


def test_logprobs_are_the_reference_engines_log_probabilities_of_the_chosen_tokens(
    golden_gateway: GatewayProcess, converted: Callable[..., Path]
) -> None:
    assert "gpt2" in SERVED
    case = next(c for c in golden_cases("gpt2") if c.beam_width == 1)
    model = build_model(load_checkpoint(converted("gpt2", TP)))
    result = generate(model, [GenerationRequest(case.prompt_ids, MAX_NEW_TOKENS)])
    generated = [t for t in result.generated[0][0] if t != model.end_id]
    expected = [float(v) for v in result.output_log_probs[0, 0, : len(generated)]]
    peer = openai.OpenAI(base_url=f"{golden_gateway.url}/v1", api_key="unused", max_retries=0, timeout=60)
    name = golden_spec("gpt2").name

    answer = peer.completions.create(
        model=name, prompt=case.prompt, max_tokens=MAX_NEW_TOKENS, temperature=0, logprobs=0
    )

    choice = answer.choices[0]
    assert choice.text == case.answers[0]
    assert choice.logprobs is not None
    # Served from the stub's numpy build, expected from this process's: equal to the kernels' last bits only.
    assert choice.logprobs.token_logprobs == pytest.approx(expected, rel=0, abs=LOGPROB_ATOL)
    assert "".join(choice.logprobs.tokens or []) == choice.text
    pieces = choice.logprobs.tokens or []
    assert choice.logprobs.text_offset == [sum(len(p) for p in pieces[:i]) for i in range(len(pieces))]
    top = choice.logprobs.top_logprobs or []
    assert [list(entry) for entry in top] == [[piece] for piece in pieces]
    assert [entry[piece] for entry, piece in zip(top, pieces, strict=True)] == pytest.approx(
        expected, rel=0, abs=LOGPROB_ATOL
    )


def test_chat_logprobs_list_each_token_of_the_reply(client: openai.OpenAI) -> None:
    answer = client.chat.completions.create(
        model="gpt2-tp1",
        messages=CHAT_MESSAGES,
        max_tokens=CHAT_MAX_TOKENS,
        temperature=0,
        logprobs=True,
    )
    choice = answer.choices[0]
    assert choice.logprobs is not None and choice.logprobs.content is not None
    entries = choice.logprobs.content
    assert "".join(e.token for e in entries) == choice.message.content
    assert [e.logprob for e in entries] == [0.0] * len(entries)  # the stand-in's log-probabilities
    assert all(e.top_logprobs == [] and e.bytes == list(e.token.encode()) for e in entries)


def test_sampled_best_of_returns_the_candidate_with_the_highest_mean_log_probability(
    golden_gateway: GatewayProcess, converted: Callable[..., Path]
) -> None:
    case = next(c for c in golden_cases("gpt2") if c.beam_width == 1)
    model = build_model(load_checkpoint(converted("gpt2", TP)))
    candidates = []
    for seed in (7, 8, 9):
        drawn = generate(
            model,
            [GenerationRequest(case.prompt_ids, MAX_NEW_TOKENS, top_p=1.0, temperature=1.0, random_seed=seed)],
        )
        tokens = [t for t in drawn.generated[0][0] if t != model.end_id]
        log_probs = [float(v) for v in drawn.output_log_probs[0, 0, : len(tokens)]]
        candidates.append((sum(log_probs) / max(len(log_probs), 1), words(tokens)))
    assert len({text for _, text in candidates}) > 1, "the seeds drew the same text: nothing to rank"
    peer = openai.OpenAI(base_url=f"{golden_gateway.url}/v1", api_key="unused", max_retries=0, timeout=60)

    answer = peer.completions.create(
        model=golden_spec("gpt2").name,
        prompt=case.prompt,
        max_tokens=MAX_NEW_TOKENS,
        temperature=1.0,
        seed=7,
        best_of=3,
    )

    assert [c.text for c in answer.choices] == [max(candidates)[1]]
