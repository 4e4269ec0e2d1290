"""The judge of a generator against its own original weights: the reference a reference Job publishes, and the rule.

The reference Job of a revision (beside its conversion Job) downloads the verified Hugging Face checkpoint; it runs
the CPU reference (:mod:`tritonft.reference`, proven equal to transformers) on those weights at fp32 and publishes,
with the repository of that revision, a :class:`JudgeReference`: for each of the judge's prompts, the reference's
greedy answer (exactly as the ensemble's postprocessing would return it) and, at each step, the *near-ties*: the
tokens whose log-probability is within :attr:`JudgeReference.tolerance_nats` of the reference's choice, each with the
text the served answer would start with had it taken that token (:mod:`tritonft.reference.judge` computes it).

The rule (:func:`judge_against_reference`), one prompt at a time:

* the served answer starts with the reference's greedy answer (or equals it, when the reference ended before its
  last step): the served model chose every token the reference chose;
* or it follows the reference up to one step and takes there one of that step's near-ties: the only choice a served
  precision (fp16/bf16 on a GPU) may make differently from the fp32 original, since its logits differ from the
  reference's by less than the tolerance. A near-tie the reference followed (a *branch*: its greedy continuation
  after that token, within :data:`BRANCH_TOKENS` per prompt) is compared to the branch's end by the same rule, one
  level deep; after a near-tie with no branch (the budget spent) nothing more is compared.

A chat (:attr:`PromptReference.messages`, an instruct model's conversation rendered by its chat template) must
also end where the reference's answer ends (vLLM's ``finish_reason`` ``stop``, not cut by its length), carry none
of the template's tokens (:attr:`JudgeReference.template_tokens`), and be asked with every message's content in its
rendered prompt (:func:`rendering_problems`). Where the server says how many tokens it made of the prompt, they must
be the reference's (:func:`served_prompt_problem`): otherwise the two answers are not answers to the same prompt.

Every prompt must pass. A wrong model (random or another seed's weights, a conversion at the wrong dtype, a TP
split that scrambles heads) does not: its first token is already outside the reference's choice and near-ties.
A failure names the prompt, the served answer and the reference's.

Transport-free: the functions take the answers; how they were asked (directly, through a gateway) is the caller's.
The reference travels inside the served ensemble's ``config.pbtxt`` as the string parameter
:data:`REFERENCE_PARAMETER`, so the judge of a version reads that version's reference from the very server it
judges (``GET /v2/models/<model>/config``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tritonft.spec import Family, ModelSpec

REFERENCE_PARAMETER = "tritonft_judge_reference"
"""The ensemble's ``config.pbtxt`` parameter holding the reference as JSON."""
REFERENCE_FILE = "judge-reference.json"
"""The reference's file beside the converted checkpoint in the model store (its reference Job writes it)."""
FORMAT = 2
READABLE_FORMATS = (1, 2)
"""Format 1 (before chats, branches and prompt token counts) is read with the rule it can carry."""

GPT_REFERENCE_PROMPTS: tuple[str, ...] = (
    "Once upon a time, in a small village by the sea,",
    "The capital of France is",
    "In 1969, the first humans to walk on the Moon were",
    "The three primary colors are",
)
"""GPT-2's, GPT-J's and the Llama family's judged prompts (the first is the probe's own): story, fact, history, list.
A Llama-family model (base or instruct) is asked them as plain completions, as vLLM's ``generate`` receives them."""
REFERENCE_STEPS: Mapping[Family, int] = {Family.T5: 64, Family.GPT2: 32, Family.GPTJ: 32, Family.LLAMA: 16}
"""Greedy tokens the reference follows per prompt (capped by the model's ``max_output_len``): a whole translated
sentence for T5, a short continuation for GPT, 16 tokens for a Llama-family model (at 8B parameters each token is
16 GFLOP on the Job's CPU; the judge asks vLLM for exactly that many)."""
MAX_NEAR_TIES = 4
"""Near-ties recorded per step, at most (the closest first)."""
BRANCH_TOKENS: Mapping[Family, int] = {Family.T5: 8, Family.GPT2: 32, Family.GPTJ: 32, Family.LLAMA: 16}
"""Greedy tokens the reference spends per prompt following its near-ties' branches (in step order, each to the
prompt's step limit or its end, the last one as far as the budget goes): the whole answer for GPT and the Llama
family's first branched near-tie, 8 tokens for T5 (its 8 x 64 steps already make t5-3b's the longest reference
step). Bounded so the step at most doubles (T5: +1/8) and its Job's deadline stays within the sizing
(``components.common.sizing``)."""

CHAT_CONVERSATIONS: tuple[tuple[Mapping[str, str], ...], ...] = (
    (
        {"role": "system", "content": "Answer with exactly one word, in French."},
        {"role": "user", "content": "What color is the sky on a clear day?"},
    ),
)
"""The conversation an instruct model (a Llama-family model whose checkpoint has a chat template) is also judged on:
its system message's instruction changes the answer (one French word, where the user's question alone asks for an
English sentence), so a template that drops it changes what the model is asked, and the answer of a trained model
is short, so the reference ends at the model's end-of-turn within :data:`CHAT_STEPS`."""
CHAT_STEPS = REFERENCE_STEPS[Family.LLAMA]
"""Greedy tokens the reference follows per chat (capped by the model's ``max_output_len``): the plain prompts'
steps, so the judge asks vLLM for one ``max_tokens`` for all of them."""


def reference_greedy_tokens(family: Family, max_output_len: int, *, chats: bool = False) -> int:
    """The greedy tokens the reference runs at most: each judged prompt's steps and its branches' budget
    (:data:`BRANCH_TOKENS`), and with ``chats`` each conversation's (the step's cost: ``components.common.sizing``)."""
    steps = min(REFERENCE_STEPS[family], max_output_len)
    tokens = len(reference_prompts(family)) * (steps + BRANCH_TOKENS[family])
    if chats:
        tokens += len(CHAT_CONVERSATIONS) * (min(CHAT_STEPS, max_output_len) + BRANCH_TOKENS[family])
    return tokens


def reference_prompts(family: Family) -> tuple[str, ...]:
    """The prompts a generator of ``family`` is judged on: T5 the bundled translation set's, GPT these."""
    if family is Family.T5:
        from tritonft.probe.expectations import load_translation_set

        return tuple(s.prompt for s in load_translation_set().samples())
    if family in (Family.GPT2, Family.GPTJ, Family.LLAMA):
        return GPT_REFERENCE_PROMPTS
    raise ValueError(f"no reference prompts for family {family}")


REFERENCE_ARCHITECTURES = ("LlamaForCausalLM", "Qwen2ForCausalLM")
"""The Llama-family architectures (``config.json`` ``architectures``, a stack's ``vllm.architecture``) whose CPU
forward the project has (:mod:`tritonft.reference.llama`): Llama 2/3.x and Qwen2/2.5."""


def has_reference(spec: ModelSpec) -> bool:
    """Whether ``spec``'s judge compares its answers with the reference of its original weights: every
    FasterTransformer generator (T5, GPT-2, GPT-J), and a Llama-family model whose architecture the CPU forward
    computes (:data:`REFERENCE_ARCHITECTURES`). Another vLLM architecture (Mistral, Qwen3, Gemma, Phi-3) is still
    judged by the older rule only: a non-empty answer (docs/judge.md, "Not covered")."""
    if spec.family.is_fastertransformer:
        return True
    return spec.family.is_vllm and spec.vllm is not None and spec.vllm.architecture in REFERENCE_ARCHITECTURES


TOLERANCE_NATS: Mapping[str, float] = {"fp32": 0.1, "fp16": 0.5, "bf16": 1.5}
"""How far (in log-probability, nats) below the reference's choice a token may be and still be a near-tie that the
served precision may pick instead, by the served ``dtype``. fp16 keeps 11 significant bits, bf16 8 (8x coarser);
see docs/judge.md for the derivation and benchmarks/BENCHMARKS.md for the margins measured."""


VLLM_DTYPES: Mapping[str, str] = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}
"""The dtype a vLLM model computes in (:func:`tritonft.engines.vllm.rules.served_dtype`) by the judge's names."""


def tolerance_for(dtype: str) -> float:
    """The near-tie tolerance of a served ``dtype`` (``fp32``, ``fp16``, ``bf16``)."""
    try:
        return TOLERANCE_NATS[dtype]
    except KeyError:
        raise ValueError(f"no judge tolerance for dtype {dtype!r}; one of {sorted(TOLERANCE_NATS)}") from None


@dataclass(frozen=True)
class Branch:
    """The reference's greedy continuation after one of its near-ties: ``answer`` is the whole answer along it (the
    tie's text included), over ``steps`` tokens from the prompt; ``ended``: it chose an end token there;
    ``near_ties``: its own, which end the comparison (one level of branches)."""

    answer: str
    steps: int
    ended: bool
    near_ties: tuple[NearTie, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "answer": self.answer,
            "steps": self.steps,
            "ended": self.ended,
            "near_ties": [t.to_dict() for t in self.near_ties],
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Branch:
        return cls(
            str(raw["answer"]),
            int(raw["steps"]),
            bool(raw["ended"]),
            tuple(NearTie.from_dict(t) for t in raw.get("near_ties") or ()),
        )


@dataclass(frozen=True)
class NearTie:
    """A token within the tolerance of the reference's choice at ``step``: ``text`` is what the served answer starts
    with had it chosen that token there (``ends``: that token ends the answer, so the answer is exactly ``text``);
    ``branch``: the reference's greedy continuation after it, when the reference followed it."""

    step: int
    gap: float
    """log p(reference's choice) - log p(this token), nats."""
    text: str
    ends: bool = False
    branch: Branch | None = None

    def to_dict(self) -> dict[str, Any]:
        raw: dict[str, Any] = {"step": self.step, "gap": round(self.gap, 4), "text": self.text, "ends": self.ends}
        if self.branch is not None:
            raw["branch"] = self.branch.to_dict()
        return raw

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> NearTie:
        branch = raw.get("branch")
        return cls(
            int(raw["step"]),
            float(raw["gap"]),
            str(raw["text"]),
            bool(raw.get("ends", False)),
            Branch.from_dict(branch) if branch else None,
        )


@dataclass(frozen=True)
class PromptReference:
    """The reference's greedy answer to one prompt and its near-ties."""

    prompt: str
    answer: str
    """The reference's answer over :attr:`steps` greedy tokens, as the ensemble returns it (prompt not echoed)."""
    steps: int
    ended: bool
    """The reference chose the end token within ``steps``: the served answer must be exactly :attr:`answer`."""
    near_ties: tuple[NearTie, ...] = ()
    min_gap: float = float("inf")
    """The smallest top-1 vs top-2 log-probability gap over the steps (the prompt's margin), nats."""
    prompt_tokens: int | None = None
    """How many tokens the reference made of the prompt (its special tokens included), when the server can say how
    many it made (vLLM's ``num_input_tokens``); None for FasterTransformer's ensembles, which do not say."""
    messages: tuple[Mapping[str, str], ...] = ()
    """A chat's conversation (``role``/``content``), empty for a plain prompt. Then :attr:`prompt` names the
    conversation (:func:`conversation_label`) and :attr:`rendered` is the expected rendering the reference ran."""
    rendered: str = ""
    """A chat's expected rendering: the conversation as the revision's own template writes it, holding every
    message's content in order (the text vLLM is sent, its BOS left to the tokenizer as the gateway leaves it)."""
    rendered_at: str = ""
    """A chat's moment of rendering (ISO 8601): the judge renders at the same one, so a template that writes today's
    date (``strftime_now``, Llama 3.2's) writes the same text for both."""

    @property
    def is_chat(self) -> bool:
        return bool(self.messages)

    def to_dict(self) -> dict[str, Any]:
        raw: dict[str, Any] = {
            "prompt": self.prompt,
            "answer": self.answer,
            "steps": self.steps,
            "ended": self.ended,
            "near_ties": [t.to_dict() for t in self.near_ties],
            "min_gap": round(self.min_gap, 4) if self.min_gap != float("inf") else None,
        }
        if self.prompt_tokens is not None:
            raw["prompt_tokens"] = self.prompt_tokens
        if self.messages:
            raw["messages"] = [dict(m) for m in self.messages]
            raw["rendered"] = self.rendered
            raw["rendered_at"] = self.rendered_at
        return raw

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> PromptReference:
        gap = raw.get("min_gap")
        tokens = raw.get("prompt_tokens")
        return cls(
            prompt=str(raw["prompt"]),
            answer=str(raw["answer"]),
            steps=int(raw["steps"]),
            ended=bool(raw["ended"]),
            near_ties=tuple(NearTie.from_dict(t) for t in raw.get("near_ties") or ()),
            min_gap=float(gap) if gap is not None else float("inf"),
            prompt_tokens=int(tokens) if tokens is not None else None,
            messages=tuple({"role": str(m["role"]), "content": str(m["content"])} for m in raw.get("messages") or ()),
            rendered=str(raw.get("rendered", "")),
            rendered_at=str(raw.get("rendered_at", "")),
        )


def conversation_label(messages: Sequence[Mapping[str, str]]) -> str:
    """How a failed judgement names a chat: each message as ``role: content``, joined by `` | ``."""
    return " | ".join(f"{m['role']}: {m['content']}" for m in messages)


def rendering_problems(messages: Sequence[Mapping[str, str]], rendered: str) -> list[str]:
    """What a chat template's ``rendered`` prompt lacks of the conversation: every message's content must appear in
    it, in order (the expected rendering's rule; a template that drops the system message fails it)."""
    problems: list[str] = []
    at = 0
    for message in messages:
        found = rendered.find(message["content"], at)
        if found < 0:
            where = "at all" if message["content"] not in rendered else "after the previous message's"
            problems.append(f"the {message['role']} message's content {message['content']!r} is not in it {where}")
            continue
        at = found + len(message["content"])
    return problems


@dataclass(frozen=True)
class JudgeReference:
    """What the judge of one model version compares its answers with (one per conversion of a revision)."""

    family: Family
    hf_repo: str
    revision: str
    served_dtype: str
    tolerance_nats: float
    prompts: tuple[PromptReference, ...]
    template_tokens: tuple[str, ...] = ()
    """The tokenizer's special tokens as text (``<|eot_id|>``, ``<|im_end|>``, ...): a chat answer carrying one
    leaks the template."""

    @property
    def plain(self) -> tuple[PromptReference, ...]:
        """The plain prompts (asked as completions)."""
        return tuple(p for p in self.prompts if not p.is_chat)

    @property
    def chats(self) -> tuple[PromptReference, ...]:
        """The chats (asked through the candidate's chat template)."""
        return tuple(p for p in self.prompts if p.is_chat)

    def to_dict(self) -> dict[str, Any]:
        raw: dict[str, Any] = {
            "format": FORMAT,
            "family": str(self.family),
            "hf_repo": self.hf_repo,
            "revision": self.revision,
            "served_dtype": self.served_dtype,
            "tolerance_nats": self.tolerance_nats,
            "prompts": [p.to_dict() for p in self.prompts],
        }
        if self.template_tokens:
            raw["template_tokens"] = list(self.template_tokens)
        return raw

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, sort_keys=True)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> JudgeReference:
        if raw.get("format") not in READABLE_FORMATS:
            raise ValueError(f"judge reference format {raw.get('format')!r}, expected one of {READABLE_FORMATS}")
        prompts = tuple(PromptReference.from_dict(p) for p in raw["prompts"])
        if not prompts:
            raise ValueError("the judge reference has no prompts")
        return cls(
            family=Family(raw["family"]),
            hf_repo=str(raw["hf_repo"]),
            revision=str(raw["revision"]),
            served_dtype=str(raw["served_dtype"]),
            tolerance_nats=float(raw["tolerance_nats"]),
            prompts=prompts,
            template_tokens=tuple(str(t) for t in raw.get("template_tokens") or ()),
        )

    @classmethod
    def from_json(cls, text: str) -> JudgeReference:
        return cls.from_dict(json.loads(text))

    @property
    def min_gap(self) -> float:
        """The smallest top-1 vs top-2 gap over every prompt's steps (the reference's margin on the judge's prompts)."""
        return min(p.min_gap for p in self.prompts)


def reference_from_model_config(config: Mapping[str, Any]) -> JudgeReference | None:
    """The reference a served model's configuration (``GET /v2/models/<m>/config`` as JSON) carries; None when it
    carries none. ``ValueError`` when it carries one that cannot be read."""
    parameters = config.get("parameters") or {}
    raw = parameters.get(REFERENCE_PARAMETER) if isinstance(parameters, Mapping) else None
    if raw is None:
        return None
    text = raw.get("string_value") if isinstance(raw, Mapping) else raw
    try:
        return JudgeReference.from_json(str(text))
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"the model's {REFERENCE_PARAMETER} parameter is not a judge reference: {exc}") from exc


def _normal(text: str) -> str:
    """Whitespace collapsed: detokenizers differ in where they put spaces, not in the words."""
    return " ".join(text.split())


def _starts_with(answer: str, prefix: str) -> bool:
    return _normal(answer).startswith(_normal(prefix))


def _equals(answer: str, expected: str) -> bool:
    return _normal(answer) == _normal(expected)


def _takes(answer: str, tie: str, reference: str) -> bool:
    """Whether ``answer`` took the near-tie whose answer so far is ``tie``: whitespace collapsed, unless collapsing
    makes the tie the reference's own words (it differs only in whitespace): then only the exact text tells an answer
    that took it from one that left the reference for any other token there."""
    if _normal(reference).startswith(_normal(tie)):
        return answer.startswith(tie)
    return _starts_with(answer, tie)


@dataclass(frozen=True)
class ServedAnswer:
    """What the judged server answered to one prompt: the text and, where it says them, how the answer ended and how
    many tokens it made of the prompt."""

    text: str
    finish_reason: str | None = None
    """vLLM's: ``stop`` (an end token), ``length`` (cut at ``max_tokens``); None where the server does not say."""
    prompt_tokens: int | None = None
    """The server's count of the prompt's tokens (vLLM's ``num_input_tokens``); None where it does not say."""
    prompt_problems: tuple[str, ...] = ()
    """A chat: what the candidate's rendering of the conversation lacks (:func:`rendering_problems`)."""


@dataclass(frozen=True)
class PromptVerdict:
    ok: bool
    detail: str
    through_tie: bool = False


@dataclass(frozen=True)
class _Followed:
    """How an answer followed a reference path: ``how`` it passed (None: it did not; ``left`` says where it left a
    branch it took), and whether the path it followed ended there (None: not known, after an unfollowed near-tie)."""

    how: str | None
    left: str = ""
    ended: bool | None = None


def _on_path(answer: str, expected: str, ended: bool, ties: Sequence[NearTie], steps: int) -> _Followed:
    """How ``answer`` follows one reference path (its greedy ``expected`` answer over ``steps`` tokens, ``ended`` or
    not, and its near-ties)."""
    followed = _equals(answer, expected) if ended else _starts_with(answer, expected)
    if followed:
        return _Followed(f"the reference's {steps} greedy tokens", ended=ended)
    left = ""
    for tie in ties:
        # A tie whose text the reference's own answer starts with, to the character, says nothing more (a token that
        # decodes to nothing). Compared exactly, not whitespace collapsed: both come from the reference's own
        # detokenizer, and a tie that differs only in whitespace ("Paris.\n" where the reference says "Paris. The")
        # is a real choice a served precision may make; collapsed, it looked like nothing and a right model that took
        # it failed.
        if not tie.ends and expected.startswith(tie.text):
            continue
        if tie.ends:
            if _equals(answer, tie.text):
                return _Followed(
                    f"the reference's tokens up to step {tie.step}, then a near-tie that ends ({tie.gap:.2f} nats)",
                    ended=True,
                )
            continue
        if not _takes(answer, tie.text, expected):
            continue
        if tie.branch is None:
            return _Followed(
                f"the reference's tokens up to step {tie.step}, then a near-tie ({tie.gap:.2f} nats; not compared "
                "after it: no branch followed there)"
            )
        branch = tie.branch
        along = _on_path(answer, branch.answer, branch.ended, branch.near_ties, branch.steps)
        if along.how is not None:
            return _Followed(
                f"the reference's tokens up to step {tie.step}, then a near-tie ({tie.gap:.2f} nats) and the "
                f"reference's branch after it: {along.how}",
                ended=along.ended,
            )
        left = (
            f"; it took the near-tie at step {tie.step} ({tie.gap:.2f} nats) but then left the reference's branch "
            f"after it, {_shorten(branch.answer)!r}{' (ended)' if branch.ended else ''}"
        )
    return _Followed(None, left)


def chat_problems(
    reference: PromptReference, served: ServedAnswer, template_tokens: Sequence[str], *, path_ended: bool | None
) -> list[str]:
    """What a chat's served answer does wrong besides its words: asked without a message of the conversation, cut by
    its length where the reference path it followed (``path_ended``) ended at the model's end-of-turn, or carrying a
    template token. ``path_ended`` None: where the path goes after a near-tie no branch followed is not known, so a
    right model that took it may well be cut by its length there: not checked."""
    problems = [f"the candidate's chat template renders the conversation wrong: {p}" for p in served.prompt_problems]
    if path_ended and served.finish_reason not in (None, "stop"):
        problems.append(
            f"the answer did not end at the model's end-of-turn (finish_reason {served.finish_reason!r}) where the "
            "reference's answer ended"
        )
    leaked = [t for t in template_tokens if t and t in served.text]
    if leaked:
        problems.append(f"the answer carries the template's token(s) {', '.join(repr(t) for t in leaked)}")
    return problems


def served_prompt_problem(reference: PromptReference, served: ServedAnswer) -> str | None:
    """Why the served answer is not an answer to the reference's prompt: the server made another number of tokens of
    it than the reference did (another tokenizer, or for a chat another rendering); None when they agree or either
    count is unknown."""
    if reference.prompt_tokens is None or served.prompt_tokens is None:
        return None
    if reference.prompt_tokens == served.prompt_tokens:
        return None
    what = "the conversation as the candidate's template renders it" if reference.is_chat else "the prompt"
    return f"the server made {served.prompt_tokens} tokens of {what}, the reference {reference.prompt_tokens} of " + (
        "the expected rendering" if reference.is_chat else "it"
    )


def judge_prompt(
    reference: PromptReference, answer: str | ServedAnswer, template_tokens: Sequence[str] = ()
) -> PromptVerdict:
    """One served ``answer`` against the reference's (the module's rule)."""
    served = answer if isinstance(answer, ServedAnswer) else ServedAnswer(answer)
    path = _on_path(served.text, reference.answer, reference.ended, reference.near_ties, reference.steps)
    problems: list[str] = []
    if reference.is_chat:
        problems = chat_problems(reference, served, template_tokens, path_ended=path.ended)
        mismatch = served_prompt_problem(reference, served)
        problems += [mismatch] if mismatch else []
    if path.how is not None and not problems:
        return PromptVerdict(True, path.how, through_tie="near-tie" in path.how)
    said = (
        f"the answer to {reference.prompt!r} is not the reference's: served {_shorten(served.text)!r}, reference "
        f"{_shorten(reference.answer)!r}{'' if not reference.ended else ' (ended)'}"
    )
    if path.how is None:
        said += path.left or f"; none of its {len(reference.near_ties)} near-tie(s) taken"
    return PromptVerdict(False, said + "".join(f"; {p}" for p in problems))


def _shorten(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass(frozen=True)
class ReferenceVerdict:
    ok: bool
    detail: str


def judge_against_reference(reference: JudgeReference, answers: Sequence[str | ServedAnswer]) -> ReferenceVerdict:
    """Every served answer (one per reference prompt, same order) follows the reference (the module's rule). A plain
    prompt the server made another number of tokens of than the reference refuses the verdict: the reference was
    computed for another tokenizer, so its answers say nothing of this server's."""
    if len(answers) != len(reference.prompts):
        return ReferenceVerdict(False, f"got {len(answers)} answers for {len(reference.prompts)} reference prompts")
    origin = f"{reference.hf_repo}@{reference.revision[:12]}"
    served = [a if isinstance(a, ServedAnswer) else ServedAnswer(a) for a in answers]
    refused = [
        f"{p.prompt!r}: {problem}"
        for p, a in zip(reference.prompts, served, strict=True)
        if not p.is_chat and (problem := served_prompt_problem(p, a)) is not None
    ]
    if refused:
        return ReferenceVerdict(
            False,
            f"the reference of {origin} cannot judge this server: it does not tokenize the judged prompts as the "
            f"reference did ({'; '.join(refused)}); the reference was computed from other tokenizer files than the "
            "server's: re-run the reference step on the files the server serves",
        )
    verdicts = [judge_prompt(p, a, reference.template_tokens) for p, a in zip(reference.prompts, served, strict=True)]
    failed = [v.detail for v in verdicts if not v.ok]
    if failed:
        return ReferenceVerdict(
            False,
            f"{len(failed)} of {len(verdicts)} answers differ from the reference of the original weights ({origin}, "
            f"fp32 CPU; near-ties within {reference.tolerance_nats:g} nats for {reference.served_dtype}): "
            + "; ".join(failed),
        )
    exact = sum(1 for v in verdicts if not v.through_tie)
    chats = len(reference.chats)
    return ReferenceVerdict(
        True,
        f"{len(verdicts)} answers follow the reference of the original weights ({origin}): {exact} exactly, "
        f"{len(verdicts) - exact} through a near-tie within {reference.tolerance_nats:g} nats"
        + (f"; {chats} of them a chat through the candidate's chat template" if chats else ""),
    )
