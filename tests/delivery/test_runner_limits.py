"""Each deploy job may run as long as the `up` it runs: its timeout covers the stack's longest chain of waits.

The chain is read from the stack's synthesized plan (``tritonft.synth.budget``: cluster, node groups, charts,
conversion Jobs, rollout watches and probes along their dependencies), so a larger model's longer conversion Job
or rollout budget fails this test until the workflow's ``timeout-minutes`` follows.
"""

from __future__ import annotations

import pytest
import yaml

from tests.delivery.conftest import WORKFLOWS
from tests.plans import StackPlans
from tritonft.synth.budget import up_budget_minutes
from tritonft.synth.plandiff import load_plan

SETUP_MINUTES = 20
"""Checkout, environment, CLI install, stack selection and the probe after `up`."""
GITHUB_HOSTED_MAX_MINUTES = 360
"""The longest a job may run on a GitHub-hosted runner."""


@pytest.mark.parametrize("stage", ["dev", "staging", "prod"])
def test_the_deploy_jobs_timeout_covers_the_longest_up_of_its_stack(stage: str, stack_plan: StackPlans) -> None:
    budget = up_budget_minutes(load_plan(stack_plan(stage).out))
    job = yaml.safe_load((WORKFLOWS / "deploy.yml").read_text())["jobs"][stage]
    assert budget > 60, "a stack with a cluster, conversion Jobs and rollouts waits for more than an hour"
    assert job["timeout-minutes"] >= budget + SETUP_MINUTES, (stage, budget)
    assert job["timeout-minutes"] <= GITHUB_HOSTED_MAX_MINUTES
