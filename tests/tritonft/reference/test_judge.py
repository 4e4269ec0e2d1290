"""The judge's reference computed from a checkpoint's original weights (``tritonft reference``, the Job's step)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from tests.tritonft.reference.checkpoints import word_tokenizer
from tests.tritonft.repo.conftest import make_spec
from tritonft.cli import main
from tritonft.probe.judge_reference import JudgeReference, reference_prompts, tolerance_for
from tritonft.reference import GenerationRequest, generate
from tritonft.reference.judge import load_original
from tritonft.repo.tokenization import load_tokenizer
from tritonft.spec import Family, WeightDType

NAMES = {Family.T5: "t5", Family.GPT2: "gpt2", Family.GPTJ: "gptj"}


@pytest.fixture(scope="module")
def computed(
    checkpoint: Callable[[str], Path], tmp_path_factory: pytest.TempPathFactory
) -> dict[Family, tuple[Path, JudgeReference]]:
    """Each family's seeded checkpoint with a word tokenizer over the judge's prompts, and its reference as
    ``tritonft reference`` writes it for an fp16-served spec."""
    done = {}
    for family, name in NAMES.items():
        scratch = tmp_path_factory.mktemp(f"reference-{name}")
        hf = Path(shutil.copytree(checkpoint(name), scratch / "hf"))  # the golden directory itself stays as built
        vocab = int(json.loads((hf / "config.json").read_text())["vocab_size"])
        word_tokenizer(vocab, family, hf)
        spec = make_spec(family, max_output_len=12, weight_dtype=WeightDType.FP16)
        (scratch / "spec.json").write_text(spec.to_json())
        out = scratch / "judge-reference.json"
        assert main(["reference", "--input", str(hf), "--spec", str(scratch / "spec.json"), "--out", str(out)]) == 0
        done[family] = (hf, JudgeReference.from_json(out.read_text()))
    return done


@pytest.mark.parametrize("family", list(NAMES), ids=str)
def test_the_reference_answers_are_the_greedy_generation_of_the_original_weights(
    computed: dict[Family, tuple[Path, JudgeReference]], family: Family
) -> None:
    hf, reference = computed[family]
    model = load_original(hf)
    tokenizer = load_tokenizer(hf)

    assert [p.prompt for p in reference.prompts] == list(reference_prompts(family))
    for prompt in reference.prompts:
        ids = tokenizer.encode(prompt.prompt, add_special_tokens=True)
        if family is Family.T5:
            ids.append(model.end_id)
        (row,) = generate(model, [GenerationRequest(tuple(ids), 12)]).generated[0]
        tokens = row[: row.index(model.end_id)] if model.end_id in row else row
        assert prompt.answer == tokenizer.decode(tokens)
        assert prompt.ended == (model.end_id in row)


@pytest.mark.parametrize("family", list(NAMES), ids=str)
def test_near_ties_are_the_tokens_within_the_served_dtypes_tolerance(
    computed: dict[Family, tuple[Path, JudgeReference]], family: Family
) -> None:
    _, reference = computed[family]

    assert reference.served_dtype == "fp16"
    assert reference.tolerance_nats == tolerance_for("fp16")
    gaps = [t.gap for p in reference.prompts for t in p.near_ties]
    assert all(0 <= gap <= reference.tolerance_nats for gap in gaps)
    assert all(np.isfinite(p.min_gap) for p in reference.prompts)
    for prompt in reference.prompts:
        assert all(prompt.min_gap <= t.gap + 1e-3 for t in prompt.near_ties)
