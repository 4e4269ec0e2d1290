"""Texts -> the encoder's input tensors, importable without Triton (the tokenizer model's logic).

Copied verbatim into the rendered tokenizer model's version directory as ``tritonft_encoder_tokenize.py`` (the
Python backend puts that directory on ``sys.path``), so it stays self-contained: numpy and, lazily, ``tokenizers``.

Tokenization is the checkpoint's own ``tokenizer.json`` (``tokenizers`` library) with special tokens, exactly as
transformers applies it; the padding and truncation settings stored in ``tokenizer.json`` are switched off
(all-MiniLM-L6-v2's file pads everything to 128 and truncates at 128, while the model takes 256). A text longer
than ``max_seq_length`` tokens, an empty text, or one that is not UTF-8 is refused with an error naming it —
never silently truncated, so an embedding always stands for the whole text.

Outputs (batch first, padded on the right to the longest text of the batch): ``input_ids``, ``attention_mask``,
``token_type_ids`` ``[B, L]`` int64 and ``num_tokens`` ``[B, 1]`` int32 (the usage count, special tokens included).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt


class EncoderInputError(ValueError):
    """A request the encoder cannot answer; the message names the text and the fix."""


class EncoderTokenizer:
    def __init__(self, tokenizer_json: Path | str, max_seq_length: int) -> None:
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(tokenizer_json))
        tokenizer.no_padding()
        tokenizer.no_truncation()
        self._tokenizer: Any = tokenizer
        self.max_seq_length = max_seq_length

    def encode(self, texts: Sequence[str]) -> dict[str, npt.NDArray[Any]]:
        """One request's texts as padded tensors; raises :class:`EncoderInputError` for a bad text."""
        (result,) = self.encode_requests([texts])
        if isinstance(result, EncoderInputError):
            raise result
        return result

    def encode_requests(
        self, requests: Sequence[Sequence[str]]
    ) -> list[dict[str, npt.NDArray[Any]] | EncoderInputError]:
        """Several requests tokenized in one batched call and padded to one common width, so the model after the
        tokenizer can batch them together; a bad request gets its error, the others their tensors."""
        problems: list[EncoderInputError | None] = [_empty_problem(texts) for texts in requests]
        flat = [text for texts, problem in zip(requests, problems, strict=True) if problem is None for text in texts]
        encodings = iter(self._tokenizer.encode_batch(flat, add_special_tokens=True) if flat else [])
        per_request: list[list[Any]] = []
        for index, (texts, problem) in enumerate(zip(requests, problems, strict=True)):
            ours = [next(encodings) for _ in texts] if problem is None else []
            per_request.append(ours)
            for position, encoding in enumerate(ours):
                if len(encoding.ids) > self.max_seq_length:
                    problems[index] = EncoderInputError(
                        f"input[{position}] is {len(encoding.ids)} tokens long, over this model's limit of "
                        f"{self.max_seq_length} tokens; shorten or split the text"
                    )
                    break
        good = [e for ours, problem in zip(per_request, problems, strict=True) if problem is None for e in ours]
        width = max((len(e.ids) for e in good), default=0)
        results: list[dict[str, npt.NDArray[Any]] | EncoderInputError] = []
        for ours, problem in zip(per_request, problems, strict=True):
            results.append(problem if problem is not None else _padded(ours, width))
        return results


def _empty_problem(texts: Sequence[str]) -> EncoderInputError | None:
    if not texts:
        return EncoderInputError("no input text; send at least one non-empty string")
    for index, text in enumerate(texts):
        if not text:
            return EncoderInputError(f"input[{index}] is an empty string; send non-empty text")
    return None


def _padded(encodings: Sequence[Any], width: int) -> dict[str, npt.NDArray[Any]]:
    count = len(encodings)
    ids = np.zeros((count, width), dtype=np.int64)
    mask = np.zeros((count, width), dtype=np.int64)
    types = np.zeros((count, width), dtype=np.int64)
    lengths = []
    for row, encoding in enumerate(encodings):
        n = len(encoding.ids)
        lengths.append(n)
        ids[row, :n] = encoding.ids
        mask[row, :n] = 1
        types[row, :n] = encoding.type_ids
    return {
        "input_ids": ids,
        "attention_mask": mask,
        "token_type_ids": types,
        "num_tokens": np.array(lengths, dtype=np.int32).reshape(-1, 1),
    }


def decode_texts(array: npt.NDArray[Any]) -> list[str]:
    """A ``[B]`` or ``[B, 1]`` BYTES tensor as texts; raises :class:`EncoderInputError` on non-UTF-8 bytes."""
    texts = []
    for index, item in enumerate(np.asarray(array, dtype=object).reshape(-1)):
        if isinstance(item, str):
            texts.append(item)
            continue
        try:
            texts.append(bytes(item).decode("utf-8"))
        except (UnicodeDecodeError, TypeError) as exc:
            raise EncoderInputError(f"input[{index}] is not UTF-8 text ({exc}); send UTF-8 strings") from exc
    return texts
