"""OpenAI request bodies -> ensemble inputs, and ensemble answers -> OpenAI response bodies (pure).

Sampling: ``temperature: 0`` is greedy (``runtime_top_k=1``); otherwise FT samples from the nucleus
``runtime_top_p`` (default 1.0, the whole distribution) at ``temperature``. ``n`` > 1 becomes beam search
(``beam_width=n``, the n best beams are the n choices). ``stop`` phrases go to the ensemble's ``stop_words``.

Chat template (GPT families): each message becomes ``"<Role>: <content>\\n"`` (``System``, ``User``,
``Assistant``), followed by ``"Assistant:"``; the completion is the assistant's reply, cut where the model
starts the next ``"User:"`` turn (added as a stop phrase).
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from typing import Any

from tritonft.gateway.config import MAX_BEAMS, ServedModel
from tritonft.gateway.errors import ApiError, bad_parameter

DEFAULT_MAX_TOKENS = 16
CHAT_ROLES = {"system": "System", "user": "User", "assistant": "Assistant"}
CHAT_STOP = "User:"


@dataclass(frozen=True)
class TensorValue:
    """One optional ensemble input: name, KServe-V2 datatype and its single value."""

    name: str
    datatype: str
    value: int | float | str


@dataclass(frozen=True)
class EnsembleRequest:
    """What to send to the ensemble for one OpenAI request: one inference per prompt, same parameters."""

    model: ServedModel
    prompts: tuple[str, ...]
    parameters: tuple[TensorValue, ...]
    n: int
    stream: bool
    stop: tuple[str, ...] = field(default=())


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
    if not isinstance(raw, list) or not raw or not all(isinstance(p, str) for p in raw):
        raise bad_parameter("prompt", "prompt must be a string or a non-empty list of strings")
    return tuple(raw)


def chat_prompt(messages: Any) -> str:
    """The documented plain template (module docstring) applied to an OpenAI ``messages`` list."""
    if not isinstance(messages, list) or not messages:
        raise bad_parameter("messages", "messages must be a non-empty list of {role, content} objects")
    lines = []
    for index, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        if role not in CHAT_ROLES or not isinstance(content, str):
            raise bad_parameter(
                f"messages[{index}]",
                f"messages[{index}] needs a role ({', '.join(CHAT_ROLES)}) and a string content",
            )
        lines.append(f"{CHAT_ROLES[role]}: {content}\n")
    return "".join(lines) + "Assistant:"


def ensemble_request(body: Any, model: ServedModel, *, chat: bool = False) -> EnsembleRequest:
    """Validate an OpenAI completions (or chat completions) body for ``model``; :class:`ApiError` names the field."""
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object")
    if chat and not model.chat:
        raise bad_parameter("model", f"model {model.name!r} ({model.family}) has no chat template; use /v1/completions")
    prompts = (chat_prompt(body.get("messages")),) if chat else _prompts(body)
    limit = f" (the model's max_output_len is {model.max_output_len})"
    max_tokens = _integer(
        body, "max_tokens", min(DEFAULT_MAX_TOKENS, model.max_output_len), 1, model.max_output_len, why=limit
    )
    temperature = _number(body, "temperature", 1.0, 0.0, 2.0)
    top_p = _number(body, "top_p", 1.0, 0.0, 1.0)
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise bad_parameter("stream", "stream must be true or false")
    n = _integer(body, "n", 1, 1, MAX_BEAMS, why=" (n is served as beam search)")
    if n > 1 and stream:
        raise bad_parameter("n", "n > 1 (beam search) cannot be streamed; send stream=false or n=1")
    stop = _stop(body) + ((CHAT_STOP,) if chat else ())
    params = [TensorValue("max_output_len", "UINT32", max_tokens)]
    if temperature == 0.0:
        params.append(TensorValue("runtime_top_k", "UINT32", 1))
    else:
        params += [
            TensorValue("runtime_top_k", "UINT32", 0),
            TensorValue("runtime_top_p", "FP32", top_p),
            TensorValue("temperature", "FP32", temperature),
        ]
    seed = body.get("seed")
    if seed is not None:
        params.append(TensorValue("random_seed", "UINT64", _integer(body, "seed", 0, 0, 2**63 - 1)))
    if n > 1:
        params.append(TensorValue("beam_width", "UINT32", n))
    if stop:
        params.append(TensorValue("stop_words", "BYTES", csv_phrases(stop)))
    return EnsembleRequest(model, prompts, tuple(params), n, stream, stop)


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


def completion_body(rid: str, created: int, request: EnsembleRequest, answers: list[list[str]]) -> dict[str, Any]:
    """An OpenAI ``text_completion`` object: ``answers[p][k]`` is beam ``k`` of prompt ``p``."""
    choices = []
    for p, beams in enumerate(answers):
        for k, beam in enumerate(beams[: request.n]):
            text, stopped = cut_at_stop(beam, request.stop)
            choices.append(
                {
                    "index": p * request.n + k,
                    "text": text,
                    "logprobs": None,
                    "finish_reason": "stop" if stopped else "length",
                }
            )
    return {"id": rid, "object": "text_completion", "created": created, "model": request.model.name, "choices": choices}


def chat_body(rid: str, created: int, request: EnsembleRequest, beams: list[str]) -> dict[str, Any]:
    choices = []
    for k, beam in enumerate(beams[: request.n]):
        text, stopped = cut_at_stop(beam, request.stop)
        choices.append(
            {
                "index": k,
                "message": {"role": "assistant", "content": text.strip()},
                "finish_reason": "stop" if stopped else "length",
            }
        )
    return {"id": rid, "object": "chat.completion", "created": created, "model": request.model.name, "choices": choices}


def stream_delta(previous: str, current: str, prompt: str, prompt_included: bool) -> str:
    """The new text of a decoupled response that carries the whole sequence so far (prompt included)."""
    text = current[len(prompt) :] if prompt_included and current.startswith(prompt) else current
    return text[len(previous) :] if text.startswith(previous) else text
