"""FasterTransformer's Triton tensors around :func:`~tritonft.reference.decoding.generate` (numpy only).

The reference engine (``tritonft repo --engine reference``) serves the reference behind the rendered FT model's
exact ``config.pbtxt``; its ``model.py`` only moves tensors between Triton and these functions. Inputs arrive as
the Python backend hands them over, batch first, one request at a time: ``input_ids [B, L]``, the prompt lengths
``[B]`` (``input_lengths`` for GPT, ``sequence_length`` for T5), the output length (``request_output_len [B, 1]``
for GPT, ``max_output_len [B]`` for T5) and the optional per-row scalars ``[B]`` and word lists ``[B, 2, L]``.

Every input the rendered configs declare is honoured or refused with a message naming it:

* ``runtime_top_k``, ``runtime_top_p``, ``temperature``, ``len_penalty``, ``repetition_penalty``,
  ``random_seed``, ``beam_width`` (one value for the request, as FT takes it), ``start_id`` (T5's decoder start;
  GPT ignores it), ``end_id``, ``bad_words_list``, ``stop_words_list``, ``top_p_decay``, ``top_p_min``,
  ``top_p_reset_ids``, ``is_return_log_probs``: as :mod:`.decoding` documents;
* the output length is each row's own (FT's GPT runs every row to the batch's longest and pads; rows that end
  earlier get the same tokens either way);
* ``beam_search_diversity_rate`` other than 0 and ``is_return_context_embeddings`` are refused (the reference
  does not implement them); ``prompt_learning_task_name_ids``, ``ia3_tasks`` other than 0 are refused (the
  converter writes no prompt tables and no IA3 adapters, so there is nothing to select).

Outputs (FT's names and layout): ``output_ids [B, beams, T]``, ``sequence_length [B, beams]``, GPT's
``response_input_lengths [B]``, and with ``is_return_log_probs`` ``cum_log_probs [B, beams]`` and
``output_log_probs [B, beams, T_new]``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np

from tritonft.reference.decoding import GenerationRequest, GenerationResult, parse_word_list
from tritonft.spec import Family

Array = np.ndarray[Any, Any]

REFUSED_WHEN_SET = {
    "beam_search_diversity_rate": "diverse beam search is not implemented by the reference engine; send 0",
    "is_return_context_embeddings": "context embeddings are not implemented by the reference engine",
    "prompt_learning_task_name_ids": "the converted checkpoint has no prompt-learning tasks; send 0 or leave it out",
    "ia3_tasks": "the converted checkpoint has no IA3 adapters; send 0 or leave it out",
}
"""Inputs FT declares that the reference cannot honour: refused when any row sets them."""


def prompt_lengths_input(family: Family) -> str:
    return "sequence_length" if family is Family.T5 else "input_lengths"


def output_length_input(family: Family) -> str:
    return "max_output_len" if family is Family.T5 else "request_output_len"


def per_row(inputs: Mapping[str, Array], name: str, batch: int) -> Array | None:
    """The first value of each row of input ``name`` (``[B]``, ``[B, 1]`` or one row for all), or ``None``."""
    value = inputs.get(name)
    if value is None:
        return None
    rows = np.asarray(value).reshape(len(value), -1) if np.ndim(value) else np.asarray(value).reshape(1, 1)
    if rows.shape[1] == 0:
        raise ValueError(f"{name}: empty; send one value per row")
    if rows.shape[0] == batch:
        return rows[:, 0]
    if rows.shape[0] == 1:
        return np.repeat(rows[:, 0], batch)
    raise ValueError(f"{name}: {rows.shape[0]} rows for a batch of {batch}; send one value per row")


def _values(inputs: Mapping[str, Array], name: str, batch: int, default: Any, cast: Callable[[Any], Any]) -> list[Any]:
    rows = per_row(inputs, name, batch)
    return [cast(default)] * batch if rows is None else [cast(v) for v in rows]


def _word_lists(inputs: Mapping[str, Array], name: str, batch: int) -> list[tuple[tuple[int, ...], ...]]:
    value = inputs.get(name)
    if value is None:
        return [()] * batch
    words = np.asarray(value)
    if words.ndim == 2:
        words = words[np.newaxis]
    if words.ndim != 3 or words.shape[1] != 2 or words.shape[0] not in (1, batch):
        raise ValueError(f"{name}: shape {list(words.shape)}; FasterTransformer's word list is [batch, 2, L]")
    phrases = [parse_word_list(row) for row in words]
    return phrases * batch if len(phrases) == 1 and batch > 1 else phrases


def requests_from_inputs(inputs: Mapping[str, Array], family: Family, vocab_size: int) -> list[GenerationRequest]:
    """One :class:`GenerationRequest` per row of an FT request; ``ValueError`` naming the input that is wrong."""
    lengths_name, output_name = prompt_lengths_input(family), output_length_input(family)
    for required in ("input_ids", lengths_name, output_name):
        if required not in inputs:
            raise ValueError(f"{required} is required")
    ids = np.asarray(inputs["input_ids"])
    if ids.ndim == 1:
        ids = ids[np.newaxis]
    batch = ids.shape[0]
    for name, why in REFUSED_WHEN_SET.items():
        given = per_row(inputs, name, batch)
        if given is not None and np.any(given):
            raise ValueError(f"{name}: {why}")
    lengths = _values(inputs, lengths_name, batch, 0, int)
    outputs = _values(inputs, output_name, batch, 0, int)
    beams = {int(b) for b in _values(inputs, "beam_width", batch, 1, int)}
    if len(beams) != 1:
        raise ValueError(f"beam_width: rows ask for {sorted(beams)}; FasterTransformer takes one beam width per batch")
    beam_width = max(beams.pop(), 1)
    top_k = _values(inputs, "runtime_top_k", batch, 0, int)
    top_p = _values(inputs, "runtime_top_p", batch, 0.0, float)
    temperature = _values(inputs, "temperature", batch, 1.0, float)
    len_penalty = _values(inputs, "len_penalty", batch, 0.0, float)
    repetition = _values(inputs, "repetition_penalty", batch, 1.0, float)
    seed = _values(inputs, "random_seed", batch, 0, int)
    decay = _values(inputs, "top_p_decay", batch, 1.0, float)
    floor = _values(inputs, "top_p_min", batch, 1e-6, float)
    reset = _values(inputs, "top_p_reset_ids", batch, -1, int)
    end = per_row(inputs, "end_id", batch)
    start = per_row(inputs, "start_id", batch)
    bad, stop = _word_lists(inputs, "bad_words_list", batch), _word_lists(inputs, "stop_words_list", batch)
    requests = []
    for row in range(batch):
        if not 0 < lengths[row] <= ids.shape[1]:
            raise ValueError(
                f"{lengths_name}: row {row} says {lengths[row]} tokens but input_ids has {ids.shape[1]} columns; "
                "send the real prompt length (at least 1)"
            )
        if outputs[row] < 1:
            raise ValueError(f"{output_name}: row {row} is {outputs[row]}; ask for at least 1 token")
        prompt = tuple(int(t) for t in ids[row, : lengths[row]])
        if max(prompt) >= vocab_size:
            raise ValueError(
                f"input_ids: row {row} holds token {max(prompt)} but the model's vocabulary is {vocab_size}"
            )
        requests.append(
            GenerationRequest(
                prompt,
                outputs[row],
                beam_width=beam_width,
                top_k=top_k[row],
                top_p=top_p[row],
                temperature=temperature[row],
                len_penalty=len_penalty[row],
                repetition_penalty=repetition[row],
                random_seed=seed[row],
                end_id=None if end is None else int(end[row]),
                bad_words=bad[row],
                stop_words=stop[row],
                start_id=None if start is None or family is not Family.T5 else int(start[row]),
                top_p_decay=decay[row],
                top_p_min=floor[row],
                top_p_reset_id=reset[row],
            )
        )
    return requests


def wants_log_probs(inputs: Mapping[str, Array]) -> bool:
    flags = inputs.get("is_return_log_probs")
    return flags is not None and bool(np.any(flags))


def output_tensors(
    result: GenerationResult, requests: list[GenerationRequest], family: Family, log_probs: bool
) -> dict[str, Array]:
    """FT's outputs for ``result`` (dtypes: int32/float32; the model casts to the config's declared types)."""
    tensors: dict[str, Array] = {"output_ids": result.output_ids, "sequence_length": result.sequence_length}
    if family is not Family.T5:
        tensors["response_input_lengths"] = np.array([len(r.input_ids) for r in requests], np.int32)
    if log_probs:
        tensors["cum_log_probs"] = result.cum_log_probs
        tensors["output_log_probs"] = result.output_log_probs
    return tensors


def streamed_steps(
    result: GenerationResult, requests: list[GenerationRequest], family: Family, end_ids: list[int]
) -> Iterator[GenerationResult]:
    """The partial results a decoupled (streaming) FT model sends: after each generated step, every row's tokens
    so far (the rest padded with its end id), until the longest row is complete."""
    starts = np.array([len(r.input_ids) if family is not Family.T5 else 0 for r in requests])[:, np.newaxis]
    steps = int((result.sequence_length - starts).max(initial=0))
    positions = np.arange(result.output_ids.shape[2])
    pad = np.array(end_ids, np.int32)[:, np.newaxis, np.newaxis]
    for step in range(1, steps + 1):
        lengths = np.minimum(result.sequence_length, starts + step).astype(np.int32)
        ids = np.where(positions[np.newaxis, np.newaxis] < lengths[..., np.newaxis], result.output_ids, pad)
        log_probs = result.output_log_probs.copy()
        log_probs[..., step:] = 0.0
        yield GenerationResult(ids.astype(np.int32), lengths, log_probs.sum(axis=-1), log_probs)


def local_checkpoint(checkpoint_path: str, model_dir: Path) -> Path:
    """Where ``model_checkpoint_path`` (as rendered for the server) is here: itself when it exists, else the same
    path inside this model's directory (a repository served from another place than it was rendered for)."""
    path = Path(checkpoint_path)
    if path.is_dir():
        return path
    parts = PurePosixPath(checkpoint_path).parts
    if model_dir.name in parts:
        return model_dir.joinpath(*parts[parts.index(model_dir.name) + 1 :])
    return path
