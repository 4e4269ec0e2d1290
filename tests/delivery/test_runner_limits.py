"""Each deploy job may run as long as the `up` it runs: its timeout covers the stack's longest chain of waits.

The chain is read from the stack's synthesized plan (``tritonft.synth.budget``: cluster, node groups, charts,
conversion Jobs, rollout watches, probes and the Kubernetes provider's own awaits along their dependencies), so a
larger model's longer conversion Job or rollout budget fails this test until the workflow's ``timeout-minutes``
follows.
"""

from __future__ import annotations

import pytest
import yaml

from tests.delivery.conftest import WORKFLOWS
from tests.plans import StackPlans
from tritonft.synth.budget import provider_await_minutes, up_budget_minutes, wait_minutes
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


@pytest.mark.parametrize("stage", ["dev", "staging", "prod", "local"])
def test_no_service_of_a_stack_waits_for_its_pods_in_the_providers_await(stage: str, stack_plan: StackPlans) -> None:
    """The provider's await of a Service waits 10 minutes for endpoints that target ready pods, then fails ``up``: a
    model's pods are ready only after its Job and start-up budget, the gateway's after every model. The rollout
    watches, the judges and the gateway Deployment's own await wait for them instead."""
    plan = load_plan(stack_plan(stage).out)
    services = [r for r in plan if r["type"] == "kubernetes:core/v1:Service"]
    assert services
    waiting = [r["name"] for r in services if provider_await_minutes(r)]
    assert waiting == [], f"{stage}: Services awaited by the provider: {waiting}"


def test_the_gateway_deployments_own_await_is_counted_in_each_budget(stack_plan: StackPlans) -> None:
    """The gateway's Deployment is applied with the provider's await (no watch of ours): 10 minutes on the chain."""
    plan = load_plan(stack_plan("dev").out)
    (gateway,) = [r for r in plan if r["name"] == "dev-gateway-deployment"]
    assert wait_minutes(gateway) == 10.0
