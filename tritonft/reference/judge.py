"""The judge's reference of a revision, computed from its original weights on CPU (what the reference Job runs).

:func:`judge_reference` follows, for each of the family's judged prompts (tokenized as the served ensemble tokenizes
them), the greedy path of the fp32 reference (:mod:`tritonft.reference`, proven equal to transformers) and records at
every step the near-ties: the tokens whose log-probability is within the served dtype's tolerance of the greedy
choice, each with the text the served answer would start with had it chosen it. The format and the rule are
:mod:`tritonft.probe.judge_reference`'s.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from tritonft.errors import UserError
from tritonft.probe.judge_reference import (
    MAX_NEAR_TIES,
    REFERENCE_STEPS,
    VLLM_DTYPES,
    JudgeReference,
    NearTie,
    PromptReference,
    reference_prompts,
    tolerance_for,
)
from tritonft.reference import layers
from tritonft.reference.check import decode_known
from tritonft.reference.llama import Llama, prompt_tokenizer
from tritonft.reference.models import T5, Gpt
from tritonft.spec import Family, ModelSpec, WeightDType


def _text(tokenizer: Any, ids: list[int], whole: bool) -> str:
    """Decoded ``ids``; a prefix (``whole`` false) loses a character its last token has not completed."""
    text = decode_known(tokenizer, ids)
    return text if whole else text.rstrip("\ufffd")


def follow(
    model: T5 | Gpt | Llama,
    tokenizer: Any,
    prompt: str,
    ids: list[int],
    *,
    steps: int,
    tolerance: float,
    end_ids: frozenset[int] | None = None,
) -> PromptReference:
    """The greedy path of ``model`` from the prompt ``ids`` over ``steps`` tokens with its near-ties; the answer ends
    at any of ``end_ids`` (default: the model's end id)."""
    if end_ids is not None:
        ends_at = end_ids
    else:
        ends_at = model.end_ids if isinstance(model, Llama) else frozenset({model.end_id})
    start_id = None if isinstance(model, Llama) else model.start_id
    cache, logits = model.start(np.asarray(ids), 1, len(ids) + steps, start_id)
    tokens: list[int] = []
    ties: list[NearTie] = []
    min_gap = float("inf")
    ended = False
    for step in range(steps):
        log_probs = layers.log_softmax(logits[0].astype(np.float32))
        choice = int(np.argmax(log_probs))
        best = float(log_probs[choice])
        candidates = np.argpartition(-log_probs, MAX_NEAR_TIES + 1)[: MAX_NEAR_TIES + 2]
        others = sorted((int(t) for t in candidates if int(t) != choice), key=lambda t: -float(log_probs[t]))
        if others:
            min_gap = min(min_gap, best - float(log_probs[others[0]]))
        for other in others[:MAX_NEAR_TIES]:
            gap = best - float(log_probs[other])
            if gap > tolerance:
                break
            ends = other in ends_at
            text = _text(tokenizer, tokens, True) if ends else _text(tokenizer, [*tokens, other], False)
            ties.append(NearTie(step, gap, text, ends))
        if choice in ends_at:
            ended = True
            break
        tokens.append(choice)
        if step == steps - 1:
            break
        logits = model.step(cache, np.array([choice]))
    answer = _text(tokenizer, tokens, ended)
    return PromptReference(prompt, answer, len(tokens) + int(ended), ended, tuple(ties), min_gap)


def judge_reference(model: T5 | Gpt | Llama, tokenizer_dir: Path, spec: ModelSpec) -> JudgeReference:
    """The reference of ``spec``'s judge: ``model`` (the original weights) on the family's prompts."""
    from tritonft.repo.tokenization import TokenizerSettings, encode_prompts, load_tokenizer

    if model.family is not spec.family:
        raise UserError(f"the checkpoint is a {model.family} model but the spec says {spec.family}")
    if isinstance(model, Llama):
        return llama_judge_reference(model, prompt_tokenizer(tokenizer_dir, model.config.model_type), spec)
    try:
        tokenizer = load_tokenizer(tokenizer_dir)
    except FileNotFoundError as exc:
        raise UserError(f"--tokenizer: {exc}; pass the Hugging Face download directory") from exc
    family = spec.family
    steps = min(REFERENCE_STEPS[family], spec.max_output_len)
    settings = TokenizerSettings(
        pad_id=model.end_id if family is not Family.T5 else 0,
        end_id=model.end_id,
        max_input_len=spec.max_input_len,
        default_output_len=steps,
        append_id=model.end_id if family is Family.T5 else -1,
    )
    prompts = reference_prompts(family)
    try:
        ids, lengths = encode_prompts(tokenizer, list(prompts), settings)
    except ValueError as exc:
        raise UserError(f"the judge's prompts do not fit the model: {exc}") from exc
    if int(ids.max()) >= model.vocab_size:
        raise UserError(
            f"the tokenizer in {tokenizer_dir} produces token id {int(ids.max())} but the checkpoint's vocab_size is "
            f"{model.vocab_size}: pass the tokenizer of the model"
        )
    tolerance = tolerance_for(str(spec.weight_dtype))
    followed = tuple(
        follow(model, tokenizer, prompt, [int(t) for t in row[: int(n)]], steps=steps, tolerance=tolerance)
        for prompt, row, n in zip(prompts, ids, lengths[:, 0], strict=True)
    )
    return JudgeReference(family, spec.hf_repo, spec.revision, str(spec.weight_dtype), tolerance, followed)


def llama_served_dtype(spec: ModelSpec) -> str:
    """The dtype vLLM serves ``spec`` in, by the judge's names (``fp32``, ``fp16``, ``bf16``)."""
    from tritonft.engines.vllm.engine import checkpoint_of, options_of
    from tritonft.engines.vllm.rules import served_dtype

    return VLLM_DTYPES[served_dtype(options_of(spec), checkpoint_of(spec))]


def llama_judge_reference(model: Llama, tokenizer: Any, spec: ModelSpec) -> JudgeReference:
    """A Llama-family model's reference: each judged prompt tokenized as vLLM tokenizes a prompt (``tokenizer``:
    :func:`tritonft.reference.llama.prompt_tokenizer`; its special tokens added: Llama's ``<|begin_of_text|>``, none
    for Qwen2), followed greedily until one of the
    generation config's end ids (where vLLM stops) or the steps; the tolerance is the served dtype's."""
    steps = min(REFERENCE_STEPS[Family.LLAMA], spec.max_output_len)
    prompts = reference_prompts(Family.LLAMA)
    encoded = [tokenizer.encode(prompt, add_special_tokens=True) for prompt in prompts]
    longest = max(len(ids) for ids in encoded)
    if longest > spec.max_input_len:
        raise UserError(
            f"the judge's prompts take up to {longest} tokens, the model's max_input_len is {spec.max_input_len}"
        )
    top = max(max(ids) for ids in encoded)
    if top >= model.vocab_size:
        raise UserError(
            f"the tokenizer produces token id {top} but the checkpoint's vocab_size is {model.vocab_size}: pass the "
            "tokenizer of the model"
        )
    dtype = llama_served_dtype(spec)
    tolerance = tolerance_for(dtype)
    followed = tuple(
        follow(model, tokenizer, prompt, ids, steps=steps, tolerance=tolerance)
        for prompt, ids in zip(prompts, encoded, strict=True)
    )
    return JudgeReference(Family.LLAMA, spec.hf_repo, spec.revision, dtype, tolerance, followed)


def load_original(hf_dir: Path, work: Path | None = None) -> T5 | Gpt:
    """The reference model of the Hugging Face checkpoint in ``hf_dir``: converted at fp32, TP 1 (the converter is
    lossless at fp32), into a temporary directory under ``work`` that is removed once the weights are in memory."""
    from tritonft.engines.base import ConvertRequest
    from tritonft.engines.fastertransformer import ENGINE
    from tritonft.reference import build_model, load_checkpoint

    if work is not None:
        work.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="tritonft-reference-", dir=work) as scratch:
        out = Path(scratch)
        ENGINE.convert(ConvertRequest(input_dir=hf_dir, output_dir=out, tp=1, dtype=WeightDType.FP32))
        return build_model(load_checkpoint(out / "1-gpu"))
