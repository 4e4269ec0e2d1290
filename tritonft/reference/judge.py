"""The judge's reference of a revision, computed from its original weights on CPU (what the reference Job runs).

:func:`judge_reference` follows, for each of the family's judged prompts (tokenized as the served ensemble tokenizes
them), the greedy path of the fp32 reference (:mod:`tritonft.reference`, proven equal to transformers) and records at
every step the near-ties: the tokens whose log-probability is within the served dtype's tolerance of the greedy
choice, each with the text the served answer would start with had it chosen it. The format and the rule are
:mod:`tritonft.probe.judge_reference`'s.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from tritonft.errors import UserError
from tritonft.probe.judge_reference import (
    BRANCH_TOKENS,
    CHAT_CONVERSATIONS,
    CHAT_STEPS,
    MAX_NEAR_TIES,
    REFERENCE_STEPS,
    TOLERANCE_NATS,
    VLLM_DTYPES,
    Branch,
    JudgeReference,
    NearTie,
    PromptReference,
    conversation_label,
    reference_prompts,
    rendering_problems,
    tolerance_for,
)
from tritonft.reference import layers
from tritonft.reference.check import decode_known
from tritonft.reference.llama import Llama, prompt_tokenizer, template_special_tokens, tokenizer_end_ids
from tritonft.reference.models import T5, Gpt
from tritonft.spec import Family, ModelSpec, WeightDType


def _text(tokenizer: Any, ids: list[int], whole: bool) -> str:
    """Decoded ``ids``; a prefix (``whole`` false) loses a character its last token has not completed."""
    text = decode_known(tokenizer, ids)
    return text if whole else text.rstrip("\ufffd")


@dataclass
class _Walk:
    """One greedy path: the tokens chosen (after the prefix it started from), whether it chose an end token, the
    near-ties met (each with its token) and the smallest top-1/top-2 gap."""

    tokens: list[int]
    ended: bool
    ties: list[tuple[NearTie, int]] = field(default_factory=list)
    min_gap: float = float("inf")


def _walk(
    model: T5 | Gpt | Llama,
    tokenizer: Any,
    cache: Any,
    logits: Any,
    prefix: list[int],
    *,
    first_step: int,
    steps: int,
    choices: int,
    tolerance: float,
    ends_at: frozenset[int],
) -> _Walk:
    """Greedy from ``logits`` (the next token's after ``prefix``) over at most ``choices`` tokens and up to step
    ``steps``, recording the near-ties of each step (their text: the answer so far and that token)."""
    walk = _Walk(list(prefix), False)
    for step in range(first_step, min(steps, first_step + choices)):
        log_probs = layers.log_softmax(logits[0].astype(np.float32))
        choice = int(np.argmax(log_probs))
        best = float(log_probs[choice])
        candidates = np.argpartition(-log_probs, MAX_NEAR_TIES + 1)[: MAX_NEAR_TIES + 2]
        others = sorted((int(t) for t in candidates if int(t) != choice), key=lambda t: -float(log_probs[t]))
        if others:
            walk.min_gap = min(walk.min_gap, best - float(log_probs[others[0]]))
        for other in others[:MAX_NEAR_TIES]:
            gap = best - float(log_probs[other])
            if gap > tolerance:
                break
            ends = other in ends_at
            text = _text(tokenizer, walk.tokens, True) if ends else _text(tokenizer, [*walk.tokens, other], False)
            walk.ties.append((NearTie(step, gap, text, ends), other))
        if choice in ends_at:
            walk.ended = True
            break
        walk.tokens.append(choice)
        if step == min(steps, first_step + choices) - 1:
            break
        logits = model.step(cache, np.array([choice]))
    return walk


def follow(
    model: T5 | Gpt | Llama,
    tokenizer: Any,
    prompt: str,
    ids: list[int],
    *,
    steps: int,
    tolerance: float,
    end_ids: frozenset[int] | None = None,
    branch_tokens: int = 0,
) -> PromptReference:
    """The greedy path of ``model`` from the prompt ``ids`` over ``steps`` tokens with its near-ties; the answer ends
    at any of ``end_ids`` (default: the model's end id). Then the branches: the near-ties that do not end the answer,
    in step order, each followed greedily after its token to ``steps`` (its own near-ties recorded, not followed),
    at most ``branch_tokens`` greedy tokens over all of them (the last one cut where the budget ends)."""
    if end_ids is not None:
        ends_at = end_ids
    else:
        ends_at = model.end_ids if isinstance(model, Llama) else frozenset({model.end_id})
    start_id = None if isinstance(model, Llama) else model.start_id
    cache, logits = model.start(np.asarray(ids), 1, len(ids) + steps, start_id)
    base = cache.length  # the cache's length before the token chosen at step 0 is fed
    main = _walk(
        model,
        tokenizer,
        cache,
        logits,
        [],
        first_step=0,
        steps=steps,
        choices=steps,
        tolerance=tolerance,
        ends_at=ends_at,
    )
    answer = _text(tokenizer, main.tokens, main.ended)
    budget = branch_tokens
    planned: dict[int, int] = {}  # near-tie's index -> greedy tokens its branch gets (the budget, in step order)
    for index, (tie, _) in enumerate(main.ties):
        if tie.ends or answer.startswith(tie.text):  # ends the answer, or decodes to nothing: the rule skips it
            continue
        after = steps - tie.step - 1  # tokens the served answer has after this one
        if after > 0 and budget == 0:
            continue
        planned[index] = min(after, budget)
        budget -= planned[index]
    branches: dict[int, Branch] = {}
    # The cache holds the main path's keys and values, and a branch from step k rewrites only the positions from k
    # on: run the latest step's first, so every branch still finds the main path's prefix before its own step.
    for index in sorted(planned, key=lambda i: -main.ties[i][0].step):
        tie, token = main.ties[index]
        if planned[index] == 0:  # the tie is the answer's last token: nothing after it to compare
            branches[index] = Branch(tie.text, steps, False)
            continue
        branches[index] = _branch(
            model,
            tokenizer,
            cache,
            base=base,
            prefix=main.tokens[: tie.step],
            tie=tie,
            token=token,
            steps=steps,
            choices=planned[index],
            tolerance=tolerance,
            ends_at=ends_at,
        )
    ties = tuple(
        replace(tie, branch=branches.get(index)) if index in branches else tie
        for index, (tie, _) in enumerate(main.ties)
    )
    return PromptReference(prompt, answer, len(main.tokens) + int(main.ended), main.ended, ties, main.min_gap)


def _branch(
    model: T5 | Gpt | Llama,
    tokenizer: Any,
    cache: Any,
    *,
    base: int,
    prefix: list[int],
    tie: NearTie,
    token: int,
    steps: int,
    choices: int,
    tolerance: float,
    ends_at: frozenset[int],
) -> Branch:
    """The greedy continuation after ``token`` (the near-tie ``tie`` at its step, after the main path's ``prefix``)
    over ``choices`` tokens, from the cache cut back to that step."""
    cache.length = base + tie.step
    logits = model.step(cache, np.array([token]))
    walk = _walk(
        model,
        tokenizer,
        cache,
        logits,
        [*prefix, token],
        first_step=tie.step + 1,
        steps=steps,
        choices=choices,
        tolerance=tolerance,
        ends_at=ends_at,
    )
    answer = _text(tokenizer, walk.tokens, walk.ended)
    return Branch(answer, len(walk.tokens) + int(walk.ended), walk.ended, tuple(t for t, _ in walk.ties))


def judge_reference(model: T5 | Gpt | Llama, tokenizer_dir: Path, spec: ModelSpec) -> JudgeReference:
    """The reference of ``spec``'s judge: ``model`` (the original weights) on the family's prompts."""
    from tritonft.repo.tokenization import TokenizerSettings, encode_prompts, load_tokenizer

    if model.family is not spec.family:
        raise UserError(f"the checkpoint is a {model.family} model but the spec says {spec.family}")
    if isinstance(model, Llama):
        return llama_judge_reference(
            model, prompt_tokenizer(tokenizer_dir, model.config.model_type), spec, tokenizer_dir
        )
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
    served = ft_served_dtype(spec)
    tolerance = tolerance_for(served)
    followed = tuple(
        follow(
            model,
            tokenizer,
            prompt,
            [int(t) for t in row[: int(n)]],
            steps=steps,
            tolerance=tolerance,
            branch_tokens=BRANCH_TOKENS[family],
        )
        for prompt, row, n in zip(prompts, ids, lengths[:, 0], strict=True)
    )
    return JudgeReference(family, spec.hf_repo, spec.revision, served, tolerance, followed)


def ft_served_dtype(spec: ModelSpec) -> str:
    """The precision a FasterTransformer model's answers carry: the coarser of its files' (``weight_dtype``, what the
    weights were rounded to) and its compute type's (``data_type``, what FT computes in on the GPU; fp32 files are
    cast to it at load). prod's t5-3b keeps fp32 files and computes in fp16: its near-ties are fp16's."""
    return max((str(spec.weight_dtype), str(spec.data_type)), key=TOLERANCE_NATS.__getitem__)


def llama_served_dtype(spec: ModelSpec) -> str:
    """The dtype vLLM serves ``spec`` in, by the judge's names (``fp32``, ``fp16``, ``bf16``)."""
    from tritonft.engines.vllm.engine import checkpoint_of, options_of
    from tritonft.engines.vllm.rules import served_dtype

    return VLLM_DTYPES[served_dtype(options_of(spec), checkpoint_of(spec))]


def llama_judge_reference(
    model: Llama, tokenizer: Any, spec: ModelSpec, checkpoint: Path | None = None
) -> JudgeReference:
    """A Llama-family model's reference: each judged prompt tokenized as vLLM tokenizes a prompt (``tokenizer``:
    :func:`tritonft.reference.llama.prompt_tokenizer`; its special tokens added: Llama's ``<|begin_of_text|>``, none
    for Qwen2), followed greedily until one of the end ids vLLM stops at (the generation config's, and the
    tokenizer's own eos: :func:`tritonft.reference.llama.tokenizer_end_ids`) or the steps, with its branches; the
    tolerance is the served dtype's. With the ``checkpoint`` directory and a chat template in it, also the judge's
    conversation (:func:`chat_references`)."""
    steps = min(REFERENCE_STEPS[Family.LLAMA], spec.max_output_len)
    prompts = reference_prompts(Family.LLAMA)
    encoded = [tokenizer.encode(prompt, add_special_tokens=True) for prompt in prompts]
    _fits(encoded, model, spec, "prompts")
    dtype = llama_served_dtype(spec)
    tolerance = tolerance_for(dtype)
    ends_at = model.end_ids | (tokenizer_end_ids(checkpoint) if checkpoint is not None else frozenset())
    followed = tuple(
        replace(
            follow(
                model,
                tokenizer,
                prompt,
                ids,
                steps=steps,
                tolerance=tolerance,
                end_ids=ends_at,
                branch_tokens=BRANCH_TOKENS[Family.LLAMA],
            ),
            prompt_tokens=len(ids),
        )
        for prompt, ids in zip(prompts, encoded, strict=True)
    )
    chats: tuple[PromptReference, ...] = ()
    template_tokens: tuple[str, ...] = ()
    if checkpoint is not None:
        chats, template_tokens = chat_references(
            model, tokenizer, spec, checkpoint, tolerance=tolerance, ends_at=ends_at
        )
    return JudgeReference(
        Family.LLAMA, spec.hf_repo, spec.revision, dtype, tolerance, followed + chats, template_tokens
    )


def _fits(encoded: list[list[int]], model: Llama, spec: ModelSpec, what: str) -> None:
    longest = max(len(ids) for ids in encoded)
    if longest > spec.max_input_len:
        raise UserError(
            f"the judge's {what} take up to {longest} tokens, the model's max_input_len is {spec.max_input_len}"
        )
    top = max(max(ids) for ids in encoded)
    if top >= model.vocab_size:
        raise UserError(
            f"the tokenizer produces token id {top} but the checkpoint's vocab_size is {model.vocab_size}: pass the "
            "tokenizer of the model"
        )


def expected_rendering(
    spec: ModelSpec, config: Mapping[str, Any], messages: Sequence[Mapping[str, str]], now: datetime
) -> str | None:
    """The conversation as the revision's own template writes it, as the engine is sent it
    (:func:`tritonft.engines.vllm.chat.engine_prompt`, what the gateway sends), required to hold every message's
    content in order (:func:`tritonft.probe.judge_reference.rendering_problems`): a template that drops one has no
    expected rendering, and the revision is refused with what it drops. None when the template refuses the
    conversation (``raise_exception``, as a template without a system role does): users get that refusal as an
    error, not a wrong answer, and there is no chat to judge."""
    from tritonft.engines.vllm.chat import ChatTemplateError, engine_prompt

    try:
        rendered = engine_prompt(config, messages, now=now)
    except ChatTemplateError:
        return None
    problems = rendering_problems(messages, rendered)
    if problems:
        raise UserError(
            f"{spec.hf_repo}@{spec.revision}: its chat template renders the judge's conversation wrong: "
            + "; ".join(problems)
            + ". Users' chats through the gateway would lose that text. Pin a revision whose chat template renders "
            "every message (docs/judge.md, the expected rendering)"
        )
    return rendered


def chat_references(
    model: Llama,
    tokenizer: Any,
    spec: ModelSpec,
    checkpoint: Path,
    *,
    tolerance: float,
    ends_at: frozenset[int],
) -> tuple[tuple[PromptReference, ...], tuple[str, ...]]:
    """The judge's conversations (:data:`~tritonft.probe.judge_reference.CHAT_CONVERSATIONS`) in their expected
    rendering (:func:`expected_rendering`), tokenized as vLLM tokenizes the text it is sent, followed greedily over
    :data:`~tritonft.probe.judge_reference.CHAT_STEPS` with their branches; and the template's tokens (the
    tokenizer's special tokens the rendering writes, and its configured ones). For a checkpoint without a chat
    template (a base model: no chat is served for it) nothing."""
    from tritonft.engines.vllm.chat import ChatTemplateError, read_tokenizer_config, special_token_texts, template_of

    config = read_tokenizer_config(checkpoint)
    try:
        template_of(config)
    except ChatTemplateError:
        return (), ()
    steps = min(CHAT_STEPS, spec.max_output_len)
    now = datetime.now(UTC).replace(microsecond=0)
    expected = [expected_rendering(spec, config, messages, now) for messages in CHAT_CONVERSATIONS]
    judged = [(messages, text) for messages, text in zip(CHAT_CONVERSATIONS, expected, strict=True) if text]
    if not judged:
        return (), ()
    conversations = [messages for messages, _ in judged]
    rendered = [text for _, text in judged]
    encoded = [tokenizer.encode(text, add_special_tokens=True) for text in rendered]
    _fits(encoded, model, spec, "conversations")
    chats = tuple(
        replace(
            follow(
                model,
                tokenizer,
                conversation_label(messages),
                ids,
                steps=steps,
                tolerance=tolerance,
                end_ids=ends_at,
                branch_tokens=BRANCH_TOKENS[Family.LLAMA],
            ),
            prompt_tokens=len(ids),
            messages=tuple(dict(m) for m in messages),
            rendered=text,
            rendered_at=now.isoformat(),
        )
        for messages, text, ids in zip(conversations, rendered, encoded, strict=True)
    )
    written = [t for t in template_special_tokens(checkpoint) if any(t in text for text in rendered)]
    return chats, tuple(dict.fromkeys([*written, *special_token_texts(config)]))


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
