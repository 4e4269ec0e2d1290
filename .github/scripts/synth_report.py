"""The pull-request comment for `tritonft synth`: per stack, the plan summary, guardrail findings, and the
manifest diff against the base branch (``diff -ruN``), cut to fit a GitHub comment.

    python .github/scripts/synth_report.py --head synth/head --base synth/base --stacks local dev ... \
        --out comment.md

Expects ``<side>/<stack>/`` (a synth output) or ``<side>/<stack>.log`` (why synth failed), and
``<head>/<stack>.guardrails`` (the output of ``python -m policy.synth_check``). Standard library only.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

MARKER = "<!-- tritonft-synth-report -->"
"""Identifies the bot's comment so each push edits it instead of adding another."""
COMMENT_LIMIT = 65_000
"""GitHub rejects comment bodies over 65,536 characters."""


@dataclass(frozen=True)
class StackReport:
    stack: str
    totals: str
    """The summary's last line, or why synth failed."""
    ok: bool
    guardrails: str
    diff: str
    base_ok: bool


def _tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def read_side(root: Path, stack: str) -> tuple[bool, str]:
    """``(synthesized?, totals line or failure tail)`` of one side for one stack."""
    summary = root / stack / "summary.txt"
    if summary.is_file():
        return True, _tail(summary.read_text(), 1)
    log = root / f"{stack}.log"
    return False, _tail(log.read_text()) if log.is_file() else "not synthesized"


def manifest_diff(base_root: Path, head_root: Path, stack: str) -> str:
    """``diff -ruN`` of the base and head manifest trees of ``stack`` (added files show in full)."""
    base, head = base_root / stack / "manifests", head_root / stack / "manifests"
    if not base.is_dir():
        base = base_root / f".empty-{stack}"
        base.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(["diff", "-ruN", str(base), str(head)], capture_output=True, text=True, check=False)
    if proc.returncode > 1:
        raise RuntimeError(f"diff failed: {proc.stderr.strip()}")
    return proc.stdout


def stack_report(head_root: Path, base_root: Path, stack: str) -> StackReport:
    ok, totals = read_side(head_root, stack)
    base_ok, _ = read_side(base_root, stack)
    guardrails_file = head_root / f"{stack}.guardrails"
    guardrails = guardrails_file.read_text().strip() if guardrails_file.is_file() else ""
    diff = manifest_diff(base_root, head_root, stack) if ok else ""
    return StackReport(stack, totals, ok, guardrails, diff, base_ok)


def render(reports: Sequence[StackReport], limit: int = COMMENT_LIMIT) -> str:
    """Markdown: a status table, then one collapsible diff per stack; diffs are cut so the whole fits ``limit``."""
    lines = [MARKER, "### `tritonft synth` (offline plan, no cloud credentials)", ""]
    lines += ["| stack | plan | guardrails | manifests vs base |", "|---|---|---|---|"]
    for r in reports:
        plan = f"✅ {r.totals}" if r.ok else "❌ synth failed"
        guard = "—" if not r.ok else ("✅ clean" if not r.guardrails else f"❌ {len(r.guardrails.splitlines())}")
        changes = "—" if not r.ok else (_diff_stat(r.diff) if r.base_ok else "new (base does not synthesize)")
        lines.append(f"| `{r.stack}` | {plan} | {guard} | {changes} |")
    head = "\n".join(lines) + "\n"
    sections = [_section(r) for r in reports]
    budget = max(0, limit - len(head) - 200)
    per_section = budget // max(1, len(sections))
    body = "".join(s if len(s) <= per_section else _cut(s, per_section) for s in sections)
    return head + body


def _diff_stat(diff: str) -> str:
    if not diff:
        return "no change"
    files = sum(1 for line in diff.splitlines() if line.startswith("diff -ruN"))
    plus = sum(1 for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++"))
    minus = sum(1 for line in diff.splitlines() if line.startswith("-") and not line.startswith("---"))
    return f"{files} file(s), +{plus} -{minus}"


def _section(r: StackReport) -> str:
    parts = [f"\n<details><summary><code>{r.stack}</code></summary>\n"]
    if not r.ok:
        parts.append(f"\n```\n{r.totals}\n```\n")
    if r.guardrails:
        parts.append(f"\nGuardrail violations:\n\n```\n{r.guardrails}\n```\n")
    if r.diff:
        parts.append(f"\n```diff\n{r.diff.rstrip()}\n```\n")
    elif r.ok:
        parts.append("\nNo manifest changes.\n")
    parts.append("\n</details>\n")
    return "".join(parts)


def _cut(section: str, size: int) -> str:
    note = "\n… cut to fit the comment; download the `synth` artifact for the full diff.\n```\n\n</details>\n"
    return section[: max(0, size - len(note))] + note


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Render the synth pull-request comment.")
    parser.add_argument("--head", type=Path, required=True)
    parser.add_argument("--base", type=Path, required=True)
    parser.add_argument("--stacks", nargs="+", required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    reports = [stack_report(args.head, args.base, stack) for stack in args.stacks]
    args.out.write_text(render(reports))
    failed = [r.stack for r in reports if not r.ok or r.guardrails]
    if failed:
        print(f"synth or guardrails failed for: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
