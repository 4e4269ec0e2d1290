"""The judge's reference computed from a checkpoint's original weights (``tritonft reference``, the Job's step)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.tritonft.reference.checkpoints import word_tokenizer
from tests.tritonft.repo.conftest import make_spec
from tritonft.cli import main
from tritonft.probe.judge_reference import (
    BRANCH_TOKENS,
    MAX_NEAR_TIES,
    JudgeReference,
    reference_prompts,
    tolerance_for,
)
from tritonft.reference import GenerationRequest, generate
from tritonft.reference.check import decode_known
from tritonft.reference.judge import ft_served_dtype, load_original
from tritonft.repo.tokenization import load_tokenizer
from tritonft.spec import DataType, Family, WeightDType

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


@pytest.mark.parametrize(
    ("files", "compute", "served"),
    [("fp32", "fp32", "fp32"), ("fp32", "fp16", "fp16"), ("fp16", "fp32", "fp16"), ("fp32", "bf16", "bf16")],
)
def test_an_ft_models_near_ties_are_those_of_the_coarser_of_its_files_and_its_compute_type(
    files: str, compute: str, served: str
) -> None:
    # prod's t5-3b keeps fp32 files and computes in fp16 on the GPU: a right model flips fp16's near-ties, not fp32's.
    spec = make_spec(Family.T5, weight_dtype=WeightDType(files), data_type=DataType(compute))
    assert ft_served_dtype(spec) == served


@pytest.mark.parametrize("family", list(NAMES), ids=str)
def test_the_reference_follows_its_first_near_ties_branches_within_the_familys_budget(
    computed: dict[Family, tuple[Path, JudgeReference]], family: Family
) -> None:
    _, reference = computed[family]
    followed = 0
    for prompt in reference.prompts:
        open_ties = [t for t in prompt.near_ties if not t.ends and not prompt.answer.startswith(t.text)]
        spent = 0
        for tie in open_ties:
            if tie.branch is None:
                continue
            assert tie.branch.answer.startswith(tie.text.rstrip()), (tie.text, tie.branch.answer)
            assert all(not t.branch for t in tie.branch.near_ties), "one level of branches"
            spent += tie.branch.steps - tie.step - 1
            followed += 1
        assert spent <= BRANCH_TOKENS[family]
        if open_ties:
            assert open_ties[0].branch is not None, "the first near-tie in step order is followed"
    assert followed, f"{family}'s seeded checkpoint has near-ties at fp16 (BENCHMARKS: the judge's margin)"


def fed(model: Any, ids: list[int], forced: list[int]) -> tuple[Any, Any]:
    """A fresh cache after the prompt ``ids`` and then ``forced`` (one step each), and the next token's logits."""
    cache, logits = model.start(np.asarray(ids), 1, len(ids) + 64)
    for token in forced:
        logits = model.step(cache, np.array([token]))
    return cache, logits


def greedy_from(model: Any, cache: Any, logits: Any, count: int) -> tuple[list[int], bool]:
    out: list[int] = []
    for _ in range(count):
        token = int(np.argmax(logits[0]))
        if token == model.end_id:
            return out, True
        out.append(token)
        logits = model.step(cache, np.array([token]))
    return out, False


@pytest.mark.parametrize("family", list(NAMES), ids=str)
def test_each_branch_is_what_the_weights_generate_after_the_near_ties_token(
    computed: dict[Family, tuple[Path, JudgeReference]], family: Family
) -> None:
    """Computed independently: a fresh cache fed the prompt, the reference's tokens up to the tie and the tie's token
    (the reference step reuses its main path's cache, cut back to the tie's step)."""
    hf, reference = computed[family]
    model = load_original(hf)
    tokenizer = load_tokenizer(hf)
    checked = 0
    for prompt in reference.prompts:
        ids = tokenizer.encode(prompt.prompt, add_special_tokens=True)
        if family is Family.T5:
            ids.append(model.end_id)
        main, _ = greedy_from(model, *fed(model, ids, []), prompt.steps)
        for tie in prompt.near_ties:
            branch = tie.branch
            if branch is None or branch.steps == tie.step + 1 or tie.text == decode_known(tokenizer, main[: tie.step]):
                continue  # no branch, nothing after the tie, or a tie whose token decodes to nothing
            _, logits = fed(model, ids, main[: tie.step])
            top = np.argsort(-logits[0])[: MAX_NEAR_TIES + 1]
            token = next(int(t) for t in top if decode_known(tokenizer, [*main[: tie.step], int(t)]) == tie.text)
            more = branch.steps - tie.step - 1 - int(branch.ended)
            rest, ended = greedy_from(model, *fed(model, ids, [*main[: tie.step], token]), more + int(branch.ended))
            assert branch.answer == decode_known(tokenizer, [*main[: tie.step], token, *rest]), prompt.prompt
            assert ended == branch.ended
            checked += 1
    assert checked, f"{family}'s reference follows at least one branch past its near-tie"
