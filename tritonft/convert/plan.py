"""The conversion plan: which FT files are written, from which HF tensors, by which transform (ft-format.md §1.3).

A :class:`Plan` is pure data, built by the family modules (:mod:`.t5`, :mod:`.gpt2`, :mod:`.gptj`) from
``config.json`` and the checkpoint's tensor names/shapes, so every decision can be tested without touching a
file. A :class:`Job` reads one or more source tensors once and writes one file per rank (split) or one file
(replicated). Transform order, matching the reference converters:

1. cast to the output dtype; 2. transpose each source (HF ``nn.Linear`` ``[out, in]`` -> FT ``[in, out]``);
3. several sources are stacked on a new axis 1 (fused QKV ``[d, 3, I]``), or one source is viewed as ``view``
(GPT-2 ``c_attn`` ``[d, 3d]`` -> ``[d, 3, d]``); 4. split: ``COLUMNS`` = the last axis, ``ROWS`` = axis 0,
rank ``r`` of ``N`` holds the ``r``-th contiguous part.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np

from tritonft.errors import UserError
from tritonft.spec import Architecture, Family

Array = np.ndarray[Any, Any]
Shape = tuple[int, ...]


class Split(StrEnum):
    NONE = "none"
    """Replicated: one ``<name>.bin`` every rank loads."""
    COLUMNS = "columns"
    """First GEMM of a block (Q/K/V, FFN-in) and its bias: the last axis is split."""
    ROWS = "rows"
    """Second GEMM (attention out, FFN-out) and T5's relative bias (by head): axis 0 is split."""


@dataclass(frozen=True)
class OutputFile:
    name: str
    """File name inside ``<N>-gpu/``."""
    shape: Shape
    rank: int | None
    """``None`` for a replicated file."""


@dataclass(frozen=True)
class Job:
    """One unit of streaming work: read ``sources`` once, write ``outputs``."""

    base: str
    """Output name without ``.bin`` / ``.<rank>.bin``."""
    sources: tuple[str, ...]
    source_shape: Shape
    """Shape every source must have in the checkpoint."""
    transpose: bool = False
    view: Shape | None = None
    split: Split = Split.NONE
    parts: int = 1

    @property
    def full_shape(self) -> Shape:
        """Shape after transpose + stack/view, before the split."""
        shape = tuple(reversed(self.source_shape)) if self.transpose else self.source_shape
        if len(self.sources) > 1:
            return (shape[0], len(self.sources), *shape[1:])
        return self.view or shape

    @property
    def outputs(self) -> tuple[OutputFile, ...]:
        full = self.full_shape
        if self.split is Split.NONE:
            return (OutputFile(f"{self.base}.bin", full, None),)
        axis = 0 if self.split is Split.ROWS else len(full) - 1
        shape = list(full)
        shape[axis] //= self.parts
        return tuple(OutputFile(f"{self.base}.{r}.bin", tuple(shape), r) for r in range(self.parts))


@dataclass(frozen=True)
class Plan:
    family: Family
    tp: int
    jobs: tuple[Job, ...]
    architecture: Architecture
    ignored: Mapping[str, str] = field(default_factory=dict)
    """Checkpoint tensors deliberately not converted -> why (known duplicates and buffers)."""

    @property
    def files(self) -> list[OutputFile]:
        return [out for job in self.jobs for out in job.outputs]

    @property
    def sources(self) -> dict[str, Shape]:
        return {name: job.source_shape for job in self.jobs for name in job.sources}


def job(base: str, sources: str | tuple[str, ...], shape: Shape, **kwargs: Any) -> Job:
    """Shorthand used by the family modules."""
    return Job(base, (sources,) if isinstance(sources, str) else sources, shape, **kwargs)


def check_tensors(plan: Plan, available: Mapping[str, Shape], ignorable: Callable[[str], str | None]) -> Plan:
    """Every source present with the shape the config implies, nothing unexplained left over.

    ``ignorable(name)`` returns why an unused tensor may be dropped (or ``None`` if it may not). Returns the plan
    with ``ignored`` filled in; raises :class:`UserError` listing every problem otherwise.
    """
    problems: list[str] = []
    for name, shape in plan.sources.items():
        if name not in available:
            problems.append(f"{name}: missing from the checkpoint (expected shape {list(shape)})")
        elif tuple(available[name]) != shape:
            problems.append(
                f"{name}: shape {list(available[name])} but config.json implies {list(shape)}; "
                "the checkpoint and config.json do not belong together"
            )
    used = plan.sources
    ignored: dict[str, str] = {}
    unknown: list[str] = []
    for name in sorted(available):
        if name in used:
            continue
        reason = ignorable(name)
        if reason is None:
            unknown.append(name)
        else:
            ignored[name] = reason
    problems += [
        f"{name}: not a {plan.family} tensor FasterTransformer can load; converting without it would silently "
        "drop weights (is --family right? is this a fine-tuned variant with extra heads?)"
        for name in unknown
    ]
    if problems:
        shown = problems[:25] + ([f"... and {len(problems) - 25} more"] if len(problems) > 25 else [])
        raise UserError(
            f"the checkpoint does not match a {plan.family} model of this config.json; nothing written", shown
        )
    return Plan(plan.family, plan.tp, plan.jobs, plan.architecture, ignored)


def require_divisible(problems: list[str], what: str, value: int, tp: int, key: str) -> None:
    if value % tp:
        divisors = [n for n in range(1, value + 1) if value % n == 0 and n <= 64]
        problems.append(f"{key}={value} ({what}) is not divisible by --tp {tp}; use a TP size in {divisors}")


def int_key(config: Mapping[str, Any], key: str, default: int | None, problems: list[str]) -> int:
    """An integer hyper-parameter from config.json (``default`` when absent; ``None`` = required)."""
    value = config.get(key, default)
    if value is None:
        problems.append(f"config.json: '{key}' is missing or null; it is required for this family")
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        problems.append(f"config.json: '{key}' = {value!r} must be a positive integer")
        return 0
    return value
