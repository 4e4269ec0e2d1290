"""Each stack's plan, synthesized once per test session and shared by the tests that only read it.

``tritonft synth`` of a stack costs seconds of CPU (the whole program under the mock engine, then every model's
repository rendered), and the suite reads the four stacks' plans in dozens of places. Synth is deterministic
(``tests/tritonft/synth/test_synth.py`` proves two runs write the same bytes), so one run per stack serves them all.
A test that changes a plan copies it first; a test of a changed program or stack file synthesizes its own.
"""

from __future__ import annotations

from pathlib import Path

from tritonft.synth.result import SynthResult
from tritonft.synth.run import synthesize

REPO = Path(__file__).resolve().parents[1]

DEPLOY_SECRETS: dict[str, tuple[str, ...]] = {"prod": ("hfToken",)}
"""The secrets a stack needs that its committed file cannot hold and CI sets before every deploy
(``.github/scripts/stack-config.sh``: ``hfToken`` from HF_TOKEN): prod's gated Llama downloads with it. Its plan is
synthesized as CI deploys it (``tritonft synth --assume-secret hfToken``)."""


def deploy_secrets(stack: str) -> tuple[str, ...]:
    return DEPLOY_SECRETS.get(stack, ())


class StackPlans:
    """The repository's own stacks, synthesized on first use into ``root`` (one folder per stack)."""

    def __init__(self, root: Path) -> None:
        self._root = root
        self._made: dict[str, SynthResult] = {}

    def __call__(self, stack: str) -> SynthResult:
        """``stack``'s plan as ``tritonft synth --stack STACK`` writes it (read it; copy it to change it)."""
        if stack not in self._made:
            self._made[stack] = synthesize(
                stack, out=self._root / stack, project_dir=REPO, assume_secrets=deploy_secrets(stack)
            )
        return self._made[stack]
