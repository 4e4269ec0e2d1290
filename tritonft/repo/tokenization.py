"""Tokenizer logic of the Python-backend ``preprocessing`` / ``postprocessing`` models, importable without Triton.

This module is copied verbatim into each rendered Python model's version directory as ``tritonft_tokenization.py``
(the Python backend puts that directory on ``sys.path``), so it must stay self-contained: numpy plus, lazily, the
``tokenizers`` or ``sentencepiece`` library. It must also run on Python 3.8 (the tests' tritonserver 2.33.0, the
FT image's server, has only a 3.8 stub): no subscripted ``collections.abc`` or builtin types outside annotations,
no ``X | Y`` outside annotations, no ``zip(strict=)``. Tokenization itself is always done by those libraries from
the model's own tokenizer files; nothing here implements BPE or Unigram.

Tensor conventions (batch dimension first, as Triton hands them over):

* prompts: ``[B, 1]`` BYTES (UTF-8);
* ``input_ids`` ``[B, L]`` uint32, padded on the right with ``pad_id``; ``input_lengths`` ``[B, 1]`` uint32;
* word lists (``bad_words_list`` / ``stop_words_list``): ``[B, 2, L]`` int32, FasterTransformer's layout: row 0 the
  flattened token ids of all phrases (padded with 0), row 1 the cumulative end offset of each phrase (padded with -1);
* FT outputs: ``output_ids`` ``[B, beams, T]`` and ``sequence_length`` ``[B, beams]``; the postprocessing model's:
  ``text_output`` ``[B, beams]``, ``output_lengths`` ``[B, beams]`` and ``output_tokens`` ``[B, beams, N]``.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

TOKENIZER_JSON = "tokenizer.json"
SENTENCEPIECE_MODEL = "spiece.model"
BPE_VOCAB = "vocab.json"
BPE_MERGES = "merges.txt"

TOKENIZER_FILE_SETS: tuple[tuple[str, ...], ...] = (
    (TOKENIZER_JSON,),
    (SENTENCEPIECE_MODEL,),
    (BPE_VOCAB, BPE_MERGES),
)
"""The tokenizer file sets understood, in order of preference: a ``tokenizers`` JSON (any family), a
SentencePiece model (T5), or GPT-2 style byte-level BPE ``vocab.json`` + ``merges.txt``."""


class TextTokenizer(Protocol):
    """The operations the Triton models need."""

    def encode(self, text: str, *, add_special_tokens: bool) -> list[int]: ...

    def encode_batch(self, texts: Sequence[str], *, add_special_tokens: bool) -> list[list[int]]: ...

    def decode(self, ids: Sequence[int]) -> str: ...


class HuggingFaceTokenizer:
    """A ``tokenizers.Tokenizer`` (from ``tokenizer.json`` or GPT-2 ``vocab.json`` + ``merges.txt``)."""

    def __init__(self, tokenizer: Any) -> None:
        self._tokenizer = tokenizer

    def encode(self, text: str, *, add_special_tokens: bool) -> list[int]:
        return list(self._tokenizer.encode(text, add_special_tokens=add_special_tokens).ids)

    def encode_batch(self, texts: Sequence[str], *, add_special_tokens: bool) -> list[list[int]]:
        if len(texts) == 1:  # encode_batch hands even one text to its thread pool: a wake-up per call
            return [self.encode(texts[0], add_special_tokens=add_special_tokens)]
        encoded = self._tokenizer.encode_batch(list(texts), add_special_tokens=add_special_tokens)
        return [list(e.ids) for e in encoded]

    def decode(self, ids: Sequence[int]) -> str:
        return str(self._tokenizer.decode([int(i) for i in ids], skip_special_tokens=True))


class SentencePieceTokenizer:
    """A SentencePiece model (T5's ``spiece.model``). ``append_id`` is added by :func:`encode_prompts`, not here."""

    def __init__(self, processor: Any) -> None:
        self._processor = processor

    def encode(self, text: str, *, add_special_tokens: bool) -> list[int]:
        return [int(i) for i in self._processor.encode(text)]

    def encode_batch(self, texts: Sequence[str], *, add_special_tokens: bool) -> list[list[int]]:
        if len(texts) == 1:  # a list is encoded on SentencePiece's thread pool, even a list of one
            return [self.encode(texts[0], add_special_tokens=add_special_tokens)]
        return [[int(i) for i in ids] for ids in self._processor.encode(list(texts))]

    def decode(self, ids: Sequence[int]) -> str:
        # Control symbols (<pad>, </s>) decode to the empty string.
        return str(self._processor.decode([int(i) for i in ids]))


def find_tokenizer_files(directory: Path) -> tuple[str, ...] | None:
    """The first complete tokenizer file set present in ``directory`` (see :data:`TOKENIZER_FILE_SETS`)."""
    for names in TOKENIZER_FILE_SETS:
        if all((directory / name).is_file() for name in names):
            return names
    return None


def load_tokenizer(directory: Path) -> TextTokenizer:
    """Load the tokenizer stored in ``directory``; ``FileNotFoundError`` names the files looked for."""
    names = find_tokenizer_files(directory)
    if names is None:
        wanted = " or ".join(" + ".join(group) for group in TOKENIZER_FILE_SETS)
        raise FileNotFoundError(f"no tokenizer in {directory}: expected {wanted}")
    if names == (TOKENIZER_JSON,):
        from tokenizers import Tokenizer

        return HuggingFaceTokenizer(Tokenizer.from_file(str(directory / TOKENIZER_JSON)))
    if names == (SENTENCEPIECE_MODEL,):
        import sentencepiece

        return SentencePieceTokenizer(sentencepiece.SentencePieceProcessor(model_file=str(directory / names[0])))
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    tokenizer = Tokenizer(models.BPE.from_file(str(directory / BPE_VOCAB), str(directory / BPE_MERGES)))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    return HuggingFaceTokenizer(tokenizer)


@dataclass(frozen=True)
class TokenizerSettings:
    """Per-model knobs, rendered into the Python models' ``config.pbtxt`` ``parameters``.

    ``pad_id`` pads ``input_ids`` (GPT: the end id, as FT's own GPT preprocessing does; T5: ``pad_token_id``).
    ``append_id`` (T5 with SentencePiece: ``</s>``) is appended to every prompt when the tokenizer does not add
    it itself. ``end_id`` cuts decoded outputs; ``max_input_len`` bounds prompts (longer ones are rejected, never
    truncated silently); ``default_output_len`` is used when a request does not say ``max_output_len``.
    """

    pad_id: int
    end_id: int
    max_input_len: int
    default_output_len: int
    append_id: int = -1

    @classmethod
    def from_parameters(cls, parameters: Mapping[str, Any]) -> TokenizerSettings:
        """Read Triton's ``parameters`` JSON (``{"key": {"string_value": "1"}}``) or a plain ``{"key": "1"}`` map."""

        def get(key: str, default: str | None = None) -> int:
            raw = parameters.get(key)
            value = raw.get("string_value") if isinstance(raw, Mapping) else raw
            if value is None:
                if default is None:
                    raise ValueError(f"model parameter {key!r} is missing; re-render the repository")
                value = default
            try:
                return int(value)
            except ValueError as exc:
                raise ValueError(f"model parameter {key!r} must be an integer, got {value!r}") from exc

        return cls(
            pad_id=get("pad_id"),
            end_id=get("end_id"),
            max_input_len=get("max_input_len"),
            default_output_len=get("default_output_len"),
            append_id=get("append_id", "-1"),
        )


def decode_utf8_rows(array: npt.NDArray[Any], what: str) -> list[str]:
    """One string per batch row of a ``[B, 1]`` (or ``[B]``) BYTES tensor; ``ValueError`` names the bad row."""
    # One tolist() and plain Python after it: every numpy call costs tens of µs when the stub wakes with cold caches.
    rows = np.asarray(array).reshape(len(array), -1).tolist()
    texts: list[str] = []
    for index, row in enumerate(rows):
        if len(row) != 1:
            raise ValueError(f"{what}: row {index} has {len(row)} elements; send exactly one string per row")
        value = row[0]
        if isinstance(value, (bytes, bytearray)):  # a tuple, not ``bytes | bytearray``: Python 3.8
            try:
                texts.append(bytes(value).decode("utf-8"))
            except UnicodeDecodeError as exc:
                raise ValueError(f"{what}: row {index} is not valid UTF-8 ({exc.reason})") from exc
        else:
            texts.append(str(value))
    return texts


def encode_prompts(
    tokenizer: TextTokenizer, texts: Sequence[str], settings: TokenizerSettings
) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.uint32]]:
    """Tokenize a batch of prompts: ``(input_ids [B, L], input_lengths [B, 1])``, right-padded with ``pad_id``."""
    encoded: list[list[int]] = []
    for index, ids in enumerate(tokenizer.encode_batch(texts, add_special_tokens=True) if texts else []):
        if settings.append_id >= 0 and (not ids or ids[-1] != settings.append_id):
            ids.append(settings.append_id)
        if not ids:
            raise ValueError(f"text_input: row {index} encodes to no tokens; send a non-empty prompt")
        if len(ids) > settings.max_input_len:
            raise ValueError(
                f"text_input: row {index} is {len(ids)} tokens long; this model accepts at most "
                f"{settings.max_input_len} (shorten the prompt or raise max_input_len in the model spec)"
            )
        encoded.append(ids)
    width = max((len(ids) for ids in encoded), default=1)
    padded = [ids + [settings.pad_id] * (width - len(ids)) for ids in encoded]
    input_ids = np.array(padded, dtype=np.uint32).reshape(len(encoded), width)
    lengths = np.array([[len(ids)] for ids in encoded], dtype=np.uint32).reshape(len(encoded), 1)
    return input_ids, lengths


def parse_phrases(text: str) -> list[str]:
    """Phrases of one word-list string: comma-separated, CSV quoting allowed (``'a, "b, c"'`` → ``a``, ``b, c``).

    The string is one row of phrases, so a line break is part of a phrase (``"\\n"`` is a common stop sequence),
    quoted or not: the csv module refuses an unquoted one, so line breaks are hidden from it and restored after.
    """
    if not text:
        return []
    spare = (chr(c) for c in range(0xE000, 0xF900) if chr(c) not in text)  # private-use: absent from the text
    hidden = {"\r": next(spare), "\n": next(spare)}
    for brk, stand_in in hidden.items():
        text = text.replace(brk, stand_in)
    phrases = next(csv.reader([text], skipinitialspace=True), [])
    for brk, stand_in in hidden.items():
        phrases = [phrase.replace(stand_in, brk) for phrase in phrases]
    return [phrase for phrase in phrases if phrase]


def phrase_forms(phrase: str) -> tuple[str, str] | tuple[str]:
    """The texts a phrase is matched as: as written and, unless it starts with whitespace, after a space.

    FasterTransformer matches token sequences. Byte-level BPE (GPT-2, GPT-J) folds the space before a word into the
    word's first token, so ``"brown fox"`` alone never matches the ``" brown fox"`` a model generates mid-sentence;
    both forms are sent. SentencePiece (T5) encodes both forms alike, and the duplicate is dropped.
    """
    return (phrase,) if phrase[:1].isspace() else (phrase, " " + phrase)


def no_words(batch: int) -> npt.NDArray[np.int32]:
    """FasterTransformer's empty word list ``[B, 2, 1]``: ids ``[0]``, offsets ``[-1]`` (no phrase ends anywhere)."""
    return np.array([[[0], [-1]]] * batch, dtype=np.int32).reshape(batch, 2, 1)


def to_word_list(tokenizer: TextTokenizer, phrase_rows: Sequence[Sequence[str]]) -> npt.NDArray[np.int32]:
    """FasterTransformer word-list tensor ``[B, 2, L]``: flattened phrase ids and cumulative end offsets.

    Each phrase contributes the token sequences of its :func:`phrase_forms` (distinct ones only). A row without
    phrases becomes ids ``[0, ...]`` and offsets ``[-1, ...]`` (FT's "no words"); ``L`` is at least 1.
    """
    form_rows = [[form for phrase in phrases for form in phrase_forms(phrase)] for phrases in phrase_rows]
    every_form = [form for forms in form_rows for form in forms]
    if not every_form:
        return no_words(len(form_rows))
    encoded = iter(tokenizer.encode_batch(every_form, add_special_tokens=False))
    flat_rows: list[list[int]] = []
    offset_rows: list[list[int]] = []
    for forms in form_rows:
        flat: list[int] = []
        offsets: list[int] = []
        seen: set[tuple[int, ...]] = set()
        for ids in (next(encoded) for _ in forms):
            if not ids or tuple(ids) in seen:
                continue
            seen.add(tuple(ids))
            flat.extend(ids)
            offsets.append(len(flat))
        flat_rows.append(flat)
        offset_rows.append(offsets)
    width = max([1, *(len(flat) for flat in flat_rows)])
    result = np.zeros((len(flat_rows), 2, width), dtype=np.int32)
    result[:, 1, :] = -1
    for row, flat in enumerate(flat_rows):  # no zip(strict=): Python 3.8
        result[row, 0, : len(flat)] = flat
        result[row, 1, : len(offset_rows[row])] = offset_rows[row]
    return result


def output_lengths(
    requested: npt.NDArray[Any] | None, batch: int, settings: TokenizerSettings
) -> npt.NDArray[np.uint32]:
    """``request_output_len`` ``[B, 1]``: the request's value per row, or ``default_output_len``."""
    if requested is None:
        return np.full((batch, 1), settings.default_output_len, dtype=np.uint32)
    values = np.asarray(requested).reshape(batch, -1)[:, :1].astype(np.int64)
    if (values < 1).any():
        raise ValueError("max_output_len: every row must be at least 1")
    return values.astype(np.uint32)


def preprocess(
    tokenizer: TextTokenizer, settings: TokenizerSettings, inputs: Mapping[str, npt.NDArray[Any]]
) -> dict[str, npt.NDArray[Any]]:
    """The whole ``preprocessing`` model: request tensors by input name → response tensors by output name.

    Inputs: ``text_input`` (required), ``max_output_len``, ``bad_words``, ``stop_words`` (optional; word lists are
    one comma-separated string per row). Outputs: ``input_ids``, ``input_lengths``, ``request_output_len``,
    ``is_return_log_probs`` (always true: FT's ``output_log_probs`` is an ensemble output), and
    ``bad_words_list`` / ``stop_words_list`` always: FT's empty word list (:func:`no_words`) when the request has
    no ``bad_words`` / ``stop_words``. An ensemble's internal tensors cannot be optional before Triton core PR #298
    (Dec 2023): on tritonserver 2.33.0 (NGC 23.04, the FT image's server) a step output that is not produced
    deadlocks the ensemble ("at least one output is not set while no more ensemble steps can be made").
    """
    if "text_input" not in inputs:
        raise ValueError("text_input is required: one UTF-8 prompt per batch row")
    texts = decode_utf8_rows(inputs["text_input"], "text_input")
    input_ids, input_lengths = encode_prompts(tokenizer, texts, settings)
    outputs: dict[str, npt.NDArray[Any]] = {
        "input_ids": input_ids,
        "input_lengths": input_lengths,
        "request_output_len": output_lengths(inputs.get("max_output_len"), len(texts), settings),
        # FT returns each generated token's log-probability only when asked; asked always, so the ensemble's
        # output_log_probs exists for every request (an ensemble output a step may not produce fails the call).
        "is_return_log_probs": np.ones((len(texts), 1), dtype=np.bool_),
    }
    for source, target in (("bad_words", "bad_words_list"), ("stop_words", "stop_words_list")):
        raw = inputs.get(source)
        if raw is None:
            outputs[target] = no_words(len(texts))
            continue
        rows = [parse_phrases(text) for text in decode_utf8_rows(raw, source)]
        if len(rows) != len(texts):
            raise ValueError(f"{source}: {len(rows)} rows for {len(texts)} prompts; send one string per prompt")
        outputs[target] = to_word_list(tokenizer, rows)
    return outputs


def generated_tokens(ids: Sequence[int] | npt.NDArray[Any], length: int, start: int, end_id: int) -> list[int]:
    """The tokens of one beam (1-D) between ``start`` (prompt length, GPT) and ``length``, cut at the first
    ``end_id``."""
    tokens = [int(t) for t in ids[start:length]]
    if end_id in tokens:
        tokens = tokens[: tokens.index(end_id)]
    return tokens


def token_texts(tokenizer: TextTokenizer, tokens: Sequence[int]) -> list[str]:
    """Each token's share of ``decode(tokens)``: the pieces concatenate to the decoded text. A token that ends inside
    a multi-byte character (byte-level BPE) gets ``""`` and the character goes with the token that completes it.

    Decoded incrementally from the last emitted token on (a window, not the whole prefix), as streaming detokenizers
    do: SentencePiece's leading-space rule then applies the same to both texts compared."""
    pieces: list[str] = []
    prefix, read = 0, 0
    for index in range(len(tokens)):
        before = tokenizer.decode(tokens[prefix:read]) if read > prefix else ""
        text = tokenizer.decode(tokens[prefix : index + 1])
        last = index == len(tokens) - 1
        if len(text) > len(before) and (last or not text.endswith("\ufffd")):
            pieces.append(text[len(before) :])
            prefix, read = read, index + 1
        else:
            pieces.append("")
    return pieces


def postprocess_outputs(
    tokenizer: TextTokenizer,
    settings: TokenizerSettings,
    output_ids: npt.NDArray[Any],
    sequence_length: npt.NDArray[Any],
    input_lengths: npt.NDArray[Any] | None = None,
    *,
    return_tokens: bool = False,
) -> dict[str, npt.NDArray[Any]]:
    """Decode FT's ``output_ids [B, beams, T]``: ``text_output [B, beams]`` (UTF-8 bytes), ``output_lengths
    [B, beams]`` (int32: how many token ids each text was decoded from) and ``output_tokens [B, beams, N]`` (UTF-8
    bytes: each of those tokens' text, :func:`token_texts`, right-padded with ``b""``; ``N`` is 0 unless
    ``return_tokens``).

    With ``input_lengths`` (GPT models, non-streaming) the prompt is stripped, so the text is the completion only;
    without it the whole sequence is decoded (T5 outputs hold only generated tokens anyway).
    """
    ids = np.asarray(output_ids)
    if ids.ndim == 2:
        ids = ids[:, np.newaxis, :]
    batch, beams = ids.shape[0], ids.shape[1]
    # Plain lists from here: numpy calls are what costs most when the stub wakes with cold caches.
    rows = ids.tolist()
    lengths = np.asarray(sequence_length).reshape(batch, -1).tolist()
    starts = np.asarray(input_lengths).reshape(batch, -1).tolist() if input_lengths is not None else [[0]] * batch
    texts, counts, pieces = [], [], []
    for b in range(batch):
        row, row_counts, row_pieces = [], [], []
        for k in range(beams):
            length = int(lengths[b][min(k, len(lengths[b]) - 1)])
            tokens = generated_tokens(rows[b][k], length, int(starts[b][0]), settings.end_id)
            row.append(tokenizer.decode(tokens).encode("utf-8"))
            row_counts.append(len(tokens))
            if return_tokens:
                row_pieces.append([piece.encode("utf-8") for piece in token_texts(tokenizer, tokens)])
        texts.append(row)
        counts.append(row_counts)
        pieces.append(row_pieces)
    text_output = np.empty((batch, beams), dtype=object)
    text_output[:] = texts
    width = max((len(p) for row_pieces in pieces for p in row_pieces), default=0)
    output_tokens = np.full((batch, beams, width), b"", dtype=object)
    for b, row_pieces in enumerate(pieces):
        for k, beam_pieces in enumerate(row_pieces):
            output_tokens[b, k, : len(beam_pieces)] = beam_pieces
    return {
        "text_output": text_output,
        "output_lengths": np.array(counts, dtype=np.int32).reshape(batch, beams),
        "output_tokens": output_tokens,
    }


def postprocess(
    tokenizer: TextTokenizer,
    settings: TokenizerSettings,
    output_ids: npt.NDArray[Any],
    sequence_length: npt.NDArray[Any],
    input_lengths: npt.NDArray[Any] | None = None,
) -> npt.NDArray[np.object_]:
    """Only the ``text_output [B, beams]`` of :func:`postprocess_outputs`."""
    return postprocess_outputs(tokenizer, settings, output_ids, sequence_length, input_lengths)["text_output"]


WORD_LISTS = ("bad_words_list", "stop_words_list")


def _own_widths(outputs: dict[str, npt.NDArray[Any]]) -> dict[str, npt.NDArray[Any]]:
    """Trim a slice of merged preprocessing outputs to the widths its rows alone would have had."""
    trimmed = dict(outputs)
    width = int(np.asarray(outputs["input_lengths"]).max(initial=1))
    trimmed["input_ids"] = outputs["input_ids"][:, :width]
    for name in WORD_LISTS:
        if name in outputs:
            trimmed[name] = outputs[name][:, :, : max(1, int(outputs[name][:, 1, :].max(initial=-1)))]
    return trimmed


def _merged(requests: Sequence[Mapping[str, npt.NDArray[Any]]], pad: int) -> dict[str, npt.NDArray[Any]]:
    """Concatenate the requests' tensors along the batch axis, right-padding every other axis with ``pad``."""
    merged: dict[str, npt.NDArray[Any]] = {}
    for name in requests[0]:
        arrays = [np.asarray(request[name]) for request in requests]
        if len({a.ndim for a in arrays}) != 1:
            raise ValueError(f"{name}: requests differ in rank")
        widest = [max(a.shape[axis] for a in arrays) for axis in range(1, arrays[0].ndim)]
        padded = []
        for array in arrays:
            target = (array.shape[0], *widest)
            if array.shape == target:
                padded.append(array)
                continue
            out = np.full(target, b"" if array.dtype == np.object_ else pad, dtype=array.dtype)
            out[tuple(slice(0, n) for n in array.shape)] = array
            padded.append(out)
        merged[name] = np.concatenate(padded)
    return merged


if TYPE_CHECKING:  # an alias for the checker only: Python 3.8 (the 2.33.0 server's stub) cannot subscript ABCs
    Request = Mapping[str, npt.NDArray[Any]]
Result = TypeVar("Result")


def _served_together(
    requests: Sequence[Request],
    serve: Callable[[Request], Result],
    pad: int,
    rows_of: Callable[[Result, int, int], Result],
) -> list[Result | ValueError]:
    """``serve`` once over the merged rows of each group of requests with the same inputs, then ``rows_of`` splits
    the result back. When a merged call fails, each request of the group is served alone, so a bad request gets
    its own ``ValueError`` and the others their results."""
    results: dict[int, Result | ValueError] = {}
    groups: dict[frozenset[str], list[int]] = {}
    for index, request in enumerate(requests):
        groups.setdefault(frozenset(request), []).append(index)
    for members in groups.values():
        together = _merged_call(requests, members, serve, pad, rows_of) if len(members) > 1 else None
        if together is not None:
            results.update({index: together[at] for at, index in enumerate(members)})
            continue
        for index in members:
            try:
                results[index] = serve(requests[index])
            except ValueError as exc:
                results[index] = exc
    return [results[index] for index in range(len(requests))]


def _merged_call(
    requests: Sequence[Request],
    members: list[int],
    serve: Callable[[Request], Result],
    pad: int,
    rows_of: Callable[[Result, int, int], Result],
) -> list[Result] | None:
    """Each member's rows of one ``serve`` over the members' merged rows; None when that call fails."""
    try:
        merged = serve(_merged([requests[i] for i in members], pad))
    except ValueError:
        return None
    results, start = [], 0
    for index in members:
        rows = len(next(iter(requests[index].values())))
        results.append(rows_of(merged, start, start + rows))
        start += rows
    return results


def preprocess_requests(
    tokenizer: TextTokenizer, settings: TokenizerSettings, requests: Sequence[Request]
) -> list[dict[str, npt.NDArray[Any]] | ValueError]:
    """:func:`preprocess` for several requests at once (what Triton's dynamic batcher hands the model).

    Requests with the same inputs are tokenized together, one batched tokenizer call per input, and their outputs
    split back, each trimmed to the widths it would have alone (so every request gets exactly what
    ``preprocess`` would give it). A request with a bad input gets its own ``ValueError``; the others are served.
    """
    return _served_together(
        requests,
        lambda request: preprocess(tokenizer, settings, request),
        0,
        lambda outputs, start, end: _own_widths({name: array[start:end] for name, array in outputs.items()}),
    )


def postprocess_requests(
    tokenizer: TextTokenizer, settings: TokenizerSettings, requests: Sequence[Request]
) -> list[dict[str, npt.NDArray[Any]] | ValueError]:
    """:func:`postprocess_outputs` for several requests at once: one decode pass over the rows of requests with the
    same inputs (``output_ids`` padded to the longest; ``sequence_length`` bounds every row), split back per request.
    Each request needs ``output_ids`` and ``sequence_length``; ``input_lengths`` and ``return_tokens`` (BOOL: any
    row true returns ``output_tokens``) are optional."""

    def one(request: Request) -> dict[str, npt.NDArray[Any]]:
        if "output_ids" not in request or "sequence_length" not in request:
            raise ValueError("postprocessing needs both output_ids and sequence_length")
        flags = request.get("return_tokens")
        return postprocess_outputs(
            tokenizer,
            settings,
            request["output_ids"],
            request["sequence_length"],
            request.get("input_lengths"),
            return_tokens=flags is not None and bool(np.any(flags)),
        )

    def rows_of(outputs: dict[str, npt.NDArray[Any]], start: int, end: int) -> dict[str, npt.NDArray[Any]]:
        own = {name: array[start:end] for name, array in outputs.items()}
        if own["output_tokens"].shape[2]:  # each beam has one piece per token: as wide as its longest beam
            own["output_tokens"] = own["output_tokens"][:, :, : int(own["output_lengths"].max(initial=0))]
        return own

    return _served_together(requests, one, settings.end_id, rows_of)
