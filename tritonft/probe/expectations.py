"""What a correct answer looks like, per model family (pure functions; no network).

* T5 is served as a translator: the prompts of a small bundled English->German set
  (``data/translation_en_de.json``, sources noted inside) are translated and scored with corpus BLEU (sacrebleu);
  the check passes when the score reaches a threshold. The set is a smoke gate that tells a working model from a
  broken one (garbage, empty or untranslated text scores near 0), not a quality benchmark.
* GPT-2 / GPT-J must return a non-empty continuation of the prompt (when the answer echoes the prompt, as
  FasterTransformer's GPT ensemble does, the text after the echo must be non-empty).
* With no family given, the answer must be non-empty text; the report says that only this was checked.
* Exact expected answers (``tritonft probe --expected-answers``), when given, replace the family's prompts and
  judgement: each prompt's answer must equal its expected text exactly (a model whose output is known, e.g. the
  reference engine serving a golden checkpoint).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources

from tritonft.spec import Family

DEFAULT_BLEU_THRESHOLD = 15.0
"""Corpus BLEU a working T5 reaches comfortably on the bundled sentences (t5-small scores far above it)."""

GPT_PROMPTS: tuple[str, ...] = ("Once upon a time, in a small village by the sea,",)
GENERIC_PROMPTS: tuple[str, ...] = ("Hello, world.",)


@dataclass(frozen=True)
class Sample:
    """One prompt sent to the model and, for scored families, the reference answer."""

    prompt: str
    reference: str | None = None


@dataclass(frozen=True)
class TranslationSet:
    """The bundled translation samples."""

    source: str
    prompt_template: str
    pairs: tuple[tuple[str, str], ...]

    def samples(self) -> tuple[Sample, ...]:
        return tuple(Sample(self.prompt_template.format(source=en), de) for en, de in self.pairs)


@dataclass(frozen=True)
class Verdict:
    """Outcome of judging the answers: ``ok``, a one-line reason and (for T5) the BLEU score."""

    ok: bool
    detail: str
    score: float | None = None


@cache
def load_translation_set() -> TranslationSet:
    """The English->German set shipped as package data."""
    text = resources.files("tritonft.probe").joinpath("data/translation_en_de.json").read_text(encoding="utf-8")
    raw = json.loads(text)
    return TranslationSet(
        source=str(raw["source"]),
        prompt_template=str(raw["prompt_template"]),
        pairs=tuple((str(p["en"]), str(p["de"])) for p in raw["pairs"]),
    )


def samples_for(family: Family | None) -> tuple[Sample, ...]:
    """The prompts the probe sends to a model of ``family`` (``None``: a generic text model)."""
    if family is Family.T5:
        return load_translation_set().samples()
    if family in (Family.GPT2, Family.GPTJ):
        return tuple(Sample(p) for p in GPT_PROMPTS)
    return tuple(Sample(p) for p in GENERIC_PROMPTS)


def corpus_bleu(hypotheses: list[str], references: list[str]) -> float:
    """sacrebleu corpus BLEU (13a tokenisation, default smoothing) of ``hypotheses`` against one reference each."""
    import sacrebleu

    return float(sacrebleu.corpus_bleu(hypotheses, [references]).score)


def _shorten(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def judge_exact(samples: tuple[Sample, ...], answers: list[str]) -> Verdict:
    """Every answer equals its sample's expected text (``Sample.reference``), character for character."""
    if len(answers) != len(samples):
        return Verdict(False, f"got {len(answers)} answers for {len(samples)} prompts")
    for sample, answer in zip(samples, answers, strict=True):
        if answer != sample.reference:
            return Verdict(
                False,
                f"the answer to {sample.prompt!r} is not the expected one: expected {sample.reference!r}, "
                f"got {_shorten(answer)!r}",
            )
    return Verdict(True, f"the expected answer, exactly, for {len(samples)} prompt(s)")


def judge(
    family: Family | None,
    samples: tuple[Sample, ...],
    answers: list[str],
    bleu_threshold: float = DEFAULT_BLEU_THRESHOLD,
) -> Verdict:
    """Decide whether ``answers`` (one per sample, same order) are what a working model of ``family`` returns."""
    if len(answers) != len(samples):
        return Verdict(False, f"got {len(answers)} answers for {len(samples)} prompts")
    if family is Family.T5:
        references = [s.reference or "" for s in samples]
        score = corpus_bleu(answers, references)
        if score >= bleu_threshold:
            return Verdict(True, f"BLEU {score:.1f} >= {bleu_threshold:.1f} on {len(samples)} samples", score)
        worst = min(range(len(samples)), key=lambda i: corpus_bleu([answers[i]], [references[i]]))
        return Verdict(
            False,
            f"BLEU {score:.1f} < {bleu_threshold:.1f} on {len(samples)} samples; e.g. {samples[worst].prompt!r} "
            f"-> {_shorten(answers[worst])!r}, expected {references[worst]!r}",
            score,
        )
    for sample, answer in zip(samples, answers, strict=True):
        continuation = answer.strip()
        if family in (Family.GPT2, Family.GPTJ) and continuation.startswith(sample.prompt.strip()):
            continuation = continuation[len(sample.prompt.strip()) :].strip()
        if not continuation:
            what = "continuation of the prompt" if family is not None else "answer"
            return Verdict(False, f"empty {what} for {sample.prompt!r} (got {answer!r})")
    if family is None:
        return Verdict(True, "non-empty answer (no family given: only that the model answers text was checked)")
    return Verdict(True, f"non-empty continuation for {len(samples)} prompt(s)")
