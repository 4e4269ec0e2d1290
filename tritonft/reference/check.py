"""``tritonft verify --generate``: does a converted checkpoint *generate* what it should?

Two checks, on the reference (:mod:`tritonft.reference`):

* ``--expected-tokens FILE``: every case of the file (the golden format of ``tests/tritonft/reference/golden``: prompt
  token ids, ``greedy`` or ``beam`` with its width and length penalty, optionally an end id, the expected generated
  ids per beam) must be reproduced token for token; a mismatch names the case, the step and both tokens.
* otherwise the probe's judgement (:mod:`tritonft.probe.expectations`) on the probe's own prompts, tokenized with
  the model's tokenizer: T5 must reach the BLEU threshold on the bundled translations; GPT-2/GPT-J must continue
  the prompt with a non-empty, non-degenerate continuation (not one token repeated).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tritonft import option_file
from tritonft.errors import UserError
from tritonft.reference.decoding import GenerationRequest, generate
from tritonft.reference.models import T5, Gpt
from tritonft.spec import Family

JUDGED_OUTPUT_TOKENS = {Family.T5: 64, Family.GPT2: 32, Family.GPTJ: 32}
"""Greedy tokens generated per judged prompt (a translation of one sentence; a short continuation)."""


@dataclass(frozen=True)
class ExpectedCase:
    prompt: tuple[int, ...]
    outputs: tuple[tuple[int, ...], ...]
    beam_width: int = 1
    len_penalty: float = 0.0
    end_id: int | None = None

    @property
    def label(self) -> str:
        mode = "greedy" if self.beam_width == 1 else f"beam search (width {self.beam_width})"
        return f"{mode} on prompt {list(self.prompt)}"


def load_expected(path: Path) -> tuple[int, list[ExpectedCase]]:
    """``(max_new_tokens, cases)`` from an expected-tokens JSON file; ``UserError`` naming what is wrong."""
    raw = option_file.read_json("--expected-tokens", path)
    try:
        cases = [
            ExpectedCase(
                tuple(int(t) for t in case["prompt"]),
                tuple(tuple(int(t) for t in row) for row in case["outputs"]),
                int(case.get("beam_width", 1)),
                float(case.get("len_penalty", 0.0)),
                int(case["end_id"]) if case.get("end_id") is not None else None,
            )
            for case in raw["cases"]
        ]
        max_new = int(raw["max_new_tokens"])
    except (KeyError, TypeError, ValueError) as exc:
        raise UserError(
            f"--expected-tokens {path}: expected {{'max_new_tokens': N, 'cases': [{{'prompt': [ids], "
            f"'outputs': [[ids], ...], 'beam_width'?, 'len_penalty'?, 'end_id'?}}]}} ({exc!r} is missing or malformed)"
        ) from exc
    if not cases:
        raise UserError(f"--expected-tokens {path}: no cases")
    return max_new, cases


def first_difference(expected: tuple[int, ...], got: list[int]) -> str:
    for step, (want, have) in enumerate(zip(expected, got, strict=False)):
        if want != have:
            return f"step {step}: expected token {want}, got {have}"
    return f"expected {len(expected)} tokens, got {len(got)}"


def expected_token_problems(model: T5 | Gpt, max_new_tokens: int, cases: list[ExpectedCase]) -> list[str]:
    """One line per case whose generation differs from the expected tokens."""
    problems = []
    for case in cases:
        request = GenerationRequest(
            case.prompt, max_new_tokens, beam_width=case.beam_width, len_penalty=case.len_penalty, end_id=case.end_id
        )
        got = generate(model, [request]).generated[0]
        for beam, expected in enumerate(case.outputs):
            have = got[beam] if beam < len(got) else []
            if tuple(have) != expected:
                where = f" beam {beam}" if case.beam_width > 1 else ""
                problems.append(f"{case.label}{where}: {first_difference(expected, have)} (got {have})")
                break
    return problems


def degenerate(tokens: list[int]) -> bool:
    """A continuation that is empty or one token repeated (what a broken GPT usually produces)."""
    return len(set(tokens)) < 2


def judged_answers(model: T5 | Gpt, tokenizer_dir: Path, prompts: list[str]) -> tuple[list[str], list[list[int]]]:
    """Greedy answers (text, generated ids cut at the end id) to ``prompts``, tokenized as the ensemble does."""
    from tritonft.repo.tokenization import TokenizerSettings, encode_prompts, generated_tokens, load_tokenizer

    try:
        tokenizer = load_tokenizer(tokenizer_dir)
    except FileNotFoundError as exc:
        raise UserError(f"--tokenizer: {exc}; pass the Hugging Face download directory") from exc
    family = model.family
    settings = TokenizerSettings(
        pad_id=model.end_id if family is not Family.T5 else 0,
        end_id=model.end_id,
        max_input_len=10**6,
        default_output_len=JUDGED_OUTPUT_TOKENS[family],
        append_id=model.end_id if family is Family.T5 else -1,
    )
    ids, lengths = encode_prompts(tokenizer, prompts, settings)
    too_big = int(ids.max())
    if too_big >= model.vocab_size:
        raise UserError(
            f"the tokenizer in {tokenizer_dir} produces token id {too_big} but the checkpoint's vocab_size is "
            f"{model.vocab_size}: pass the tokenizer of the converted model"
        )
    requests = [
        GenerationRequest(tuple(int(t) for t in row[: int(n)]), JUDGED_OUTPUT_TOKENS[family])
        for row, n in zip(ids, lengths[:, 0], strict=True)
    ]
    result = generate(model, requests)
    answers, tokens = [], []
    for row in result.generated:
        cut = generated_tokens(np.asarray(row[0]), len(row[0]), 0, model.end_id)
        tokens.append(cut)
        answers.append(decode_known(tokenizer, cut))
    return answers, tokens


def decode_known(tokenizer: Any, ids: list[int]) -> str:
    """Decoded text, leaving out ids the tokenizer has no piece for (a model's vocabulary may be padded beyond
    its tokenizer's, as t5-small's 32128 rows are beyond its 32000 pieces)."""
    try:
        return str(tokenizer.decode(ids))
    except (IndexError, ValueError, OverflowError):
        known = []
        for token in ids:
            try:
                tokenizer.decode([token])
            except (IndexError, ValueError, OverflowError):
                continue
            known.append(token)
        return str(tokenizer.decode(known))


def judgement_problems(model: T5 | Gpt, tokenizer_dir: Path, bleu_threshold: float) -> tuple[str, list[str]]:
    """(summary, problems) of the probe's judgement applied to the reference's answers."""
    from tritonft.probe.expectations import judge, samples_for

    samples = samples_for(model.family)
    answers, tokens = judged_answers(model, tokenizer_dir, [s.prompt for s in samples])
    verdict = judge(model.family, samples, answers, bleu_threshold)
    problems = [] if verdict.ok else [f"the probe's judgement fails: {verdict.detail}"]
    if model.family is not Family.T5:
        problems += [
            f"degenerate continuation of {sample.prompt!r}: {ids} ({answer!r})"
            for sample, answer, ids in zip(samples, answers, tokens, strict=True)
            if degenerate(ids)
        ]
    return verdict.detail, problems
