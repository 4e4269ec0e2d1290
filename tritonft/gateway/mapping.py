"""OpenAI request bodies -> ensemble inputs, and ensemble answers -> OpenAI response bodies (pure).

Which parameters are accepted at all is :mod:`tritonft.gateway.parameters`' table; this module maps the supported
ones. Sampling: ``temperature: 0`` is greedy (``runtime_top_k=1``); otherwise FT samples from the nucleus
``runtime_top_p`` (default 1.0, the whole distribution) at ``temperature``. ``n`` choices: a greedy answer ``n``
times, or ``n`` sampled rows seeded ``seed + k``; ``best_of`` with greedy decoding is beam search
(``beam_width=best_of``, the ``n`` best beams), with sampling ``best_of`` seeded rows of which the ``n`` with the
highest mean token log-probability are the choices (OpenAI's rule). ``stop`` phrases go to the ensemble's
``stop_words``. Usage counts are the tokenizer's: the ensemble's ``input_lengths`` and ``output_lengths``.

Chat template (GPT families): each message becomes ``"<Role>: <content>\\n"`` (``System``, ``User``,
``Assistant``; a message's fields and content parts as :mod:`tritonft.gateway.messages` reads them), followed by
``"Assistant:"``; the completion is the assistant's reply, cut where the model
starts the next ``"User:"`` turn (added as a stop phrase).
"""

from __future__ import annotations

import csv
import io
import random
from dataclasses import dataclass, field, replace
from typing import Any

from tritonft.gateway.config import MAX_BEAMS, ServedModel
from tritonft.gateway.errors import ApiError, bad_parameter
from tritonft.gateway.messages import turns
from tritonft.gateway.parameters import CHAT, COMPLETIONS, checked_body

DEFAULT_MAX_TOKENS = 16
CHAT_ROLES = {"system": "System", "user": "User", "assistant": "Assistant"}
"""The template's name of each role :func:`tritonft.gateway.messages.turns` yields."""
CHAT_STOP = "User:"


@dataclass(frozen=True)
class TensorValue:
    """One optional ensemble input: name, KServe-V2 datatype and its single value."""

    name: str
    datatype: str
    value: int | float | str


GREEDY_TOP_P = 0.0
"""``runtime_top_p`` of a greedy request: FasterTransformer's own default when the input is absent (top-k alone)."""
NEUTRAL_TEMPERATURE = 1.0
"""``temperature`` of a greedy request: FasterTransformer's default when the input is absent (logits unchanged)."""
GREEDY_SEED = 0
"""``random_seed`` of a greedy request: FasterTransformer's default when the input is absent (greedy draws nothing)."""


@dataclass(frozen=True)
class Decoding:
    """How one OpenAI request decodes, before it becomes ensemble inputs (:func:`decoding_inputs`)."""

    max_tokens: int
    temperature: float
    """0: greedy."""
    top_p: float
    seed: int | None
    """Sampling's ``random_seed`` (the body's, or drawn by the gateway); ignored when greedy."""
    beams: int = 1
    stop: tuple[str, ...] = ()
    logprobs: bool = False


def decoding_inputs(decoding: Decoding, *, streaming: bool) -> tuple[TensorValue, ...]:
    """The ensemble's optional inputs for ``decoding``: the same set of names for every request of a model, greedy
    or sampled, with or without stop phrases or log-probabilities.

    Triton's dynamic batcher puts requests in one batch only when they carry the same set of inputs (tritonserver
    2.33.0, NGC 23.04, the FT image's, included), and the FT step receives the sampling inputs straight from the
    ensemble: a greedy request sent without ``runtime_top_p``/``temperature``/``random_seed`` would never share an
    execution with a sampled one. So every input is always sent, greedy with FasterTransformer's own defaults for
    an absent input (:data:`GREEDY_TOP_P`, :data:`NEUTRAL_TEMPERATURE`, :data:`GREEDY_SEED`: the same tokens as
    before), ``stop_words`` empty when there are none (the preprocessing model's "no words", as when absent),
    ``return_tokens`` false unless log-probabilities are asked (a streaming ensemble has no ``return_tokens``).
    ``beam_width`` alone is sent only for beam search: FT takes one beam width per batch, so a beam-search request
    must not join the greedy/sampled ones (a different input set keeps it apart)."""
    greedy = decoding.temperature == 0.0
    params = [
        TensorValue("max_output_len", "UINT32", decoding.max_tokens),
        TensorValue("runtime_top_k", "UINT32", 1 if greedy else 0),
        TensorValue("runtime_top_p", "FP32", GREEDY_TOP_P if greedy else decoding.top_p),
        TensorValue("temperature", "FP32", NEUTRAL_TEMPERATURE if greedy else decoding.temperature),
        TensorValue("random_seed", "UINT64", GREEDY_SEED if greedy or decoding.seed is None else decoding.seed),
    ]
    if decoding.beams > 1:
        params.append(TensorValue("beam_width", "UINT32", decoding.beams))
    params.append(TensorValue("stop_words", "BYTES", csv_phrases(decoding.stop) if decoding.stop else ""))
    if not streaming:
        params.append(TensorValue("return_tokens", "BOOL", decoding.logprobs))
    return tuple(params)


@dataclass(frozen=True)
class EnsembleRequest:
    """What to send to the ensemble for one OpenAI request: one inference per prompt, same parameters."""

    model: ServedModel
    prompts: tuple[str, ...]
    parameters: tuple[TensorValue, ...]
    n: int
    stream: bool
    stop: tuple[str, ...] = field(default=())
    echo: bool = False
    logprobs: bool = False
    """Each generated token's text and log-probability are asked of the ensemble (``return_tokens``)."""
    include_usage: bool = False
    """A stream ends with a ``usage`` chunk."""
    samples: tuple[int, ...] = ()
    """Sampled ``n`` > 1: the seed of each choice's row (one call each); empty otherwise."""
    beams: int = 1
    """Beam search width (``best_of`` with greedy decoding): the ``n`` best beams are the choices."""
    ranked: bool = False
    """Sampled ``best_of`` > ``n``: the ``samples`` are ranked by mean token log-probability, the best ``n`` kept."""
    drawn_seed: bool = False
    """Sampled without a ``seed`` in the body: the gateway drew the ``random_seed`` (so the answer is this request's
    own and is never shared with another's, :func:`tritonft.gateway.coalesce.merge_key`)."""

    def choice_requests(self) -> tuple[EnsembleRequest, ...]:
        """The requests to send: this one, or one per sampled choice (its own ``random_seed``)."""
        if not self.samples:
            return (self,)
        rest = tuple(p for p in self.parameters if p.name != "random_seed")
        return tuple(
            replace(self, parameters=(*rest, TensorValue("random_seed", "UINT64", seed)), n=1, samples=())
            for seed in self.samples
        )


@dataclass(frozen=True, slots=True)
class Beam:
    """One generated sequence: its text, how many tokens it was decoded from and, when asked, each token's text and
    log-probability."""

    text: str
    tokens: int
    token_texts: tuple[str, ...] = ()
    log_probs: tuple[float, ...] = ()


@dataclass(frozen=True, slots=True)
class Row:
    """The answer to one prompt: its beams (or choices) and the prompt's token count (``None``: not known)."""

    beams: tuple[Beam, ...]
    prompt_tokens: int | None


def choices(request: EnsembleRequest, calls: list[list[Row]]) -> list[Row]:
    """Per prompt, a :class:`Row` whose beams are the request's ``n`` choices, from the answers of
    :meth:`EnsembleRequest.choice_requests` (one list of rows per call)."""
    if len(calls) > 1:
        rows = []
        for p, row in enumerate(calls[0]):
            candidates = [call[p].beams[0] for call in calls]
            if request.ranked:  # sorted() is stable: equal means keep the seeds' order
                candidates = sorted(candidates, key=mean_log_prob, reverse=True)[: request.n]
            rows.append(Row(tuple(candidates), row.prompt_tokens))
        return rows
    if request.n == 1 and request.beams == 1:  # one call, one beam per prompt: already the choices
        return calls[0]
    if request.beams > 1:
        return [Row(row.beams[: request.n], row.prompt_tokens) for row in calls[0]]
    return [Row(row.beams[:1] * request.n, row.prompt_tokens) for row in calls[0]]


def mean_log_prob(beam: Beam) -> float:
    """What ``best_of`` ranks sampled candidates by: the mean log-probability of their tokens."""
    return sum(beam.log_probs) / max(len(beam.log_probs), 1)


def usage(rows: list[Row]) -> dict[str, int]:
    """OpenAI's ``usage``: each prompt's tokens once, every choice's generated tokens."""
    prompt = sum(row.prompt_tokens or 0 for row in rows)
    completion = sum(beam.tokens for row in rows for beam in row.beams)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _number(body: dict[str, Any], key: str, default: float, low: float, high: float) -> float:
    value = body.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise bad_parameter(key, f"{key} must be a number between {low:g} and {high:g}")
    if not low <= value <= high:
        raise bad_parameter(key, f"{key} must be between {low:g} and {high:g}, got {value:g}")
    return float(value)


def _integer(body: dict[str, Any], key: str, default: int, low: int, high: int, *, why: str = "") -> int:
    value = body.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad_parameter(key, f"{key} must be an integer between {low} and {high}")
    if not low <= value <= high:
        raise bad_parameter(key, f"{key} must be between {low} and {high}{why}, got {value}")
    return value


def _stop(body: dict[str, Any]) -> tuple[str, ...]:
    raw = body.get("stop")
    if raw is None:
        return ()
    phrases = [raw] if isinstance(raw, str) else raw
    if not isinstance(phrases, list) or not all(isinstance(p, str) and p for p in phrases) or len(phrases) > 4:
        raise bad_parameter("stop", "stop must be a non-empty string or a list of at most 4 non-empty strings")
    return tuple(phrases)


def csv_phrases(phrases: tuple[str, ...]) -> str:
    """The ensemble's ``stop_words`` form: one CSV line of phrases."""
    out = io.StringIO()
    csv.writer(out, lineterminator="").writerow(phrases)
    return out.getvalue()


def _prompts(body: dict[str, Any]) -> tuple[str, ...]:
    raw = body.get("prompt")
    if isinstance(raw, str):
        raw = [raw]
    if isinstance(raw, list) and raw and all(isinstance(p, int | list) and not isinstance(p, bool) for p in raw):
        raise bad_parameter(
            "prompt", "token-id prompts are not supported here: send the text, which the model's own tokenizer encodes"
        )
    if not isinstance(raw, list) or not raw or not all(isinstance(p, str) for p in raw):
        raise bad_parameter("prompt", "prompt must be a string or a non-empty list of strings")
    return tuple(raw)


def chat_prompt(messages: Any) -> str:
    """The documented plain template (module docstring) applied to an OpenAI ``messages`` list."""
    return "".join(f"{CHAT_ROLES[role]}: {text}\n" for role, text in turns(messages)) + "Assistant:"


def _logprobs(body: dict[str, Any], chat: bool, model: ServedModel, stream: bool) -> bool:
    """Whether log-probabilities are asked for (and can be given); a 400 naming what cannot be."""
    if chat:
        asked = body.get("logprobs", False)
        if not isinstance(asked, bool):
            raise bad_parameter("logprobs", "logprobs must be true or false")
        top = _integer(body, "top_logprobs", 0, 0, 20)
        if top and not asked:
            raise bad_parameter("top_logprobs", "top_logprobs needs logprobs: true")
        if top:
            raise bad_parameter(
                "top_logprobs",
                "top_logprobs must be 0: FasterTransformer returns the chosen token's log-probability, not the "
                "alternatives'",
            )
    else:
        if "logprobs" not in body:
            return False
        k = _integer(body, "logprobs", 0, 0, 5)
        if k:
            raise bad_parameter(
                "logprobs",
                f"logprobs must be 0 (got {k}): FasterTransformer returns the chosen token's log-probability, not the "
                "top alternatives'",
            )
        asked = True
    if asked and stream:
        raise bad_parameter("logprobs", "logprobs are served on unstreamed requests only; send stream: false")
    if asked and model.streaming:
        raise bad_parameter(
            "logprobs",
            f"model {model.name!r} is rendered streaming (decoupled): its ensemble returns no per-token texts, so no "
            "logprobs",
        )
    return bool(asked)


def _include_usage(body: dict[str, Any], stream: bool) -> bool:
    options = body.get("stream_options")
    if options is None:
        return False
    if not stream:
        raise bad_parameter("stream_options", "stream_options is only allowed with stream: true")
    if not isinstance(options, dict) or set(options) - {"include_usage", "include_obfuscation"}:
        raise bad_parameter("stream_options", 'stream_options must be {"include_usage": true|false}')
    obfuscation = options.get("include_obfuscation")
    if obfuscation is not None and obfuscation is not False:
        raise bad_parameter(
            "stream_options.include_obfuscation",
            "stream_options.include_obfuscation is not supported: the chunks carry no obfuscation padding; send false "
            "or leave it out",
        )
    include = options.get("include_usage", False)
    if not isinstance(include, bool):
        raise bad_parameter("stream_options", "stream_options.include_usage must be true or false")
    return include


def _max_tokens(body: dict[str, Any], model: ServedModel) -> int:
    limit = f" (the model's max_output_len is {model.max_output_len})"
    default = min(DEFAULT_MAX_TOKENS, model.max_output_len)
    values = {
        key: _integer(body, key, default, 1, model.max_output_len, why=limit)
        for key in ("max_tokens", "max_completion_tokens")
        if key in body
    }
    if len(set(values.values())) > 1:
        raise bad_parameter("max_completion_tokens", "max_tokens and max_completion_tokens differ; send one of them")
    return next(iter(values.values()), default)


def ensemble_request(body: Any, model: ServedModel, *, chat: bool = False) -> EnsembleRequest:
    """Validate an OpenAI completions (or chat completions) body for ``model``; :class:`ApiError` names the field."""
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object")
    body = checked_body(body, CHAT if chat else COMPLETIONS)
    if chat and not model.chat:
        raise bad_parameter("model", f"model {model.name!r} ({model.family}) has no chat template; use /v1/completions")
    prompts = (chat_prompt(body.get("messages")),) if chat else _prompts(body)
    max_tokens = _max_tokens(body, model)
    temperature = _number(body, "temperature", 1.0, 0.0, 2.0)
    top_p = _number(body, "top_p", 1.0, 0.0, 1.0)
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise bad_parameter("stream", "stream must be true or false")
    include_usage = _include_usage(body, stream)
    batch = f" (the model's max_batch_size is {model.max_batch_size}: n times the prompts must fit in one batch)"
    n = _integer(body, "n", 1, 1, max(1, model.max_batch_size // len(prompts)), why=batch)
    best_of = _integer(body, "best_of", n, 1, MAX_BEAMS, why=f" (at most {MAX_BEAMS} candidates)")
    if best_of < n:
        raise bad_parameter("best_of", f"best_of ({best_of}) must be at least n ({n})")
    if n > 1 and stream:
        raise bad_parameter("n", "n > 1 cannot be streamed; send stream: false or n: 1")
    if best_of > 1 and stream:
        raise bad_parameter("best_of", "best_of > 1 cannot be streamed; send stream: false")
    if temperature != 0.0 and best_of * len(prompts) > model.max_batch_size:
        raise bad_parameter(
            "best_of",
            f"best_of times the prompts must fit in one batch (the model's max_batch_size is {model.max_batch_size})",
        )
    echo = body.get("echo", False)
    if not isinstance(echo, bool):
        raise bad_parameter("echo", "echo must be true or false")
    logprobs = _logprobs(body, chat, model, stream)
    if echo and logprobs:
        raise bad_parameter(
            "echo", "echo with logprobs needs the prompt tokens' log-probabilities, which FT does not give"
        )
    stop = _stop(body) + ((CHAT_STOP,) if chat else ())
    seed = body.get("seed")
    given_seed = None if seed is None else _integer(body, "seed", 0, 0, 2**63 - 1)
    drawn = given_seed is None and temperature != 0.0
    beams = best_of if "best_of" in body and best_of > 1 and temperature == 0.0 else 1
    params = decoding_inputs(
        Decoding(
            max_tokens=max_tokens,
            temperature=temperature,
            top_p=top_p,
            seed=random.getrandbits(63) if drawn else given_seed,
            beams=beams,
            stop=stop,
            logprobs=logprobs,
        ),
        streaming=model.streaming,
    )
    samples: tuple[int, ...] = ()
    if best_of > 1 and temperature != 0.0:
        base = int(seed) if seed is not None else random.getrandbits(62)
        samples = tuple(base + k for k in range(best_of))
    return EnsembleRequest(
        model,
        prompts,
        tuple(params),
        n,
        stream,
        stop,
        echo=echo,
        logprobs=logprobs,
        include_usage=include_usage,
        samples=samples,
        beams=beams,
        ranked=bool(samples) and best_of > n,
        drawn_seed=drawn,
    )


def cut_at_stop(text: str, stop: tuple[str, ...]) -> tuple[str, bool]:
    """``text`` up to the first stop phrase (FT may emit the phrase itself), and whether one was found."""
    cuts = [i for i in (text.find(p) for p in stop) if i >= 0]
    return (text[: min(cuts)], True) if cuts else (text, False)


def held_back(text: str, stop: tuple[str, ...]) -> int:
    """How many characters at the end of a stream's ``text`` not to send yet: the longest end that begins a stop
    phrase (the next tokens may complete it, and a phrase that ends the answer must never have been sent)."""
    for size in range(min(len(text), max((len(p) for p in stop), default=1) - 1), 0, -1):
        if any(p.startswith(text[-size:]) for p in stop):
            return size
    return 0


def _kept_tokens(beam: Beam, length: int) -> list[tuple[str, float, int]]:
    """(token text, log-probability, offset) of the beam's tokens that begin within its first ``length``
    characters (the text a stop phrase cut)."""
    kept, at = [], 0
    for piece, log_prob in zip(beam.token_texts, beam.log_probs, strict=False):
        if at >= length:
            break
        kept.append((piece, log_prob, at))
        at += len(piece)
    return kept


def completion_logprobs(beam: Beam, length: int) -> dict[str, Any]:
    """A completion choice's ``logprobs``: each generated token (up to the stop cut), its log-probability, the
    chosen token alone as its ``top_logprobs`` (``logprobs: 0``) and its offset in the choice's text."""
    kept = _kept_tokens(beam, length)
    return {
        "tokens": [piece for piece, _, _ in kept],
        "token_logprobs": [log_prob for _, log_prob, _ in kept],
        "top_logprobs": [{piece: log_prob} for piece, log_prob, _ in kept],
        "text_offset": [at for _, _, at in kept],
    }


def chat_logprobs(beam: Beam, length: int) -> dict[str, Any]:
    """A chat choice's ``logprobs``: ``content``, one entry per generated token (up to the stop cut)."""
    content = [
        {"token": piece, "logprob": log_prob, "bytes": list(piece.encode("utf-8")), "top_logprobs": []}
        for piece, log_prob, _ in _kept_tokens(beam, length)
    ]
    return {"content": content, "refusal": None}


def completion_body(rid: str, created: int, request: EnsembleRequest, rows: list[Row]) -> dict[str, Any]:
    """An OpenAI ``text_completion`` object: ``rows[p].beams[k]`` is choice ``k`` of prompt ``p``."""
    choices = []
    for p, row in enumerate(rows):
        for k, beam in enumerate(row.beams[: request.n]):
            text, stopped = cut_at_stop(beam.text, request.stop)
            choices.append(
                {
                    "index": p * request.n + k,
                    "text": request.prompts[p] + text if request.echo else text,
                    "logprobs": completion_logprobs(beam, len(text)) if request.logprobs else None,
                    "finish_reason": "stop" if stopped else "length",
                }
            )
    return {
        "id": rid,
        "object": "text_completion",
        "created": created,
        "model": request.model.name,
        "choices": choices,
        "usage": usage(rows),
    }


def chat_body(rid: str, created: int, request: EnsembleRequest, row: Row) -> dict[str, Any]:
    choices = []
    for k, beam in enumerate(row.beams[: request.n]):
        text, stopped = cut_at_stop(beam.text, request.stop)
        choices.append(
            {
                "index": k,
                "message": {"role": "assistant", "content": text.strip(), "refusal": None},
                "logprobs": chat_logprobs(beam, len(text)) if request.logprobs else None,
                "finish_reason": "stop" if stopped else "length",
            }
        )
    return {
        "id": rid,
        "object": "chat.completion",
        "created": created,
        "model": request.model.name,
        "choices": choices,
        "usage": usage([row]),
    }


def stream_delta(previous: str, current: str, prompt: str, prompt_included: bool) -> str:
    """The new text of a decoupled response that carries the whole sequence so far (prompt included)."""
    text = current[len(prompt) :] if prompt_included and current.startswith(prompt) else current
    return text[len(previous) :] if text.startswith(previous) else text
