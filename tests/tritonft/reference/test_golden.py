"""The reference reproduces Hugging Face ``transformers`` token for token from the converter's files.

The golden files (``tests/tritonft/reference/golden/*.json``) were written by ``scripts/make_reference_goldens.py`` with
transformers itself; here the same checkpoints are rebuilt from their seed without torch, converted with
``tritonft convert`` at TP 1, 2 and 4, and generated with :mod:`tritonft.reference`.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.tolerances import BEAM_SCORE_RTOL
from tests.tritonft.reference.checkpoints import MAX_NEW_TOKENS, PROMPTS, VARIANTS, directory_sha256
from tests.tritonft.reference.conftest import golden
from tritonft.reference import GenerationRequest, build_model, generate, load_checkpoint

NAMES = [v.name for v in VARIANTS]
FAMILY = {v.name: v.family for v in VARIANTS}


@pytest.mark.parametrize("name", NAMES)
def test_rebuilt_checkpoint_is_byte_identical_to_the_one_transformers_generated_from(name, checkpoint):
    assert directory_sha256(checkpoint(name)) == golden(name)["sha256"]


@pytest.mark.parametrize("tp", [1, 2, 4])
@pytest.mark.parametrize("name", NAMES)
def test_greedy_and_beam_search_reproduce_transformers_token_for_token(name, tp, converted):
    model = build_model(load_checkpoint(converted(name, tp)))
    expected = golden(name)
    for case in expected["cases"]:
        beams = case.get("beam_width", 1)
        request = GenerationRequest(
            case["prompt"],
            MAX_NEW_TOKENS,
            beam_width=beams,
            len_penalty=case.get("len_penalty", 0.0),
            end_id=case["end_id"],
        )
        result = generate(model, [request])
        assert result.generated[0] == case["outputs"], f"{case['mode']} on {case['prompt']}, end id {case['end_id']}"
        if beams > 1:
            np.testing.assert_allclose(result.cum_log_probs[0], case["scores"], rtol=BEAM_SCORE_RTOL)


@pytest.mark.parametrize("name", ["t5", "gpt2", "gptj"])
def test_a_batch_of_prompts_of_different_lengths_answers_each_as_alone_in_fts_layout(name, converted):
    model = build_model(load_checkpoint(converted(name, 2)))
    prompts = PROMPTS[FAMILY[name]]
    expected = golden(name)
    greedy = [c["outputs"][0] for c in expected["cases"] if c["mode"] == "greedy" and c["end_id"] == expected["end_id"]]
    result = generate(model, [GenerationRequest(p, MAX_NEW_TOKENS) for p in prompts])
    echo = FAMILY[name] != "t5"
    width = (max(len(p) for p in prompts) if echo else 0) + MAX_NEW_TOKENS
    assert result.output_ids.shape == (len(prompts), 1, width)
    assert result.output_ids.dtype == np.int32 and result.sequence_length.dtype == np.int32
    for row, (prompt, tokens) in enumerate(zip(prompts, greedy, strict=True)):
        sequence = (list(prompt) if echo else []) + tokens
        assert result.sequence_length[row, 0] == len(sequence)
        assert result.output_ids[row, 0, : len(sequence)].tolist() == sequence
        assert (result.output_ids[row, 0, len(sequence) :] == model.end_id).all()


FP16_AGREED_TOKENS = 4
FP16_LOGIT_TOLERANCE = 0.05


def fp16_checked_steps(expected: list[int], margins: list[float]) -> int:
    """Steps an fp16 run must reproduce: the first FP16_AGREED_TOKENS, cut before the first step whose fp32
    top-1/top-2 margin is within FP16_LOGIT_TOLERANCE (there a flip is within fp16's error, see below)."""
    close = [i for i, margin in enumerate(margins) if margin < FP16_LOGIT_TOLERANCE]
    return min(FP16_AGREED_TOKENS, len(expected), *close)


@pytest.mark.parametrize("name", NAMES)
def test_fp16_conversion_agrees_with_transformers_on_the_first_tokens(name, converted):
    """fp16 files round every weight to 11 significant bits (relative error <= 2**-11 ~ 4.9e-4). On these models
    that moves the logits by a few 1e-3 (asserted: less than FP16_LOGIT_TOLERANCE = 0.05 on the first step), while
    most greedy top-1/top-2 margins of the goldens are far larger; once one token differs the continuation
    legitimately diverges, so only a prefix can be required. The fp16 conversion must therefore give exactly the
    golden greedy tokens for the first FP16_AGREED_TOKENS steps, stopping early only before a step whose fp32
    margin is below the tolerance (a flip there is within fp16's error); at least one prompt per model must be
    checked on FP16_AGREED_TOKENS tokens.
    """
    fp32 = build_model(load_checkpoint(converted(name, 1)))
    fp16 = build_model(load_checkpoint(converted(name, 1, "fp16")))
    checked = []
    for case in golden(name)["cases"]:
        if case["mode"] != "greedy" or case["end_id"] != golden(name)["end_id"]:
            continue
        prompt, expected = case["prompt"], case["outputs"][0]
        _, logits32 = fp32.start(np.asarray(prompt), 1, len(prompt) + MAX_NEW_TOKENS)
        _, logits16 = fp16.start(np.asarray(prompt), 1, len(prompt) + MAX_NEW_TOKENS)
        assert np.abs(logits16 - logits32).max() < FP16_LOGIT_TOLERANCE
        got = generate(fp16, [GenerationRequest(prompt, MAX_NEW_TOKENS)]).generated[0][0]
        steps = fp16_checked_steps(expected, case["margins"])
        assert got[:steps] == expected[:steps], f"prompt {prompt}"
        checked.append(steps)
    assert max(checked) == FP16_AGREED_TOKENS
