"""Which review stacks (``pr-<number>``) to tear down: their pull request is closed, or they are too old.

    pulumi stack ls --json > stacks.json
    gh pr list --state open --json number --limit 1000 > open.json
    python .github/scripts/stale_review_stacks.py stacks.json open.json --max-age-days 7

prints one fully qualified stack name per line (what ``pulumi destroy -s`` takes). Standard library only.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REVIEW_STACK = re.compile(r"^pr-(\d+)$")


@dataclass(frozen=True)
class Verdict:
    stack: str
    reason: str


def parse_time(value: Any) -> datetime | None:
    """Pulumi's ``lastUpdate`` (ISO 8601, ``Z`` or offset); None when absent or unreadable."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def stale_review_stacks(
    stacks: Iterable[dict[str, Any]], open_prs: Iterable[int], now: datetime, max_age: timedelta
) -> list[Verdict]:
    """Review stacks whose PR is not open, or not updated within ``max_age``; busy stacks are left alone."""
    open_set = set(open_prs)
    out = []
    for stack in stacks:
        full_name = str(stack.get("name", ""))
        match = REVIEW_STACK.match(full_name.rsplit("/", 1)[-1])
        if match is None or stack.get("updateInProgress"):
            continue
        number = int(match.group(1))
        last_update = parse_time(stack.get("lastUpdate"))
        if number not in open_set:
            out.append(Verdict(full_name, f"pull request #{number} is closed"))
        elif last_update is not None and now - last_update > max_age:
            out.append(Verdict(full_name, f"not updated for {(now - last_update).days} days (limit {max_age.days})"))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("stacks_json", type=Path, help="output of `pulumi stack ls --json`")
    parser.add_argument("open_prs_json", type=Path, help="output of `gh pr list --state open --json number`")
    parser.add_argument("--max-age-days", type=int, default=7, help="tear down review stacks idle this long")
    args = parser.parse_args(argv)
    if args.max_age_days < 1:
        parser.error("--max-age-days must be at least 1")
    stacks = json.loads(args.stacks_json.read_text())
    open_prs = [int(pr["number"]) for pr in json.loads(args.open_prs_json.read_text())]
    for verdict in stale_review_stacks(stacks, open_prs, datetime.now(UTC), timedelta(days=args.max_age_days)):
        print(verdict.stack)
        print(f"{verdict.stack}: {verdict.reason}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
