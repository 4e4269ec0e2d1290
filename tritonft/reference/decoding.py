"""Decoding as FasterTransformer's Triton models do it, on top of :mod:`.models`.

Per request row (FT takes these as per-request scalars; the Triton inputs are named in brackets):

* greedy when ``top_k`` is 0 or 1 and ``top_p`` is 0 [``runtime_top_k``, ``runtime_top_p``];
* sampling otherwise: logits / ``temperature``, then top-k, then top-p inside the top-k, sampled with FT's rule
  "first candidate whose cumulative probability exceeds ``u * top_p * mass``"; ``random_seed`` seeds a per-row
  generator, so the same seed gives the same tokens (FT uses curand, whose stream this does not reproduce);
  with top-p alone (``top_k`` 0), FT's decay after each token: ``p = max(p * top_p_decay, top_p_min)``, back to
  the initial ``p`` when the token is ``top_p_reset_ids`` [``top_p_decay``, ``top_p_min``, ``top_p_reset_ids``];
* beam search when ``beam_width`` > 1, with the hypothesis bookkeeping of Hugging Face ``generate`` (2 x beams
  candidates per step, a finished hypothesis scored ``sum log p / generated_len ** len_penalty``, stop when no
  running beam can beat the worst finished one): the reference must reproduce Hugging Face token for token;
* ``repetition_penalty`` divides positive and multiplies negative logits of tokens already in the sequence;
* ``bad_words_list``: a phrase's last token is banned whenever the sequence ends with the phrase's other tokens
  (a one-token phrase is always banned); ``stop_words_list``: a row finishes as soon as its sequence ends with a
  phrase (the phrase stays in the output and counts in ``sequence_length``); both in FT's ``[2, L]`` format,
  row 0 the flattened ids, row 1 the cumulative end offsets padded with -1 (:func:`parse_word_list`);
* ``end_id`` finishes a row (it is kept and counted); at most ``max_new_tokens`` are generated
  [``request_output_len`` for GPT, ``max_output_len`` for T5]; T5's decoder starts from ``start_id`` when given.

Outputs in FT's layout: ``output_ids [batch, beams, T]`` (GPT: the prompt then the generated tokens; T5: only the
generated tokens), ``sequence_length [batch, beams]``, padded with ``end_id``; ``cum_log_probs [batch, beams]`` and
``output_log_probs [batch, beams, max_new_tokens]`` (each generated token's log-probability, 0 after the end).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tritonft.reference import layers
from tritonft.reference.models import T5, Gpt
from tritonft.spec import Family

Array = np.ndarray[Any, Any]

MASKED = np.float32(-1.0e9)
"""Hugging Face's additive mask in beam search (kept identical so ties resolve the same way)."""


@dataclass(frozen=True)
class GenerationRequest:
    """One request row."""

    input_ids: Sequence[int]
    max_new_tokens: int
    beam_width: int = 1
    top_k: int = 0
    top_p: float = 0.0
    temperature: float = 1.0
    len_penalty: float = 0.0
    repetition_penalty: float = 1.0
    random_seed: int = 0
    end_id: int | None = None
    """``None``: the model's own (``config.ini``)."""
    bad_words: tuple[tuple[int, ...], ...] = ()
    stop_words: tuple[tuple[int, ...], ...] = ()
    start_id: int | None = None
    """T5's decoder start token; ``None``: the model's own (GPT ignores it, as FT does for non-empty prompts)."""
    top_p_decay: float = 1.0
    top_p_min: float = 1e-6
    top_p_reset_id: int = -1

    @property
    def sampling(self) -> bool:
        return self.top_k > 1 or self.top_p > 0.0


@dataclass
class Hypothesis:
    tokens: list[int]
    score: float
    """Cumulative log-probability (beam search: normalised by length for finished hypotheses)."""
    log_probs: list[float] = field(default_factory=list)
    """Each generated token's log-probability."""


@dataclass
class GenerationResult:
    """FT's outputs for a batch."""

    output_ids: Array
    """``[batch, beams, T]`` int32."""
    sequence_length: Array
    """``[batch, beams]`` int32."""
    cum_log_probs: Array
    """``[batch, beams]`` float32."""
    output_log_probs: Array
    """``[batch, beams, max_new_tokens]`` float32."""
    generated: list[list[list[int]]] = field(default_factory=list)
    """Per row and beam: only the generated tokens (up to and including the end id or stop word)."""


def parse_word_list(array: Array | None) -> tuple[tuple[int, ...], ...]:
    """Phrases of one row of FT's word-list tensor ``[2, L]`` (ids; cumulative end offsets, -1 padded)."""
    if array is None:
        return ()
    words = np.asarray(array).reshape(2, -1)
    ids, offsets = words[0], words[1]
    phrases: list[tuple[int, ...]] = []
    begin = 0
    for end in offsets:
        if end < 0:
            break
        if end > begin:
            phrases.append(tuple(int(t) for t in ids[begin:end]))
        begin = int(end)
    return tuple(phrases)


def _ends_with(sequence: Sequence[int], phrase: Sequence[int]) -> bool:
    return len(sequence) >= len(phrase) and list(sequence[len(sequence) - len(phrase) :]) == list(phrase)


def banned_tokens(sequence: Sequence[int], bad_words: Sequence[Sequence[int]]) -> list[int]:
    """Tokens ``bad_words`` forbid as the next token of ``sequence``."""
    return [phrase[-1] for phrase in bad_words if phrase and _ends_with(sequence, phrase[:-1])]


def apply_penalties(logits: Array, sequence: Sequence[int], request: GenerationRequest) -> Array:
    """Repetition penalty, temperature and bad words on one row's logits (a copy)."""
    out = np.array(logits, dtype=np.float32)
    if request.repetition_penalty != 1.0 and sequence:
        seen = np.unique(np.asarray(sequence, np.int64))
        values = out[seen]
        penalty = np.float32(request.repetition_penalty)
        out[seen] = np.where(values < 0, values * penalty, values / penalty)
    if request.sampling and request.beam_width == 1 and request.temperature not in (0.0, 1.0):
        out = out / np.float32(request.temperature)
    banned = banned_tokens(sequence, request.bad_words)
    if banned:
        out[banned] = layers.NEG_INF
    return out


def sample(logits: Array, request: GenerationRequest, rng: np.random.Generator, top_p: float | None = None) -> int:
    """FT's top-k / top-p draw from processed logits (``top_p``: the decayed value, else the request's)."""
    order = np.argsort(-logits, kind="stable")
    if request.top_k > 0:
        order = order[: request.top_k]
    chosen = logits[order].astype(np.float64)
    probs = np.exp(chosen - chosen.max())
    if request.top_k == 0:  # FT's top-p kernel normalises over the whole vocabulary
        probs = probs / np.exp(logits.astype(np.float64) - chosen.max()).sum()
    mass = probs.sum()
    p = request.top_p if top_p is None else top_p
    threshold = rng.random() * (p if p > 0 else 1.0) * mass
    index = int(np.searchsorted(np.cumsum(probs), threshold, side="right"))
    return int(order[min(index, len(order) - 1)])


def decayed_top_p(top_p: float, token: int, request: GenerationRequest) -> float:
    """FT's top-p after generating ``token`` (only top-p sampling decays; FT clamps out-of-range settings)."""
    decay = request.top_p_decay if 0.0 < request.top_p_decay <= 1.0 else 1.0
    floor = request.top_p_min if 0.0 < request.top_p_min <= 1.0 else 0.5
    if token == request.top_p_reset_id:
        return request.top_p
    return max(top_p * decay, floor)


def _finishes(sequence: Sequence[int], token: int, end_id: int, stop_words: Sequence[Sequence[int]]) -> bool:
    return token == end_id or any(_ends_with(sequence, phrase) for phrase in stop_words)


def _single(model: T5 | Gpt, request: GenerationRequest, end_id: int) -> list[Hypothesis]:
    prompt = list(request.input_ids)
    start_id = model.start_id if request.start_id is None else request.start_id
    cache, logits = model.start(np.asarray(prompt), 1, len(prompt) + request.max_new_tokens, start_id)
    history = [start_id] if model.family is Family.T5 else list(prompt)
    rng = np.random.default_rng(request.random_seed)
    hyp = Hypothesis([], 0.0)
    top_p = request.top_p
    decays = request.sampling and request.top_k == 0
    for step in range(request.max_new_tokens):
        processed = apply_penalties(logits[0], history, request)
        token = sample(processed, request, rng, top_p) if request.sampling else int(np.argmax(processed))
        log_prob = float(layers.log_softmax(processed)[token])
        hyp.score += log_prob
        hyp.log_probs.append(log_prob)
        hyp.tokens.append(token)
        history.append(token)
        if decays:
            top_p = decayed_top_p(top_p, token, request)
        if _finishes(history, token, end_id, request.stop_words) or step == request.max_new_tokens - 1:
            break
        logits = model.step(cache, np.array([token]))
    return [hyp]


def _beam(model: T5 | Gpt, request: GenerationRequest, end_id: int) -> list[Hypothesis]:
    """Hugging Face's beam search (transformers ``_beam_search``, ``early_stopping=False``) for one row."""
    beams = request.beam_width
    keep = 2 * beams
    prompt = list(request.input_ids)
    start_id = model.start_id if request.start_id is None else request.start_id
    prefix = [start_id] if model.family is Family.T5 else list(prompt)
    cache, logits = model.start(np.asarray(prompt), beams, len(prompt) + request.max_new_tokens, start_id)
    running: list[list[int]] = [[] for _ in range(beams)]
    running_log_probs: list[list[float]] = [[] for _ in range(beams)]
    running_scores = np.full(beams, MASKED, np.float32)
    running_scores[0] = 0.0
    finished: list[tuple[float, list[int], list[float]]] = []
    improvable = True
    penalty = request.len_penalty
    for step in range(request.max_new_tokens):
        log_probs = np.stack(
            [apply_penalties(layers.log_softmax(logits[b]), prefix + running[b], request) for b in range(beams)]
        )
        total = (log_probs + running_scores[:, None]).reshape(-1)
        top = np.argsort(-total, kind="stable")[:keep]
        top_scores = total[top]
        vocab = log_probs.shape[1]
        sources, tokens = top // vocab, top % vocab
        candidates = [running[s] + [int(t)] for s, t in zip(sources, tokens, strict=True)]
        candidate_log_probs = [
            running_log_probs[s] + [float(log_probs[s, t])] for s, t in zip(sources, tokens, strict=True)
        ]
        last_step = step == request.max_new_tokens - 1
        hits = np.array(
            [last_step or _finishes(prefix + c, c[-1], end_id, request.stop_words) for c in candidates], dtype=bool
        )
        order = np.argsort(-(top_scores + hits.astype(np.float32) * MASKED), kind="stable")[:beams]
        normalised = top_scores / np.float32((step + 1) ** penalty)
        if not improvable:
            normalised = normalised + MASKED
        just_done = hits & (np.arange(keep) < beams)
        normalised = normalised + (~just_done).astype(np.float32) * MASKED
        fresh = zip(normalised, candidates, candidate_log_probs, strict=True)
        merged = [*finished, *((float(s), c, lp) for s, c, lp in fresh)]
        merged_order = np.argsort(-np.array([m[0] for m in merged], np.float32), kind="stable")[:beams]
        finished = [merged[i] for i in merged_order]
        running = [candidates[i] for i in order]
        running_log_probs = [candidate_log_probs[i] for i in order]
        running_scores = (top_scores + hits.astype(np.float32) * MASKED)[order].astype(np.float32)
        if hits.all() or last_step:
            break
        # Hugging Face's stop heuristic: can the best running beam still beat the worst finished hypothesis?
        best_possible = running_scores[0] / np.float32((step + 1) ** penalty)
        all_done = len(finished) == beams and all(m[0] > MASKED / 2 for m in finished)
        worst = min(m[0] for m in finished) if all_done else float(MASKED)
        improvable = improvable and (not all_done or bool(best_possible > worst))
        if not improvable:
            break
        cache.reorder(sources[order])
        logits = model.step(cache, tokens[order])
    return [Hypothesis(tokens, score, log_probs) for score, tokens, log_probs in finished]


def generate(model: T5 | Gpt, requests: Sequence[GenerationRequest]) -> GenerationResult:
    """Run every request row; FT's output tensors for the batch."""
    rows: list[list[Hypothesis]] = []
    end_ids: list[int] = []
    for request in requests:
        if request.max_new_tokens < 1:
            raise ValueError("max_new_tokens must be at least 1")
        if not request.input_ids:
            raise ValueError("every request needs at least one input token")
        end_id = model.end_id if request.end_id is None else request.end_id
        end_ids.append(end_id)
        rows.append(_beam(model, request, end_id) if request.beam_width > 1 else _single(model, request, end_id))
    beams = max(len(r) for r in rows)
    echo = model.family is not Family.T5
    width = max((len(req.input_ids) if echo else 0) + req.max_new_tokens for req in requests)
    output = np.empty((len(rows), beams, width), np.int32)
    lengths = np.zeros((len(rows), beams), np.int32)
    scores = np.zeros((len(rows), beams), np.float32)
    token_log_probs = np.zeros((len(rows), beams, max(req.max_new_tokens for req in requests)), np.float32)
    generated: list[list[list[int]]] = []
    for b, (request, hyps, end_id) in enumerate(zip(requests, rows, end_ids, strict=True)):
        output[b] = end_id
        row: list[list[int]] = []
        for k, hyp in enumerate(hyps):
            sequence = (list(request.input_ids) if echo else []) + hyp.tokens
            output[b, k, : len(sequence)] = sequence
            lengths[b, k] = len(sequence)
            scores[b, k] = hyp.score
            token_log_probs[b, k, : len(hyp.log_probs)] = hyp.log_probs
            row.append(list(hyp.tokens))
        generated.append(row)
    return GenerationResult(output, lengths, scores, token_log_probs, generated)
