"""The lifecycle policy of the deploy workflow's repositories, judged by ECR's evaluation rules
(tests/components/platform/ecr_lifecycle.py) over the pushes and promotions of many runs: an image a stage runs is
never expired, and the repositories stop growing."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from components.platform.promotion_lifecycle import (
    KEEP_PER_STAGE,
    STAGES,
    UNPROMOTED_DAYS,
    lifecycle_policy,
    main,
    stage_tag,
)
from tests.components.platform.ecr_lifecycle import Image, expired

REPO = Path(__file__).resolve().parents[3]
START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


class History:
    """One repository of the deploy workflow: a push per run, tagged ``<content>-r<run>.1``; each stage the run
    reached adds its ``<stage>-r<run>.1`` tag (mark-promoted.sh) and runs that image from then on."""

    def __init__(self) -> None:
        self.images: dict[str, Image] = {}
        self.running: dict[str, str] = {}

    def run(self, number: int, when: datetime, reached: tuple[str, ...]) -> None:
        digest = f"sha256:{number:064x}"
        tags = {f"c0ffee-r{number}.1"} | {stage_tag(stage, f"r{number}.1") for stage in reached}
        self.images[digest] = Image(digest, frozenset(tags), when)
        self.running.update({stage: digest for stage in reached})

    def expire(self, now: datetime) -> set[str]:
        gone = expired(lifecycle_policy(), self.images.values(), now)
        for digest in gone:
            del self.images[digest]
        return gone


def chain(runs: int) -> Iterator[tuple[int, datetime, tuple[str, ...]]]:
    """Two pushes a day; one in seven fails its build after the push (no stage), one in five stops at dev, prod is
    approved once in fifteen runs (for weeks prod runs one image while dev and staging move on)."""
    for number in range(1, runs + 1):
        when = START + timedelta(hours=12 * number)
        if number % 7 == 0:
            yield number, when, ()
        elif number % 5 == 0:
            yield number, when, ("dev",)
        elif number % 15 == 1:
            yield number, when, ("dev", "staging", "prod")
        else:
            yield number, when, ("dev", "staging")


def test_an_image_a_stage_runs_is_never_expired_however_many_pushes_follow() -> None:
    history = History()
    for number, when, reached in chain(120):
        history.run(number, when, reached)
        gone = history.expire(when + timedelta(hours=11))
        assert not gone & set(history.running.values()), (number, gone & set(history.running.values()))
    assert history.running["prod"] == f"sha256:{106:064x}"


def test_the_repository_stops_growing_at_ten_per_stage_and_a_month_of_unpromoted_images() -> None:
    history = History()
    sizes = []
    for number, when, reached in chain(240):
        history.run(number, when, reached)
        history.expire(when + timedelta(hours=11))
        sizes.append(len(history.images))
    unpromoted_per_month = 2 * UNPROMOTED_DAYS // 7 + 1
    assert max(sizes) <= KEEP_PER_STAGE * len(STAGES) + unpromoted_per_month, "a bound whatever the number of runs"
    assert len(history.images) < 240 // 4


def test_prod_keeps_its_last_ten_promotions_for_a_rollback_by_digest() -> None:
    history = History()
    prods = []
    for number, when, reached in chain(200):
        history.run(number, when, reached)
        history.expire(when + timedelta(hours=11))
        if "prod" in reached:
            prods.append(f"sha256:{number:064x}")
    kept = [d for d in prods if d in history.images]
    assert kept == prods[-KEEP_PER_STAGE:]


def test_an_image_no_stage_promoted_expires_a_month_after_its_push() -> None:
    history = History()
    history.run(1, START, ())
    assert history.expire(START + timedelta(days=UNPROMOTED_DAYS)) == set()
    assert history.expire(START + timedelta(days=UNPROMOTED_DAYS, hours=1)) == {f"sha256:{1:064x}"}


def test_a_stage_tag_protects_an_image_from_the_age_rule() -> None:
    history = History()
    history.run(1, START, ("dev", "staging", "prod"))
    assert history.expire(START + timedelta(days=365)) == set()


def test_the_policy_keeps_ecrs_constraints() -> None:
    """Unique priorities; tag patterns only on tagged rules, at most four wildcards each; no untagged or `any` rule
    (the build pushes single manifests, and an untagged rule could remove an index's children from under a digest)."""
    rules = lifecycle_policy()["rules"]
    assert len({r["rulePriority"] for r in rules}) == len(rules)
    for rule in rules:
        selection = rule["selection"]
        assert selection["tagStatus"] == "tagged"
        assert all(p.count("*") <= 4 for p in selection["tagPatternList"])
        assert "tagPrefixList" not in selection
        assert rule["action"] == {"type": "expire"}


@pytest.mark.parametrize(("keep", "days"), [(0, 30), (10, 0)])
def test_a_policy_that_keeps_nothing_is_refused(keep: int, days: int) -> None:
    with pytest.raises(ValueError, match="must be at least 1"):
        lifecycle_policy(keep=keep, unpromoted_days=days)


def test_the_module_prints_the_policy_aws_ecr_takes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    assert json.loads(capsys.readouterr().out) == lifecycle_policy()


def test_the_first_push_walkthrough_applies_the_policy_to_every_repository_ci_pushes_to() -> None:
    text = (REPO / "docs" / "aws.md").read_text()
    step = next(line for line in text.splitlines() if line.startswith("| 2 |"))
    assert "aws ecr put-lifecycle-policy" in step
    assert "python -m components.platform.promotion_lifecycle" in step
    assert re.search(r"for r in server tools server-onnxruntime server-vllm; do", step)
