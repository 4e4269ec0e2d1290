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
  reference's by less than the tolerance. What it answers after that step is not compared (the reference has no
  path there).

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
FORMAT = 1

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
class NearTie:
    """A token within the tolerance of the reference's choice at ``step``: ``text`` is what the served answer starts
    with had it chosen that token there (``ends``: that token ends the answer, so the answer is exactly ``text``)."""

    step: int
    gap: float
    """log p(reference's choice) - log p(this token), nats."""
    text: str
    ends: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.step, "gap": round(self.gap, 4), "text": self.text, "ends": self.ends}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> NearTie:
        return cls(int(raw["step"]), float(raw["gap"]), str(raw["text"]), bool(raw.get("ends", False)))


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

    def to_dict(self) -> dict[str, Any]:
        return {
            "prompt": self.prompt,
            "answer": self.answer,
            "steps": self.steps,
            "ended": self.ended,
            "near_ties": [t.to_dict() for t in self.near_ties],
            "min_gap": round(self.min_gap, 4) if self.min_gap != float("inf") else None,
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> PromptReference:
        gap = raw.get("min_gap")
        return cls(
            prompt=str(raw["prompt"]),
            answer=str(raw["answer"]),
            steps=int(raw["steps"]),
            ended=bool(raw["ended"]),
            near_ties=tuple(NearTie.from_dict(t) for t in raw.get("near_ties") or ()),
            min_gap=float(gap) if gap is not None else float("inf"),
        )


@dataclass(frozen=True)
class JudgeReference:
    """What the judge of one model version compares its answers with (one per conversion of a revision)."""

    family: Family
    hf_repo: str
    revision: str
    served_dtype: str
    tolerance_nats: float
    prompts: tuple[PromptReference, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "family": str(self.family),
            "hf_repo": self.hf_repo,
            "revision": self.revision,
            "served_dtype": self.served_dtype,
            "tolerance_nats": self.tolerance_nats,
            "prompts": [p.to_dict() for p in self.prompts],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, sort_keys=True)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> JudgeReference:
        if raw.get("format") != FORMAT:
            raise ValueError(f"judge reference format {raw.get('format')!r}, expected {FORMAT}")
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
class PromptVerdict:
    ok: bool
    detail: str


def judge_prompt(reference: PromptReference, answer: str) -> PromptVerdict:
    """One served ``answer`` against the reference's (the module's rule)."""
    followed = _equals(answer, reference.answer) if reference.ended else _starts_with(answer, reference.answer)
    if followed:
        return PromptVerdict(True, f"the reference's {reference.steps} greedy tokens")
    for tie in reference.near_ties:
        # A tie whose text the reference's own answer starts with, to the character, says nothing more (a token that
        # decodes to nothing). Compared exactly, not whitespace collapsed: both come from the reference's own
        # detokenizer, and a tie that differs only in whitespace ("Paris.\n" where the reference says "Paris. The")
        # is a real choice a served precision may make; collapsed, it looked like nothing and a right model that took
        # it failed.
        if not tie.ends and reference.answer.startswith(tie.text):
            continue
        if _equals(answer, tie.text) if tie.ends else _takes(answer, tie.text, reference.answer):
            return PromptVerdict(
                True, f"the reference's tokens up to step {tie.step}, then a near-tie ({tie.gap:.2f} nats)"
            )
    return PromptVerdict(
        False,
        f"the answer to {reference.prompt!r} is not the reference's: served {_shorten(answer)!r}, reference "
        f"{_shorten(reference.answer)!r}{'' if not reference.ended else ' (ended)'}; "
        f"none of its {len(reference.near_ties)} near-tie(s) taken",
    )


def _shorten(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass(frozen=True)
class ReferenceVerdict:
    ok: bool
    detail: str


def judge_against_reference(reference: JudgeReference, answers: Sequence[str]) -> ReferenceVerdict:
    """Every served answer (one per reference prompt, same order) follows the reference (the module's rule)."""
    if len(answers) != len(reference.prompts):
        return ReferenceVerdict(False, f"got {len(answers)} answers for {len(reference.prompts)} reference prompts")
    verdicts = [judge_prompt(p, a) for p, a in zip(reference.prompts, answers, strict=True)]
    failed = [v.detail for v in verdicts if not v.ok]
    origin = f"{reference.hf_repo}@{reference.revision[:12]}"
    if failed:
        return ReferenceVerdict(
            False,
            f"{len(failed)} of {len(verdicts)} answers differ from the reference of the original weights ({origin}, "
            f"fp32 CPU; near-ties within {reference.tolerance_nats:g} nats for {reference.served_dtype}): "
            + "; ".join(failed),
        )
    exact = sum(1 for v in verdicts if "near-tie" not in v.detail)
    return ReferenceVerdict(
        True,
        f"{len(verdicts)} answers follow the reference of the original weights ({origin}): {exact} exactly, "
        f"{len(verdicts) - exact} through a near-tie within {reference.tolerance_nats:g} nats",
    )
