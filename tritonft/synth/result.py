"""What one synth run registered and wrote, and its summary; the type every stage writing into a synth output takes."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tritonft.synth.engine import Registered
from tritonft.synth.manifests import Manifest
from tritonft.synth.stackfile import StackConfig

Extra = Callable[["SynthResult", Path], None]
"""A later pipeline stage that writes more files into the synth output (e.g. rendered model repositories)."""


@dataclass
class SynthResult:
    """What one synth run registered and wrote."""

    stack: StackConfig
    out: Path
    resources: list[Registered]
    manifests: list[Manifest]
    outputs: dict[str, Any]
    extra_files: list[str] = field(default_factory=list)

    def summary_text(self, totals_only: bool = False) -> str:
        return render_summary(self, totals_only=totals_only)


def render_summary(result: SynthResult, *, totals_only: bool = False, with_path: bool = True) -> str:
    """The resource tree per component, then the counts per type."""
    by_urn = {r.urn: r for r in result.resources}
    children: dict[str, list[Registered]] = {}
    for res in sorted(result.resources, key=lambda r: r.name):
        parent = res.parent if res.parent in by_urn else ""
        children.setdefault(parent, []).append(res)
    counts = Counter(r.typ for r in result.resources)
    totals = (
        f"stack {result.stack.stack}: {len(result.resources)} resources "
        f"({sum(1 for r in result.resources if not r.custom)} components), "
        f"{len(result.manifests)} Kubernetes manifests" + (f" -> {result.out}" if with_path else "")
    )
    if totals_only:
        return totals
    lines = [f"Stack {result.stack.stack} ({result.stack.path.name})"]

    def walk(parent: str, depth: int) -> None:
        for res in children.get(parent, []):
            marker = "+" if not res.custom else "-"
            lines.append(f"{'  ' * depth}{marker} {res.name}  [{res.typ}]")
            walk(res.urn, depth + 1)

    walk("", 1)
    lines.append("")
    lines.append("Resources by type:")
    width = max((len(t) for t in counts), default=0)
    lines.extend(f"  {typ.ljust(width)}  {n}" for typ, n in sorted(counts.items()))
    lines.append("")
    repos = sorted({f.split("/")[1] for f in result.extra_files if f.startswith("model_repos/")})
    if repos:
        lines.append("Model repositories: " + ", ".join(f"model_repos/{r}" for r in repos))
    lines.append("Outputs: " + (", ".join(sorted(result.outputs)) or "none"))
    lines.append(totals)
    return "\n".join(lines)
