"""OpenAI completions and chat for a model served by Triton's vLLM backend (``family: llama``).

The request is NVIDIA's contract (:mod:`tritonft.engines.vllm.contract`, cited there from ``vllm_backend``): one
``ModelStreamInfer`` call per prompt (the model is decoupled: Triton refuses ``ModelInfer``) with ``text_input``,
``stream``, ``sampling_parameters`` (vLLM's ``SamplingParams`` fields as JSON), ``exclude_input_in_output: true`` and
the ``return_finish_reason`` / ``return_num_input_tokens`` / ``return_num_output_tokens`` (and, when asked,
``return_logprobs``) flags. vLLM decides what the FT path decides in the gateway: ``n`` choices come from one
request, ``stop`` phrases end the answer inside vLLM (its ``finish_reason``), and ``usage`` is the engine's own
token counts (``num_input_tokens``, the sum of the ``num_output_tokens`` of every response).

Chat: the messages (held against OpenAI's schemas by :func:`tritonft.gateway.messages.turns`) are rendered by the
model's own chat template, as transformers' ``apply_chat_template`` renders them (:mod:`tritonft.engines.vllm.chat`;
content parts are passed to the template as they came, ``developer`` as ``system``), the BOS the template writes
dropped when the tokenizer adds it (it would be there twice).

Everything here but :func:`answers` and :func:`events` is pure.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import AsyncGenerator, Callable, Mapping
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

from tritonft.gateway.config import MAX_BEAMS, ServedModel
from tritonft.gateway.errors import ApiError, bad_parameter, from_triton
from tritonft.gateway.mapping import DEFAULT_MAX_TOKENS, _include_usage, _integer, _number, _prompts, _stop
from tritonft.gateway.messages import SERVED_ROLES, turns
from tritonft.gateway.parameters import CHAT, COMPLETIONS, VLLM_PARAMETERS, checked_body
from tritonft.gateway.streaming import Chunks
from tritonft.gateway.triton import Triton, _numbers, _output, _strings, raw_value

MAX_LOGPROBS = 5
"""Completions' ``logprobs``: OpenAI's upper bound."""
MAX_TOP_LOGPROBS = 20
"""Chat's ``top_logprobs``: OpenAI's upper bound."""
LOADING_RETRY_AFTER_S = 30
"""``Retry-After`` for a model Triton has not (yet) got ready: a vLLM engine builds in seconds to minutes."""


@dataclass(frozen=True)
class VllmRequest:
    """What to send to the vLLM model for one OpenAI request: one call per prompt, same parameters."""

    model: ServedModel
    prompts: tuple[str, ...]
    sampling: str
    """``sampling_parameters``: vLLM's ``SamplingParams`` fields as JSON."""
    n: int
    stream: bool
    echo: bool = False
    logprobs: int | None = None
    """Asked for: the alternatives per token (0: the chosen token alone); ``None``: not asked."""
    include_usage: bool = False
    greedy: bool = False
    """``temperature: 0``: vLLM refuses ``n`` > 1 then ("n must be 1 when using greedy sampling"), so it is asked one
    completion and the ``n`` choices are copies of it (greedy decoding is deterministic)."""

    @property
    def engine_n(self) -> int:
        """The completions vLLM is asked for."""
        return 1 if self.greedy else self.n


@dataclass(frozen=True)
class Piece:
    """One response of the vLLM model: per completion its new text, finish reason (``"None"`` until it finished)
    and new token count and, when asked, its new tokens' log-probabilities (vLLM's per-step dicts, the chosen token
    first); the prompt's token count."""

    texts: tuple[str, ...]
    finish: tuple[str, ...] = ()
    input_tokens: int | None = None
    output_tokens: tuple[int, ...] = ()
    logprobs: tuple[tuple[dict[str, Any], ...], ...] = ()


@dataclass(frozen=True)
class Choice:
    text: str
    finish_reason: str
    tokens: int
    steps: tuple[dict[str, Any], ...] = ()
    """Each generated token's log-probabilities: ``{token id: {logprob, rank, decoded_token}}``, chosen first."""


@dataclass(frozen=True)
class Answer:
    """The answer to one prompt: its ``n`` choices and the prompt's token count."""

    choices: tuple[Choice, ...]
    prompt_tokens: int


def max_tokens(body: Mapping[str, Any], model: ServedModel, *, chat: bool) -> int:
    """``max_tokens`` (or chat's ``max_completion_tokens``: they must agree when both are sent) for a vLLM model: 1
    to the model's context, which prompt and answer share; OpenAI's default where neither is sent: chat the rest of
    the context, completions 16.

    The gateway does not tokenize the prompt, so it cannot subtract it: it asks vLLM for up to the whole context,
    and vLLM ends every sequence at ``max_model_len`` (its scheduler's ``check_stop``, ``finish_reason: length``),
    so an answer gets what the prompt leaves of the context, never more. NVIDIA's backend cannot be asked for "no
    limit": it drops a ``null`` field, and vLLM's ``SamplingParams`` default is 16."""
    context = model.context_len
    limit = f" (the model's context is {context} tokens, prompt and answer together: vllm.maxModelLen)"
    default = context if chat else min(DEFAULT_MAX_TOKENS, context)
    values = {
        key: _integer(dict(body), key, default, 1, context, why=limit)
        for key in ("max_tokens", "max_completion_tokens")
        if key in body
    }
    if len(set(values.values())) > 1:
        raise bad_parameter("max_completion_tokens", "max_tokens and max_completion_tokens differ; send one of them")
    return next(iter(values.values()), default)


def sampling_parameters(
    body: Mapping[str, Any], model: ServedModel, n: int, logprobs: int | None, *, chat: bool = False
) -> dict[str, Any]:
    """vLLM's ``SamplingParams`` fields for a checked body (OpenAI's defaults where nothing is sent)."""
    temperature = _number(dict(body), "temperature", 1.0, 0.0, 2.0)
    out: dict[str, Any] = {
        "max_tokens": max_tokens(body, model, chat=chat),
        "temperature": temperature,
        "n": 1 if temperature == 0.0 else n,
    }
    top_p = _number(dict(body), "top_p", 1.0, 0.0, 1.0)
    if top_p == 0.0:
        raise bad_parameter("top_p", "top_p must be above 0 (vLLM samples from a nucleus of at least one token)")
    if "top_p" in body:
        out["top_p"] = top_p
    for key in ("presence_penalty", "frequency_penalty"):
        if key in body:
            out[key] = _number(dict(body), key, 0.0, -2.0, 2.0)
    stop = _stop(dict(body))
    if stop:
        out["stop"] = list(stop)
    if "seed" in body:
        out["seed"] = _integer(dict(body), "seed", 0, 0, 2**63 - 1)
    if logprobs is not None:
        out["logprobs"] = logprobs
    return out


def _logprobs(body: Mapping[str, Any], chat: bool) -> int | None:
    if chat:
        asked = body.get("logprobs", False)
        if not isinstance(asked, bool):
            raise bad_parameter("logprobs", "logprobs must be true or false")
        top = _integer(dict(body), "top_logprobs", 0, 0, MAX_TOP_LOGPROBS)
        if top and not asked:
            raise bad_parameter("top_logprobs", "top_logprobs needs logprobs: true")
        return top if asked else None
    if "logprobs" not in body:
        return None
    return _integer(dict(body), "logprobs", 0, 0, MAX_LOGPROBS)


def chat_messages(messages: Any) -> list[dict[str, Any]]:
    """The messages as the chat template gets them: checked against OpenAI's schemas, ``developer`` as ``system``,
    the content (a string or its text parts) as sent, ``null`` fields left out."""
    turns(messages)  # a 400 naming the first field or part that cannot be honoured
    return [{"role": SERVED_ROLES[m["role"]], "content": m["content"]} for m in messages]


def chat_prompt(model: ServedModel, messages: Any) -> str:
    """The conversation as the model's own template writes it, for a tokenizer that adds BOS itself when its
    configuration says so (``add_bos_token``, default true)."""
    from tritonft.engines.vllm import chat

    config = json.loads(model.tokenizer_config)
    try:
        return chat.engine_prompt(config, chat_messages(messages))
    except chat.ChatTemplateError as exc:
        raise bad_parameter("messages", str(exc)) from exc


def vllm_request(body: Any, model: ServedModel, *, chat: bool = False) -> VllmRequest:
    """Validate an OpenAI completions (or chat completions) body for a vLLM ``model``; :class:`ApiError` names the
    field and the fix."""
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object")
    body = checked_body(body, CHAT if chat else COMPLETIONS, VLLM_PARAMETERS)
    if chat and not model.chat:
        raise bad_parameter(
            "model",
            f"model {model.name!r} has no chat template here (the gateway was given no tokenizer_config.json for "
            "it); use /v1/completions",
        )
    prompts = (chat_prompt(model, body.get("messages")),) if chat else _prompts(body)
    if any(not p for p in prompts):
        raise bad_parameter("prompt", "prompt must not be empty: send the text the model continues")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise bad_parameter("stream", "stream must be true or false")
    include_usage = _include_usage(body, stream)
    n = _integer(body, "n", 1, 1, MAX_BEAMS, why=f" (at most {MAX_BEAMS} choices)")
    if "best_of" in body and _integer(body, "best_of", n, 1, MAX_BEAMS) != n:
        raise bad_parameter("best_of", f"best_of must equal n ({n}) for this model: {VLLM_PARAMETERS['best_of'].note}")
    if n > 1 and stream:
        raise bad_parameter(
            "n",
            "n > 1 cannot be streamed for this model: NVIDIA's vLLM backend streams each completion's text without "
            "its index; send stream: false or n: 1",
        )
    echo = body.get("echo", False)
    if not isinstance(echo, bool):
        raise bad_parameter("echo", "echo must be true or false")
    logprobs = _logprobs(body, chat)
    if logprobs is not None and stream:
        raise bad_parameter("logprobs", "logprobs are served on unstreamed requests only; send stream: false")
    if echo and logprobs is not None:
        raise bad_parameter("echo", "echo with logprobs needs the prompt tokens' log-probabilities; send one of them")
    parameters = sampling_parameters(body, model, n, logprobs, chat=chat)
    sampling = json.dumps(parameters, separators=(",", ":"))
    greedy = parameters["temperature"] == 0.0
    return VllmRequest(model, prompts, sampling, n, stream, echo, logprobs, include_usage, greedy)


def infer_request(request: VllmRequest, prompt: str) -> Any:
    """The ``ModelInferRequest`` of ``prompt``: NVIDIA's inputs, each ``[1]`` (the model's ``max_batch_size`` is
    0)."""
    from tritonclient.grpc import service_pb2

    values: list[tuple[str, str, bytes]] = [
        ("text_input", "BYTES", raw_value("BYTES", prompt)),
        ("stream", "BOOL", raw_value("BOOL", request.stream)),
        ("sampling_parameters", "BYTES", raw_value("BYTES", request.sampling)),
        ("exclude_input_in_output", "BOOL", raw_value("BOOL", True)),
        ("return_finish_reason", "BOOL", raw_value("BOOL", True)),
        ("return_num_input_tokens", "BOOL", raw_value("BOOL", True)),
        ("return_num_output_tokens", "BOOL", raw_value("BOOL", True)),
    ]
    if request.logprobs is not None:
        values.append(("return_logprobs", "BOOL", raw_value("BOOL", True)))
    tensor = service_pb2.ModelInferRequest.InferInputTensor
    return service_pb2.ModelInferRequest(
        model_name=request.model.name,
        inputs=[tensor(name=name, datatype=datatype, shape=(1,)) for name, datatype, _ in values],
        raw_input_contents=[raw for _, _, raw in values],
    )


def read_piece(response: Any) -> Piece:
    """A ``ModelInferResponse`` of the vLLM model as a :class:`Piece` (an output it lacks: empty)."""
    found = _output(response, "text_output")
    if found is None:
        raise ApiError(502, "the model's answer has no text_output output", "server_error")
    texts = tuple(_strings(found))
    finish = _output(response, "finish_reason")
    inputs = _output(response, "num_input_tokens")
    outputs = _output(response, "num_output_tokens")
    logprobs = _output(response, "logprobs")
    return Piece(
        texts,
        tuple(_strings(finish)) if finish is not None else (),
        int(_numbers(inputs)[0]) if inputs is not None else None,
        tuple(int(v) for v in _numbers(outputs)) if outputs is not None else (),
        tuple(tuple(json.loads(raw) or ()) for raw in _strings(logprobs)) if logprobs is not None else (),
    )


ENDED_BY_ENGINE = {
    "abort": (503, "engine_aborted", "the engine aborted the answer before it finished"),
    "error": (500, "engine_error", "the engine failed the request (a retryable request-level error)"),
}
"""vLLM's ``finish_reason`` of a request its engine ended before the answer did (``vllm/v1/engine/__init__.py``
``FinishReason``: ``ABORT``, aborted by the server, e.g. an engine shutting down; ``ERROR``, which vLLM's own
server always answers 500). OpenAI's ``finish_reason`` has no such value, and ``stop`` would claim a finished
answer: the client gets an error (an error event when streaming)."""


def finish_reason(vllm_reason: str) -> str:
    """OpenAI's ``finish_reason`` for vLLM's: ``length`` when ``max_tokens`` (or the context) ran out, ``stop`` for a
    stop phrase, the end-of-sequence token (or vLLM's own ``repetition`` stop); an answer the engine ended
    (:data:`ENDED_BY_ENGINE`) is an error, never ``stop``."""
    ended = ENDED_BY_ENGINE.get(vllm_reason)
    if ended is not None:
        status, code, what = ended
        raise ApiError(
            status,
            f"{what} (vLLM's finish_reason: {vllm_reason}); the text so far is not a whole answer, retry the request",
            "server_error",
            None,
            code,
        )
    return "length" if vllm_reason == "length" else "stop"


OVER_CONTEXT = (
    re.compile(
        r"The decoder prompt \(length (?P<prompt>\d+)\)(?P<plus> plus the number of requested output tokens)?"
        r".*? longer than the maximum model length of (?P<context>\d+)"
    ),
    re.compile(
        r"This model's maximum context length is (?P<context>\d+) tokens\. However, "
        r"(?:you requested \d+ output tokens and )?your prompt contains (?:at least )?(?P<prompt>\d+) input tokens"
    ),
    re.compile(
        r"This model's maximum context length is (?P<context>\d+) tokens\. However, you requested \d+ output tokens "
        r"and your prompt contains \d+ characters \(more than \d+ characters, which is the upper bound for "
        r"(?P<bound>\d+) input tokens\)"
    ),
)
"""vLLM's words for a prompt the context cannot hold: its input processor's (``vllm/v1/engine/processor.py`` in
0.11, ``input_processor.py`` since; a prompt of exactly the context "plus the number of requested output tokens
(at least 1)") and its renderers' ("This model's maximum context length is ...": 0.27's ``renderers/params.py:
353-362`` (a text longer than the characters ``bound`` tokens can hold: at least ``bound + 1`` tokens) and
``:450-458``; 0.32's without the requested output tokens)."""


def over_context(message: str) -> tuple[int, int] | None:
    """(prompt tokens, context) when ``message`` is vLLM refusing a prompt the context cannot hold; else None. A
    prompt of exactly the context counts one more token: the one the answer needs."""
    for pattern in OVER_CONTEXT:
        found = pattern.search(message)
        if found is not None:
            named = found.groupdict()
            if named.get("bound"):
                return int(named["bound"]) + 1, int(found["context"])
            extra = 1 if named.get("plus") else 0
            return int(found["prompt"]) + extra, int(found["context"])
    return None


def context_error(prompt_tokens: int, context: int) -> ApiError:
    """OpenAI's 400 for a prompt the context cannot hold, in OpenAI's words."""
    return ApiError(
        400,
        f"This model's maximum context length is {context} tokens. However, your request has {prompt_tokens} input "
        "tokens (at least one more is needed for the answer). Please reduce the length of the input messages or "
        "prompt.",
        "invalid_request_error",
        "prompt",
        "context_length_exceeded",
    )


def engine_error(message: str, deadline_s: float) -> ApiError:
    """The client's error for an error Triton sends on the stream: a prompt longer than the model's context a 400
    ``context_length_exceeded`` in OpenAI's words (vLLM words it differently by version: :data:`OVER_CONTEXT`); a
    model Triton does not have ready a 503 with ``Retry-After``; anything else as
    :func:`tritonft.gateway.errors.from_triton` maps it (vLLM's words kept)."""
    over = over_context(message)
    if over is not None:
        return context_error(*over)
    if "unknown model" in message or "not at ready state" in message or "is not ready" in message:
        return ApiError(
            503,
            f"the model is not ready yet (loading, or failed to load): {message}",
            "server_error",
            None,
            "model_not_ready",
            LOADING_RETRY_AFTER_S,
        )
    return from_triton("", message, deadline_s)


def collect(pieces: list[Piece], n: int, copies: int = 1) -> Answer:
    """The responses to one prompt as its answer: each of the ``n`` completions' pieces joined, its token counts
    summed; each completion ``copies`` times (greedy ``n``)."""
    texts, tokens, reasons = [""] * n, [0] * n, ["stop"] * n
    steps: list[list[dict[str, Any]]] = [[] for _ in range(n)]
    prompt_tokens = 0
    for piece in pieces:
        if piece.input_tokens is not None:
            prompt_tokens = piece.input_tokens
        for k in range(min(n, len(piece.texts))):
            texts[k] += piece.texts[k]
            if k < len(piece.output_tokens):
                tokens[k] += piece.output_tokens[k]
            if k < len(piece.finish) and piece.finish[k] != "None":
                reasons[k] = finish_reason(piece.finish[k])
            if k < len(piece.logprobs):
                steps[k] += piece.logprobs[k]
    choices = tuple(Choice(texts[k], reasons[k], tokens[k], tuple(steps[k])) for k in range(n))
    return Answer(choices * copies, prompt_tokens)


def usage(answers: list[Answer]) -> dict[str, int]:
    """OpenAI's ``usage`` from the engine's counts: each prompt's tokens once, every choice's generated tokens."""
    prompt = sum(a.prompt_tokens for a in answers)
    completion = sum(c.tokens for a in answers for c in a.choices)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _ranked(step: dict[str, Any]) -> list[dict[str, Any]]:
    return sorted(step.values(), key=lambda entry: int(entry.get("rank") or 0))


def _chosen(step: dict[str, Any]) -> dict[str, Any]:
    return dict(next(iter(step.values())))


def _token(entry: Mapping[str, Any]) -> str:
    return str(entry.get("decoded_token") or "")


def completion_logprobs(choice: Choice, alternatives: int) -> dict[str, Any]:
    """A completion choice's ``logprobs``: each generated token, its log-probability, the ``alternatives`` most likely
    tokens (and the chosen one, as OpenAI's completions do) and its offset in the choice's text."""
    tokens, log_probs, tops, offsets, at = [], [], [], [], 0
    for step in choice.steps:
        chosen = _chosen(step)
        tokens.append(_token(chosen))
        log_probs.append(float(chosen["logprob"]))
        top: dict[str, float] = {}
        for e in [*_ranked(step)[:alternatives], chosen]:  # two tokens may read the same (e.g. "" for a partial
            top.setdefault(_token(e), float(e["logprob"]))  # UTF-8 byte): the likelier one is kept
        tops.append(top)
        offsets.append(at)
        at += len(_token(chosen))
    return {"tokens": tokens, "token_logprobs": log_probs, "top_logprobs": tops, "text_offset": offsets}


def chat_logprobs(choice: Choice, alternatives: int) -> dict[str, Any]:
    """A chat choice's ``logprobs``: ``content``, one entry per generated token with its ``alternatives`` most likely
    tokens in ``top_logprobs``."""

    def entry(e: Mapping[str, Any]) -> dict[str, Any]:
        token = _token(e)
        return {"token": token, "logprob": float(e["logprob"]), "bytes": list(token.encode("utf-8"))}

    content = [
        entry(_chosen(step)) | {"top_logprobs": [entry(e) for e in _ranked(step)[:alternatives]]}
        for step in choice.steps
    ]
    return {"content": content, "refusal": None}


def completion_body(rid: str, created: int, request: VllmRequest, answers: list[Answer]) -> dict[str, Any]:
    """An OpenAI ``text_completion``: choice ``p * n + k`` is completion ``k`` of prompt ``p``."""
    choices = [
        {
            "index": p * request.n + k,
            "text": (request.prompts[p] if request.echo else "") + choice.text,
            "logprobs": None if request.logprobs is None else completion_logprobs(choice, request.logprobs),
            "finish_reason": choice.finish_reason,
        }
        for p, answer in enumerate(answers)
        for k, choice in enumerate(answer.choices)
    ]
    return {
        "id": rid,
        "object": "text_completion",
        "created": created,
        "model": request.model.name,
        "choices": choices,
        "usage": usage(answers),
    }


def chat_body(rid: str, created: int, request: VllmRequest, answer: Answer) -> dict[str, Any]:
    """An OpenAI ``chat.completion``: the assistant's reply as the model wrote it (not stripped)."""
    choices = [
        {
            "index": k,
            "message": {"role": "assistant", "content": choice.text, "refusal": None},
            "logprobs": None if request.logprobs is None else chat_logprobs(choice, request.logprobs),
            "finish_reason": choice.finish_reason,
        }
        for k, choice in enumerate(answer.choices)
    ]
    return {
        "id": rid,
        "object": "chat.completion",
        "created": created,
        "model": request.model.name,
        "choices": choices,
        "usage": usage([answer]),
    }


Timing = Callable[[str, float], None]
"""Records one duration of a model (the gateway's metrics)."""


def _untimed(_model: str, _seconds: float) -> None:
    return None


@dataclass(frozen=True)
class Engine:
    """Where a vLLM model's calls go: its Triton client, the request deadline and the metrics' timings (the wait
    for the first response, and for the whole stream)."""

    triton: Triton
    deadline_s: float
    first: Timing = _untimed
    waited: Timing = _untimed


async def responses(engine: Engine, request: VllmRequest, prompt: str) -> AsyncGenerator[Piece, None]:
    """Each response of the vLLM model to ``prompt``, timed into the gateway's metrics; closing it cancels the call."""
    started = time.monotonic()
    seen = False
    try:
        stream = engine.triton.stream_responses(
            infer_request(request, prompt), engine.deadline_s, lambda message: engine_error(message, engine.deadline_s)
        )
        async with aclosing(stream) as answers:
            async for response in answers:
                if not seen:
                    engine.first(request.model.name, time.monotonic() - started)
                    seen = True
                if _output(response, "text_output") is not None:
                    yield read_piece(response)
    finally:
        engine.waited(request.model.name, time.monotonic() - started)


async def answers(engine: Engine, request: VllmRequest) -> list[Answer]:
    """One :class:`Answer` per prompt (the prompts' calls run at once; vLLM batches them)."""
    import asyncio

    async def one(prompt: str) -> Answer:
        async with aclosing(responses(engine, request, prompt)) as stream:
            return collect([piece async for piece in stream], request.engine_n, request.n // request.engine_n)

    return list(await asyncio.gather(*(one(p) for p in request.prompts)))


async def events(engine: Engine, request: VllmRequest, chunks: Chunks) -> AsyncGenerator[bytes, None]:
    """Each prompt's completion as chunk events as vLLM generates it, prompt after prompt; then, when asked, the
    usage of them all."""
    collected: list[Answer] = []
    for index, prompt in enumerate(request.prompts):
        head = prompt if request.echo else ""
        pieces: list[Piece] = []
        async with aclosing(responses(engine, request, prompt)) as stream:
            async for piece in stream:
                pieces.append(piece)
                text = piece.texts[0] if piece.texts else ""
                if text:
                    yield chunks.piece(index, head + text, None)
                    head = ""
        answer = collect(pieces, 1)
        collected.append(answer)
        yield chunks.piece(index, head, answer.choices[0].finish_reason)
    if request.include_usage:
        yield chunks.usage(usage(collected))
