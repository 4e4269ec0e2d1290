"""Every OpenAI request parameter of ``/v1/completions``, ``/v1/chat/completions`` and ``/v1/embeddings``: supported,
or refused with a 400 naming it and saying why. One table (:data:`PARAMETERS`), which holds a row for every field of
OpenAI's published request schemas (``CreateCompletionRequest``, ``CreateChatCompletionRequest``,
``CreateEmbeddingRequest``) and which the README's table must equal (``tests/tritonft/gateway/test_parameters.py``);
a parameter that is in neither is refused as unknown, so nothing a client sends is ever silently ignored. The fields
of a chat message and its content parts have their own table (:mod:`tritonft.gateway.messages`).

A refused parameter is still accepted at its "off" value (``neutral``: what clients send by default, e.g.
LangChain's ``frequency_penalty: 0``), and ``null`` means "not sent" for every parameter.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tritonft.gateway.errors import ApiError, bad_parameter

COMPLETIONS = "completions"
CHAT = "chat"
EMBEDDINGS = "embeddings"
BOTH = (COMPLETIONS, CHAT)
ALL = (COMPLETIONS, CHAT, EMBEDDINGS)
PATHS = {COMPLETIONS: "/v1/completions", CHAT: "/v1/chat/completions", EMBEDDINGS: "/v1/embeddings"}


@dataclass(frozen=True)
class Parameter:
    """One OpenAI request parameter as the gateway treats it."""

    name: str
    routes: tuple[str, ...]
    supported: bool
    note: str
    """README text: what it does here (supported) or why it is refused."""
    neutral: tuple[Any, ...] = ()
    """Values of a refused parameter that ask for nothing (accepted, as if not sent)."""
    text: bool = False
    """An identifier the caller keeps for its own records: any string is accepted, anything else is a 400."""


PARAMETERS: tuple[Parameter, ...] = (
    Parameter(
        "model",
        ALL,
        True,
        "a served model (`GET /v1/models`; for embeddings an embedding model, another is a 400 "
        "`model_not_embedding`); unknown: 404 `model_not_found`",
    ),
    Parameter(
        "prompt",
        (COMPLETIONS,),
        True,
        "a string or a list of strings (one choice per prompt and `n`); token-id prompts (a list of integers or of "
        "lists) are refused: send the text, which the model's own tokenizer encodes",
    ),
    Parameter(
        "messages",
        (CHAT,),
        True,
        "`system`/`developer`/`user`/`assistant` messages whose content is a string or a list of text parts (chat "
        "template); every message field and part type: [chat messages](#chat-messages)",
    ),
    Parameter("max_tokens", BOTH, True, "1 to the model's `max_output_len`; default 16 (at most `max_output_len`)"),
    Parameter("max_completion_tokens", (CHAT,), True, "the same as `max_tokens` (both: they must agree)"),
    Parameter("temperature", BOTH, True, "0 to 2; 0 is greedy decoding, otherwise sampling at that temperature"),
    Parameter("top_p", BOTH, True, "0 to 1: the nucleus sampled from (default 1, the whole distribution)"),
    Parameter(
        "n",
        BOTH,
        True,
        "choices per prompt, indexed `p * n + k` (prompt `p`): a greedy answer `n` times (greedy decoding is "
        "deterministic), sampled ones as `n` rows seeded `seed`, `seed + 1`, ... (a random `seed` when none is "
        "sent); `n` times the prompts at most the model's `max_batch_size`; not with `stream`",
    ),
    Parameter(
        "best_of",
        (COMPLETIONS,),
        True,
        "candidates per prompt (`n` <= `best_of` <= 8), the `n` best returned: with `temperature: 0`, beam "
        "search of `best_of` beams; with sampling, `best_of` rows seeded like `n`'s, ranked by mean token "
        "log-probability (`best_of` times the prompts at most `max_batch_size`); `usage` counts the returned "
        "choices; not with `stream`",
    ),
    Parameter("stop", BOTH, True, "up to 4 phrases; the answer ends before the first (`finish_reason: stop`)"),
    Parameter("seed", BOTH, True, "0 to 2^63-1: the same seed and parameters give the same sampled answer"),
    Parameter("stream", BOTH, True, "server-sent events (token by token for a model rendered streaming)"),
    Parameter(
        "stream_options",
        BOTH,
        True,
        '`{"include_usage": true}`: a last chunk with `usage` and no choices (only with `stream: true`)',
    ),
    Parameter(
        "echo",
        (COMPLETIONS,),
        True,
        "the prompt before each choice's text (streamed as the first piece); not with `logprobs` (FT gives no "
        "log-probabilities for prompt tokens)",
    ),
    Parameter(
        "logprobs",
        BOTH,
        True,
        "completions: `0` only, each generated token with its log-probability (`tokens`, `token_logprobs`, "
        "`top_logprobs` holding the chosen token alone, `text_offset` into the choice's text); chat: `true`, "
        "the same as `logprobs.content`. FT returns the chosen token's log-probability, not the alternatives', so "
        "`logprobs` >= 1 is refused; not with `stream`, nor for a model rendered streaming",
    ),
    Parameter(
        "top_logprobs",
        (CHAT,),
        True,
        "`0` only (with `logprobs: true`): FT returns no alternatives to the chosen token",
    ),
    Parameter(
        "user",
        ALL,
        True,
        "accepted (a string): an end-user id for the caller's own records; no effect on the answer",
        text=True,
    ),
    Parameter(
        "safety_identifier",
        (CHAT,),
        True,
        "accepted (a string): `user`'s successor, an end-user id for the caller's own records; no effect on the answer",
        text=True,
    ),
    Parameter(
        "prompt_cache_key",
        (CHAT,),
        True,
        "accepted (a string): a hint for routing to a prompt cache, which this gateway does not have; no effect on "
        "the answer",
        text=True,
    ),
    Parameter(
        "input",
        (EMBEDDINGS,),
        True,
        "a string or a list of at most 2048 non-empty strings; token-id input "
        "(a list of integers or of lists) is refused: send the text, which the model's own tokenizer encodes",
    ),
    Parameter("encoding_format", (EMBEDDINGS,), True, "`float` (default) or `base64` (little-endian float32 bytes)"),
    Parameter(
        "dimensions",
        (EMBEDDINGS,),
        True,
        "only the model's own width: these models cannot shorten their vectors (another value is a 400)",
    ),
    Parameter(
        "presence_penalty",
        BOTH,
        False,
        "FT has only a multiplicative repetition penalty, another rule; send 0 or leave it out",
        (0, 0.0),
    ),
    Parameter(
        "frequency_penalty",
        BOTH,
        False,
        "FT has only a multiplicative repetition penalty, another rule; send 0 or leave it out",
        (0, 0.0),
    ),
    Parameter("logit_bias", BOTH, False, "FT has no per-token logit bias; send {} or leave it out", ({},)),
    Parameter("suffix", (COMPLETIONS,), False, "the served models do not fill in the middle; leave it out", ("",)),
    Parameter(
        "response_format",
        (CHAT,),
        False,
        'no constrained decoding (JSON mode, schemas); `{"type": "text"}` or leave it out',
        ({"type": "text"},),
    ),
    Parameter("tools", (CHAT,), False, "the chat template has no tool calls; leave it out", ([],)),
    Parameter("tool_choice", (CHAT,), False, 'no tool calls; `"none"` or leave it out', ("none",)),
    Parameter("parallel_tool_calls", (CHAT,), False, "no tool calls (either value asks for nothing)", (True, False)),
    Parameter("functions", (CHAT,), False, "no function calls (the deprecated form of `tools`)", ([],)),
    Parameter("function_call", (CHAT,), False, 'no function calls; `"none"` or leave it out', ("none",)),
    Parameter("modalities", (CHAT,), False, 'text only; `["text"]` or leave it out', (["text"],)),
    Parameter("audio", (CHAT,), False, "text only; leave it out"),
    Parameter("prediction", (CHAT,), False, "no predicted outputs; leave it out"),
    Parameter("reasoning_effort", (CHAT,), False, 'not a reasoning model; `"none"` or leave it out', ("none",)),
    Parameter("verbosity", (CHAT,), False, "the models have no verbosity control; leave it out"),
    Parameter("web_search_options", (CHAT,), False, "no web search; leave it out"),
    Parameter("service_tier", (CHAT,), False, 'one tier; `"auto"`, `"default"` or leave it out', ("auto", "default")),
    Parameter("store", (CHAT,), False, "answers are not stored; `false` or leave it out", (False,)),
    Parameter("metadata", (CHAT,), False, "answers are not stored (metadata goes with `store`); leave it out", ({},)),
    Parameter("moderation", (CHAT,), False, "no moderation model runs here; leave it out"),
    Parameter(
        "prompt_cache_options",
        (CHAT,),
        False,
        "there is no prompt cache to configure; leave it out",
        ({},),
    ),
    Parameter("prompt_cache_retention", (CHAT,), False, "there is no prompt cache to keep; leave it out"),
)
"""The table, in the README's order."""

_BY_ROUTE: dict[str, dict[str, Parameter]] = {
    route: {p.name: p for p in PARAMETERS if route in p.routes} for route in ALL
}


def _same(value: Any, neutral: Any) -> bool:
    """``value`` is ``neutral`` (``0`` and ``0.0`` alike, but never ``false`` for ``0``)."""
    return isinstance(value, bool) == isinstance(neutral, bool) and bool(value == neutral)


@dataclass(frozen=True)
class EngineVerdict:
    """How a model served by another engine treats a parameter, where that differs from :data:`PARAMETERS`."""

    supported: bool
    note: str
    """README text (the table of that engine's differences)."""
    neutral: tuple[Any, ...] = ()


VLLM_PARAMETERS: dict[str, EngineVerdict] = {
    "max_tokens": EngineVerdict(
        True,
        "1 to the model's context (`vllm.maxModelLen`, else its positions), which prompt and answer share: vLLM ends "
        "the answer where the context does (`finish_reason: length`); default: chat the rest of the context, "
        "completions 16 (OpenAI's)",
    ),
    "max_completion_tokens": EngineVerdict(True, "the same as `max_tokens` (both: they must agree)"),
    "n": EngineVerdict(
        True,
        "1 to 8 choices per prompt, generated by one vLLM request (vLLM's `n`): greedy choices are equal, sampled ones "
        "differ (repeatable with `seed`); not with `stream` (NVIDIA's vLLM backend streams each completion's text "
        "without its index)",
    ),
    "best_of": EngineVerdict(
        True,
        "only equal to `n` (or left out): vLLM's V1 engine generates no extra candidates to rank",
    ),
    "stop": EngineVerdict(True, "up to 4 phrases; vLLM ends the answer before the first (`finish_reason: stop`)"),
    "seed": EngineVerdict(True, "0 to 2^63-1: vLLM's per-request seed (the same seed and parameters, the same answer)"),
    "top_p": EngineVerdict(True, "above 0, at most 1: vLLM's nucleus (default 1)"),
    "presence_penalty": EngineVerdict(
        True, "-2 to 2: vLLM's `presence_penalty` (OpenAI's rule: once for every token already generated)"
    ),
    "frequency_penalty": EngineVerdict(
        True, "-2 to 2: vLLM's `frequency_penalty` (OpenAI's rule: per occurrence of a token already generated)"
    ),
    "echo": EngineVerdict(
        True, "the prompt before each choice's text (streamed as the first piece); not with `logprobs`"
    ),
    "logprobs": EngineVerdict(
        True,
        "completions: 0 to 5, each generated token with its log-probability and, in `top_logprobs`, the `logprobs` "
        "most likely tokens (vLLM's, the chosen one included); chat: `true`, the same as `logprobs.content`; "
        "not with `stream`",
    ),
    "top_logprobs": EngineVerdict(True, "0 to 20 most likely tokens per generated token (with `logprobs: true`)"),
    "logit_bias": EngineVerdict(
        False, "not passed to vLLM by this gateway (its keys are the tokenizer's ids); send {} or leave it out", ({},)
    ),
}
"""Where a model served by vLLM (``family: llama``) differs from the table: vLLM honours more (penalties, the
alternatives of each token), bounds ``max_tokens`` by its context, and decides ``n`` and ``stop`` itself. The vLLM
table of ``docs/vllm.md`` must equal it."""


def checked_body(body: dict[str, Any], route: str, overrides: dict[str, EngineVerdict] | None = None) -> dict[str, Any]:
    """``body`` without its ``null`` values; an :class:`ApiError` (400, naming it) for the first parameter that is
    not in the table for ``route`` or is refused and not at a neutral value (``overrides``: an engine's verdicts
    where they differ from the table's)."""
    known = _BY_ROUTE[route]
    overrides = overrides or {}
    kept: dict[str, Any] = {}
    for name, value in body.items():
        if value is None:
            continue
        parameter = known.get(name)
        if parameter is None:
            others = [PATHS[other] for other in ALL if other != route and name in _BY_ROUTE[other]]
            where = f" (it is one of {' and '.join(others)})" if others else ""
            raise ApiError(
                400,
                f"{name} is not a parameter of {PATHS[route]}{where}; the README's table lists every parameter "
                "the gateway accepts",
                param=name,
                code="unknown_parameter",
            )
        verdict = overrides.get(name) or EngineVerdict(parameter.supported, parameter.note, parameter.neutral)
        if not verdict.supported and not any(_same(value, n) for n in verdict.neutral):
            raise bad_parameter(name, f"{name} is not supported: {verdict.note}")
        if parameter.text and not isinstance(value, str):
            raise bad_parameter(name, f"{name} must be a string (an identifier for your own records)")
        kept[name] = value
    return kept
