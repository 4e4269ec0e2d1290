"""Which images an ECR lifecycle policy expires, by the rules of ECR's lifecycle evaluator (its user guide, "Lifecycle
policy evaluation rules" and "Lifecycle policy properties"):

* rules are applied by ``rulePriority``, lowest first; an image that matches the tag requirements of a rule is judged
  by that rule alone: no rule of a lower priority can expire it;
* ``tagStatus: tagged`` with ``tagPatternList`` matches an image when every pattern matches one of its tags (``*``
  any run of characters); ``untagged`` an image without tags; ``any`` every image (the last rule only);
* ``imageCountMoreThan: n`` keeps the ``n`` most recently pushed of the images the rule judges and expires the rest;
  ``sinceImagePushed`` expires those pushed more than ``countNumber`` days ago.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any


@dataclass(frozen=True)
class Image:
    digest: str
    tags: frozenset[str]
    pushed: datetime


def _pattern(text: str) -> re.Pattern[str]:
    return re.compile("".join(".*" if c == "*" else re.escape(c) for c in text) + r"\Z")


def matches(selection: Mapping[str, Any], image: Image) -> bool:
    status = selection["tagStatus"]
    if status == "any":
        return True
    if status == "untagged":
        return not image.tags
    patterns = [_pattern(p) for p in selection.get("tagPatternList", [])]
    prefixes = selection.get("tagPrefixList", [])
    return (
        bool(image.tags)
        and all(any(p.match(t) for t in image.tags) for p in patterns)
        and all(any(t.startswith(prefix) for t in image.tags) for prefix in prefixes)
    )


def expired(policy: Mapping[str, Any], images: Iterable[Image], now: datetime) -> set[str]:
    """The digests ``policy`` expires among ``images`` at ``now``."""
    rules: Sequence[Mapping[str, Any]] = sorted(policy["rules"], key=lambda r: r["rulePriority"])
    judged: dict[int, list[Image]] = {i: [] for i in range(len(rules))}
    for image in images:
        first = next((i for i, r in enumerate(rules) if matches(r["selection"], image)), None)
        if first is not None:
            judged[first].append(image)
    gone: set[str] = set()
    for i, rule in enumerate(rules):
        selection = rule["selection"]
        if selection["countType"] == "imageCountMoreThan":
            newest_first = sorted(judged[i], key=lambda image: image.pushed, reverse=True)
            gone |= {image.digest for image in newest_first[selection["countNumber"] :]}
        else:
            assert selection["countUnit"] == "days"
            limit = timedelta(days=selection["countNumber"])
            gone |= {image.digest for image in judged[i] if now - image.pushed > limit}
    return gone
