"""``python -m components.platform.promotion_lifecycle``: the ECR lifecycle policy of the repositories the deploy
workflow pushes to (``<prefix>/server``, ``tools``, ``server-onnxruntime``, ``server-vllm``; docs/aws.md's first push,
step 2), printed as the JSON ``aws ecr put-lifecycle-policy --lifecycle-policy-text`` takes.

Every run of the workflow builds every image afresh under a tag of its own (``<content tag>-r<run>.<attempt>``), so
without a policy the repositories grow by four images (~45 GB, the FasterTransformer and vLLM server images) per push.
What a stack runs cannot be read from the registry, so the deploy job says it, in two tags per stage
(``.github/scripts/mark-promoted.sh``, ``<run tag>``: ``r<run>.<attempt>``):

* ``<stage>-try-<run tag>`` before the stage's ``up``, on each image it promotes: the stage may run it from then on,
  even if ``up`` fails half-way (a Deployment rolled before a later resource failed);
* ``<stage>-live-<run tag>`` once that ``up`` and the stage's probe succeeded: the stage runs it.

The rule, in ECR's order (an image that matches a rule's tags is judged by that rule alone, never by a later one):

1. per stage, prod first, two rules:

   a. the newest :data:`KEEP_PER_STAGE` images carrying a ``live`` tag of the stage are kept, older ones expire. The
      workflow's runs are serial (one concurrency group, none cancelled), so push order is promotion order and the
      image of the stage's last ``up`` that succeeded is always its newest ``live`` image: never expired, however
      many pushes went by since (prod may wait weeks for an approval) and however many of them failed the stage's
      ``up`` (those add no ``live`` tag, so they never count against it), with the stage's nine before it kept for a
      rollback by digest. An image live in several stages is judged by the first one's rule only: it is that
      stage's newest too (a later stage runs only an image the earlier one ran to the end);
   b. an image the stage tried but never ran to the end (its ``up`` or probe failed) expires :data:`TRIED_DAYS` days
      after its push: it never counts against a running image, a half-applied ``up`` may run it that long (a later
      stage's failure comes before an earlier stage's count, so an image live in staging that prod's failed ``up``
      half-rolled is not counted out by staging's next pushes), and an image live in an earlier stage that a later
      one failed on is kept that long too (the earlier stage's next success replaces it in days, not months);

2. an image no stage ever tried (its build job failed half-way, or dev's stage never started) expires
   :data:`UNPROMOTED_DAYS` days after its push.

What the rules cannot keep: an image a stage may run after a failed ``up`` once :data:`TRIED_DAYS` days passed with no
``up`` of that stage succeeding (docs/day2.md: fix forward before then).

Untagged images are left alone: the build pushes each image as one manifest (``--provenance=false --sbom=false``: no
index whose untagged children an untagged rule could remove from under a running digest), so the registry holds no
untagged image but an interrupted push's, which ECR never counts as an image.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any

STAGES = ("prod", "staging", "dev")
"""The deploy workflow's stages (``.github/workflows/deploy.yml``'s jobs that run `up`), prod's rule first."""
MARKS = ("try", "live")
"""What a stage tag says: ``try`` before the stage's ``up``, ``live`` after its ``up`` and probe succeeded."""
KEEP_PER_STAGE = 10
"""``live`` images kept per stage: the one it runs and the nine it ran before (a rollback by digest)."""
TRIED_DAYS = 60
"""Days an image a stage tried but never ran to the end is kept after its push (a half-applied ``up`` may run it)."""
UNPROMOTED_DAYS = 30
"""Days an image no stage tried is kept after its push (to look into a failed run)."""


def stage_tag(stage: str, mark: str, run_tag: str) -> str:
    """The tag the deploy job adds to an image of ``stage`` (``mark``: ``try`` or ``live``; ``run_tag``:
    ``r<run>.<attempt>``)."""
    if mark not in MARKS:
        raise ValueError(f"mark {mark!r} is not one of {', '.join(MARKS)}")
    return f"{stage}-{mark}-{run_tag}"


def lifecycle_policy(
    stages: Sequence[str] = STAGES,
    keep: int = KEEP_PER_STAGE,
    tried_days: int = TRIED_DAYS,
    unpromoted_days: int = UNPROMOTED_DAYS,
) -> dict[str, Any]:
    """The policy of the module's rule: per stage (in ``stages``' order) the count rule of its ``live`` tag, then the
    age rule of its ``try`` tag; then the age rule of the rest."""
    if keep < 1 or tried_days < 1 or unpromoted_days < 1:
        raise ValueError(
            f"keep ({keep}), tried_days ({tried_days}) and unpromoted_days ({unpromoted_days}) must be at least 1"
        )
    rules: list[dict[str, Any]] = []
    for stage in stages:
        rules += [
            {
                "rulePriority": len(rules) + 1,
                "description": f"keep the newest {keep} images live in {stage} (the one it runs among them)",
                "selection": {
                    "tagStatus": "tagged",
                    "tagPatternList": [stage_tag(stage, "live", "*")],
                    "countType": "imageCountMoreThan",
                    "countNumber": keep,
                },
                "action": {"type": "expire"},
            },
            _age_rule(
                len(rules) + 2,
                stage_tag(stage, "try", "*"),
                tried_days,
                f"an image {stage} tried but never ran expires {tried_days} days after its push",
            ),
        ]
    rules.append(
        _age_rule(
            len(rules) + 1,
            "*",
            unpromoted_days,
            f"an image no stage tried expires {unpromoted_days} days after its push",
        )
    )
    return {"rules": rules}


def _age_rule(priority: int, pattern: str, days: int, description: str) -> dict[str, Any]:
    return {
        "rulePriority": priority,
        "description": description,
        "selection": {
            "tagStatus": "tagged",
            "tagPatternList": [pattern],
            "countType": "sinceImagePushed",
            "countUnit": "days",
            "countNumber": days,
        },
        "action": {"type": "expire"},
    }


def main(argv: Sequence[str] | None = None) -> int:
    if list(argv if argv is not None else sys.argv[1:]):
        print("usage: python -m components.platform.promotion_lifecycle", file=sys.stderr)
        return 2
    print(json.dumps(lifecycle_policy(), separators=(",", ":")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
