"""Bad stack configurations generated from the schema: every knob x every way it can be wrong.

A knob added to ``components/settings/schema.py`` is covered by these cases the day it is added: its type, bounds,
choices, grammar (``format``), platform and spelling each yield a case, and the completeness checks in
``test_bad_configs.py`` refuse a knob the generator cannot exercise (an unbounded integer, a knob without a
sample value).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from components.settings.schema import FORMATS, MODEL_KNOBS, STACK_KNOBS, Knob
from tests.components.settings.test_validation import T5_SMALL, aws_stack, kubernetes_stack

WRONG_TYPE: dict[str, Any] = {
    "integer": "twelve",
    "boolean": "maybe",
    "array": {"not": "a list"},
    "object": ["not", "a", "mapping"],
    "string": ["not", "a", "string"],
    "quantity": ["not", "a", "quantity"],
}
SAMPLES: dict[str, Any] = {
    # Knobs with neither a default, choices nor a grammar: one valid value each.
    "kubeconfig": "/home/ops/.kube/config",
    "kubeContext": "kind-gpu",
    "gpuNodes": 2,
    "gpuNodeCpus": 16,
    "gpuNodeDiskGiB": 200,
    "storageSizeGiB": 40,
    "protectStorage": True,
    "protectInfrastructure": True,
    "ingressTls": False,
    "monitoring": False,
    "maxConcurrentPerClient": 16,
    "gemmTuning": False,
    "scaleDownStabilizationSeconds": 900,
    "hfToken": "hf_token_value",
    "ingressHtpasswd": "user:$apr1$hash",
    "architecture": {"dModel": 512, "numHeads": 8, "numLayers": 6, "dFf": 2048, "vocabSize": 32128},
    "models": [dict(T5_SMALL)],
    "normalize": True,
    "maxSeqLength": 256,
}


@dataclass(frozen=True)
class Case:
    """One defect in an otherwise valid stack, and the key path every resulting message must name."""

    id: str
    values: dict[str, Any]
    path: str
    suggests: str = ""
    """For a misspelt key: the key the message must suggest."""
    secret_keys: tuple[str, ...] = ()
    """Keys stored as secrets (a secret knob's value is checked as a secret, as the engine passes it)."""


def sample(knob: Knob) -> Any:
    """A valid value of ``knob``."""
    if knob.key in SAMPLES:
        return SAMPLES[knob.key]
    if knob.default is not None:
        return knob.default
    if knob.choices:
        return int(knob.choices[0]) if knob.type == "integer" else knob.choices[0]
    if knob.format:
        return FORMATS[knob.format].good
    raise KeyError(f"no sample value for knob {knob.key!r}: add one to SAMPLES")


def base_for(knob: Knob) -> dict[str, Any]:
    """A valid stack on the knob's own platform."""
    return aws_stack() if knob.scope == "aws" else kubernetes_stack()


def misspelt(key: str) -> str:
    return key + key[-1]


def defects(knob: Knob) -> list[tuple[str, Any]]:
    """(kind, bad value) for every way this knob's value can be wrong on its own."""
    found: list[tuple[str, Any]] = [("wrong-type", WRONG_TYPE[knob.type])]
    if knob.type == "integer":
        if knob.minimum is not None:
            found.append(("below-minimum", knob.minimum - 1))
        if knob.maximum is not None:
            found.append(("above-maximum", knob.maximum + 1))
        if knob.choices:
            allowed = {int(c) for c in knob.choices}
            found.append(("not-a-choice", next(n for n in range(1, 100) if n not in allowed)))
    elif knob.choices:
        found.append(("not-a-choice", ["not-a-choice"] if knob.type == "array" else "not-a-choice"))
    if knob.format:
        found.append((f"bad-{knob.format}", FORMATS[knob.format].bad))
    if knob.max_length is not None:
        found.append(("too-long", "a" * (knob.max_length + 1)))
    return found


def stack_cases() -> list[Case]:
    cases: list[Case] = []
    for knob in STACK_KNOBS:
        secret = (knob.key,) if knob.secret else ()
        for kind, bad in defects(knob):
            cases.append(Case(f"{knob.key}:{kind}", base_for(knob) | {knob.key: bad}, knob.key, secret_keys=secret))
        if knob.scope != "any":
            other = kubernetes_stack() if knob.scope == "aws" else aws_stack()
            cases.append(Case(f"{knob.key}:wrong-platform", other | {knob.key: sample(knob)}, knob.key))
        typo = misspelt(knob.key)
        cases.append(Case(f"{knob.key}:misspelt", base_for(knob) | {typo: sample(knob)}, typo, suggests=knob.key))
        if knob.required:
            values = {k: v for k, v in base_for(knob).items() if k != knob.key}
            cases.append(Case(f"{knob.key}:missing", values, knob.key))
    return cases


def model_cases() -> list[Case]:
    cases: list[Case] = []
    for knob in MODEL_KNOBS:
        path = f"models[0].{knob.key}"
        for kind, bad in defects(knob):
            cases.append(Case(f"{path}:{kind}", kubernetes_stack(models=[dict(T5_SMALL) | {knob.key: bad}]), path))
        typo = misspelt(knob.key)
        entry = dict(T5_SMALL) | {typo: sample(knob)}
        cases.append(Case(f"{path}:misspelt", kubernetes_stack(models=[entry]), f"models[0].{typo}", knob.key))
        if knob.required:
            entry = {k: v for k, v in T5_SMALL.items() if k != knob.key}
            cases.append(Case(f"{path}:missing", kubernetes_stack(models=[entry]), path))
    return cases


def all_cases() -> list[Case]:
    return stack_cases() + model_cases()
