"""The lifecycle policy of the deploy workflow's repositories, judged by ECR's evaluation rules
(tests/components/platform/ecr_lifecycle.py) over the pushes and promotions of many runs, failed `up`s among them: an
image a stage runs is never expired, and the repositories stop growing."""

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
    TRIED_DAYS,
    UNPROMOTED_DAYS,
    lifecycle_policy,
    main,
    stage_tag,
)
from tests.components.platform.ecr_lifecycle import Image, expired

REPO = Path(__file__).resolve().parents[3]
START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


class History:
    """One repository of the deploy workflow: a push per run, tagged ``<content>-r<run>.1``. Each stage the run
    reached tags it ``<stage>-try-r<run>.1`` before its `up` (mark-promoted.sh); a stage whose `up` and probe
    succeeded tags it ``<stage>-live-r<run>.1`` and runs it from then on; a stage whose `up` failed keeps running
    what it ran (or, half-applied, runs both) and the chain stops there."""

    def __init__(self) -> None:
        self.images: dict[str, Image] = {}
        self.running: dict[str, set[str]] = {}

    def run(
        self, number: int, when: datetime, reached: tuple[str, ...], failed: str | None = None, half: bool = False
    ) -> None:
        digest = f"sha256:{number:064x}"
        run_tag = f"r{number}.1"
        tags = {f"c0ffee-{run_tag}"}
        tags |= {stage_tag(stage, "try", run_tag) for stage in (*reached, *([failed] if failed else []))}
        tags |= {stage_tag(stage, "live", run_tag) for stage in reached}
        self.images[digest] = Image(digest, frozenset(tags), when)
        self.running.update({stage: {digest} for stage in reached})
        if failed and half:
            self.running[failed] = self.running.get(failed, set()) | {digest}

    def in_use(self) -> set[str]:
        return set().union(*self.running.values()) if self.running else set()

    def expire(self, now: datetime) -> set[str]:
        gone = expired(lifecycle_policy(), self.images.values(), now)
        for digest in gone:
            del self.images[digest]
        return gone


def chain(runs: int) -> Iterator[tuple[int, datetime, tuple[str, ...], str | None]]:
    """Two pushes a day: (run, when, the stages whose `up` succeeded, the stage whose `up` failed). One in seven fails
    its build after the push (no stage), one in five fails dev's `up`, one in eleven staging's; prod is approved once
    in fifteen runs (for weeks prod runs one image while dev and staging move on), and one of those in three fails."""
    for number in range(1, runs + 1):
        when = START + timedelta(hours=12 * number)
        if number % 7 == 0:
            yield number, when, (), None
        elif number % 5 == 0:
            yield number, when, (), "dev"
        elif number % 11 == 0:
            yield number, when, ("dev",), "staging"
        elif number % 15 == 1 and number % 45 == 31:
            yield number, when, ("dev", "staging"), "prod"
        elif number % 15 == 1:
            yield number, when, ("dev", "staging", "prod"), None
        else:
            yield number, when, ("dev", "staging"), None


def test_an_image_a_stage_runs_is_never_expired_however_many_pushes_follow() -> None:
    history = History()
    for number, when, reached, failed in chain(120):
        history.run(number, when, reached, failed)
        gone = history.expire(when + timedelta(hours=11))
        assert not gone & history.in_use(), (number, gone & history.in_use())
    assert history.running["prod"] == {f"sha256:{106:064x}"}


def test_failed_ups_after_the_running_image_never_expire_it() -> None:
    """The review's case: dev runs A; the next pushes each fail dev's `up` before changing anything (each tagged
    `dev-try-…`, never `dev-live-…`). With a count over every tag a stage adds before its `up`, the tenth would have
    expired A; `try` tags are never counted."""
    history = History()
    history.run(1, START, ("dev",))
    for number in range(2, 2 + 3 * KEEP_PER_STAGE):
        history.run(number, START + timedelta(hours=number), (), failed="dev")
        assert history.expire(START + timedelta(hours=number, minutes=30)) == set(), number
    assert history.running["dev"] == {f"sha256:{1:064x}"}
    assert len(history.images) == 1 + 3 * KEEP_PER_STAGE
    after = START + timedelta(hours=2 + 3 * KEEP_PER_STAGE, days=TRIED_DAYS)
    assert history.expire(after) == {f"sha256:{n:064x}" for n in range(2, 2 + 3 * KEEP_PER_STAGE)}
    assert history.in_use() <= set(history.images)


def test_a_half_applied_up_keeps_the_image_it_may_run_for_the_tried_days() -> None:
    """prod's `up` rolled image 2 then failed: prod may run both 1 and 2 until a later `up` succeeds."""
    history = History()
    history.run(1, START, ("dev", "staging", "prod"))
    history.run(2, START + timedelta(hours=1), ("dev", "staging"), failed="prod", half=True)
    for number in range(3, 3 + 2 * KEEP_PER_STAGE):
        history.run(number, START + timedelta(hours=number), ("dev", "staging"))
    assert history.expire(START + timedelta(days=TRIED_DAYS)) & history.in_use() == set()
    assert history.expire(START + timedelta(days=TRIED_DAYS, hours=2)) == {f"sha256:{2:064x}"}


def test_the_repository_stops_growing_at_ten_per_stage_and_its_tried_and_unpromoted_images() -> None:
    history = History()
    sizes = []
    for number, when, reached, failed in chain(240):
        history.run(number, when, reached, failed)
        history.expire(when + timedelta(hours=11))
        sizes.append(len(history.images))
    tried = 2 * TRIED_DAYS * (1 / 5 + 1 / 11 + 1 / 45) + 1  # the chain's failed `up`s, kept by age
    unpromoted = 2 * UNPROMOTED_DAYS // 7 + 1
    assert max(sizes) <= KEEP_PER_STAGE * len(STAGES) + tried + unpromoted, "a bound whatever the number of runs"
    assert len(history.images) < 240 // 3


def test_prod_keeps_its_last_ten_promotions_for_a_rollback_by_digest() -> None:
    history = History()
    prods = []
    for number, when, reached, failed in chain(300):
        history.run(number, when, reached, failed)
        history.expire(when + timedelta(hours=11))
        if "prod" in reached:
            prods.append(f"sha256:{number:064x}")
    kept = [d for d in prods if d in history.images]
    assert kept == prods[-KEEP_PER_STAGE:]


def test_an_image_no_stage_tried_expires_a_month_after_its_push() -> None:
    history = History()
    history.run(1, START, ())
    assert history.expire(START + timedelta(days=UNPROMOTED_DAYS)) == set()
    assert history.expire(START + timedelta(days=UNPROMOTED_DAYS, hours=1)) == {f"sha256:{1:064x}"}


def test_a_live_tag_protects_an_image_from_the_age_rules() -> None:
    history = History()
    history.run(1, START, ("dev", "staging", "prod"))
    assert history.expire(START + timedelta(days=365)) == set()


@pytest.mark.parametrize(("mark", "tag"), [("try", "prod-try-r3.1"), ("live", "prod-live-r3.1")])
def test_a_stage_tag_names_the_stage_the_mark_and_the_run(mark: str, tag: str) -> None:
    assert stage_tag("prod", mark, "r3.1") == tag


def test_a_mark_other_than_try_or_live_is_refused() -> None:
    with pytest.raises(ValueError, match="mark 'promoted' is not one of try, live"):
        stage_tag("prod", "promoted", "r3.1")


def test_each_stages_live_count_and_try_age_come_before_the_next_stages() -> None:
    rules = sorted(lifecycle_policy()["rules"], key=lambda r: r["rulePriority"])
    selections = [(r["selection"]["tagPatternList"], r["selection"]["countType"]) for r in rules]
    counts = [r["selection"]["countNumber"] for r in rules]
    assert selections == [
        (["prod-live-*"], "imageCountMoreThan"),
        (["prod-try-*"], "sinceImagePushed"),
        (["staging-live-*"], "imageCountMoreThan"),
        (["staging-try-*"], "sinceImagePushed"),
        (["dev-live-*"], "imageCountMoreThan"),
        (["dev-try-*"], "sinceImagePushed"),
        (["*"], "sinceImagePushed"),
    ]
    assert counts == [KEEP_PER_STAGE, TRIED_DAYS] * len(STAGES) + [UNPROMOTED_DAYS]


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


@pytest.mark.parametrize(("keep", "tried", "days"), [(0, 60, 30), (10, 0, 30), (10, 60, 0)])
def test_a_policy_that_keeps_nothing_is_refused(keep: int, tried: int, days: int) -> None:
    with pytest.raises(ValueError, match="must be at least 1"):
        lifecycle_policy(keep=keep, tried_days=tried, unpromoted_days=days)


def test_the_module_prints_the_policy_aws_ecr_takes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    assert json.loads(capsys.readouterr().out) == lifecycle_policy()


def test_the_first_push_walkthrough_applies_the_policy_to_every_repository_ci_pushes_to() -> None:
    text = (REPO / "docs" / "aws.md").read_text()
    step = next(line for line in text.splitlines() if line.startswith("| 2 |"))
    assert "aws ecr put-lifecycle-policy" in step
    assert "python -m components.platform.promotion_lifecycle" in step
    assert re.search(r"for r in server tools server-onnxruntime server-vllm; do", step)
