"""The golden checkpoints of ``tests/tritonft/reference`` served end to end with the reference engine.

Their prompts and goldens are token ids (transformers generated them without a tokenizer), so each model gets a
word-level tokenizer over its vocabulary: id ``i`` is the word ``w<i>``. The golden text of a sequence is then its
ids as words, and the ensemble's answer must be exactly that text.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.system.realtriton.repos import render_with_cli
from tests.tritonft.reference.checkpoints import MAX_NEW_TOKENS, VARIANTS
from tests.tritonft.reference.conftest import golden
from tests.tritonft.repo.conftest import make_spec
from tritonft.reference import load_checkpoint
from tritonft.spec import Family, ModelSpec

SERVED = ("t5", "gpt2", "gptj")
"""One golden variant per family."""
TP = 2
"""Served from their TP 2 conversion (the reference merges the shards as FT's ranks would split them)."""


def words(ids: Sequence[int]) -> str:
    return " ".join(f"w{int(t)}" for t in ids)


def write_word_tokenizer(vocab_size: int, directory: Path) -> Path:
    """``tokenizer.json``: whitespace-separated words ``w0 .. w<vocab-1>``; an unknown word is an error."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    tokenizer = Tokenizer(models.WordLevel({f"w{i}": i for i in range(vocab_size)}, unk_token="<unknown>"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    directory.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(directory / "tokenizer.json"))
    return directory


@dataclass(frozen=True)
class GoldenCase:
    """One golden generation as text: the prompt the ensemble gets and the answer per beam it must return."""

    prompt: str
    answers: tuple[str, ...]
    prompt_ids: tuple[int, ...]
    outputs: tuple[tuple[int, ...], ...]
    beam_width: int
    len_penalty: float


def golden_cases(name: str) -> list[GoldenCase]:
    """The variant's golden cases with the model's own end id, as text. T5 prompts end with ``</s>``, which the
    preprocessing model appends itself; answers stop before the end id, as the postprocessing model cuts them."""
    data = golden(name)
    family = Family(next(v.family for v in VARIANTS if v.name == name))
    end_id = int(data["end_id"])
    cases = []
    for case in data["cases"]:
        if case["end_id"] != end_id:
            continue
        prompt = list(case["prompt"])
        if family is Family.T5:
            assert prompt[-1] == end_id, "T5 golden prompts end with </s>"
            prompt = prompt[:-1]
        answers = tuple(words(out[: out.index(end_id)] if end_id in out else out) for out in case["outputs"])
        cases.append(
            GoldenCase(
                words(prompt),
                answers,
                tuple(case["prompt"]),
                tuple(tuple(o) for o in case["outputs"]),
                int(case.get("beam_width", 1)),
                float(case.get("len_penalty", 0.0)),
            )
        )
    return cases


def golden_spec(name: str) -> ModelSpec:
    family = Family(next(v.family for v in VARIANTS if v.name == name))
    return make_spec(family, name=f"golden-{name}", tensor_parallel=TP, max_input_len=16, max_output_len=MAX_NEW_TOKENS)


def render_golden(name: str, converted_dir: Path, out: Path, scratch: Path) -> ModelSpec:
    """``tritonft repo --engine reference`` for a golden variant's conversion (weights stay where they are)."""
    return render_reference(golden_spec(name), converted_dir, out, scratch, write_word_tokenizer)


def render_reference(
    spec: ModelSpec, converted_dir: Path, out: Path, scratch: Path, tokenizer: Callable[[int, Path], Path]
) -> ModelSpec:
    """``tritonft repo --engine reference`` for ``spec`` on ``converted_dir``, with the word tokenizer that
    ``tokenizer(vocab_size, directory)`` writes."""
    vocab = load_checkpoint(converted_dir).integer(spec.family.ini_section, "vocab_size")
    tokenizer_dir = tokenizer(vocab, scratch / f"{spec.name}-tokenizer")
    render_with_cli(
        spec,
        out,
        tokenizer_dir,
        scratch,
        "--checkpoint",
        str(converted_dir),
        "--checkpoint-path",
        str(converted_dir),
        "--engine",
        "reference",
        "--require-checkpoint",
    )
    return spec
