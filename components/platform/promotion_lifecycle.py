"""``python -m components.platform.promotion_lifecycle``: the ECR lifecycle policy of the repositories the deploy
workflow pushes to (``<prefix>/server``, ``tools``, ``server-onnxruntime``, ``server-vllm``; docs/aws.md's first push,
step 2), printed as the JSON ``aws ecr put-lifecycle-policy --lifecycle-policy-text`` takes.

Every run of the workflow builds every image afresh under a tag of its own (``<content tag>-r<run>.<attempt>``), so
without a policy the repositories grow by four images (~45 GB, the FasterTransformer and vLLM server images) per push.
What a stack runs cannot be read from the registry, so the deploy job says it: before a stage's ``up`` it adds the tag
``<stage>-r<run>.<attempt>`` to each image it promotes (``.github/scripts/mark-promoted.sh``). The rule, in ECR's order
(an image that matches a rule's tags is judged by that rule alone, never by a later one):

1. per stage, prod first: the newest :data:`KEEP_PER_STAGE` images carrying a tag of the stage are kept, older ones
   expire. The workflow's runs are serial (one concurrency group, none cancelled), so push order is promotion order
   and the image a stage runs is always its newest: never expired, however many pushes went by since (prod may wait
   weeks for an approval), with the stage's nine before it kept for a rollback by digest;
2. an image no stage ever promoted (its build job failed half-way, or dev's stage never started) expires
   :data:`UNPROMOTED_DAYS` days after its push.

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
KEEP_PER_STAGE = 10
"""Images kept per stage: the one it runs and the nine it ran before (a rollback by digest)."""
UNPROMOTED_DAYS = 30
"""Days an image no stage promoted is kept after its push (to look into a failed run)."""


def stage_tag(stage: str, run_tag: str) -> str:
    """The tag the deploy job adds to an image it promotes to ``stage`` (``run_tag``: ``r<run>.<attempt>``)."""
    return f"{stage}-{run_tag}"


def lifecycle_policy(
    stages: Sequence[str] = STAGES, keep: int = KEEP_PER_STAGE, unpromoted_days: int = UNPROMOTED_DAYS
) -> dict[str, Any]:
    """The policy of the module's rule: one count rule per stage (in ``stages``' order), then the age rule."""
    if keep < 1 or unpromoted_days < 1:
        raise ValueError(f"keep ({keep}) and unpromoted_days ({unpromoted_days}) must be at least 1")
    rules: list[dict[str, Any]] = [
        {
            "rulePriority": priority,
            "description": f"keep the newest {keep} images promoted to {stage} (the one it runs among them)",
            "selection": {
                "tagStatus": "tagged",
                "tagPatternList": [stage_tag(stage, "*")],
                "countType": "imageCountMoreThan",
                "countNumber": keep,
            },
            "action": {"type": "expire"},
        }
        for priority, stage in enumerate(stages, start=1)
    ]
    rules.append(
        {
            "rulePriority": len(stages) + 1,
            "description": f"an image no stage promoted expires {unpromoted_days} days after its push",
            "selection": {
                "tagStatus": "tagged",
                "tagPatternList": ["*"],
                "countType": "sinceImagePushed",
                "countUnit": "days",
                "countNumber": unpromoted_days,
            },
            "action": {"type": "expire"},
        }
    )
    return {"rules": rules}


def main(argv: Sequence[str] | None = None) -> int:
    if list(argv if argv is not None else sys.argv[1:]):
        print("usage: python -m components.platform.promotion_lifecycle", file=sys.stderr)
        return 2
    print(json.dumps(lifecycle_policy(), separators=(",", ":")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
