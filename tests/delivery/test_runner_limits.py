"""Each deploy job ends within its runner's limit, and a hung `up` is stopped with time left to release the stack.

Every step of a deploy job has its own ``timeout-minutes``, so the job's longest run is their sum: the steps before
`up` (checkout, environment, credentials, the CLI, the stack's config and the promoted images' tags), `up` itself, then
the probe when `up` succeeded or the lock's release when it did not (never both), and the runner's own minutes around
the steps. `up`'s step allows the longest `up` of its stack, read from the stack's synthesized plan
(``tritonft.synth.budget``: cluster, node groups, charts, conversion Jobs, rollout watches, probes and the Kubernetes
provider's own awaits along their dependencies), so a larger model's longer Job fails these tests until the workflow
follows; and a GitHub-hosted runner kills a job at 360 minutes, which would leave the stack locked mid-`up`.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
import yaml

from components.settings.stack_file import settings_from_stack_file
from tests.delivery.conftest import REPO, WORKFLOWS
from tests.delivery.rehearsal import evaluate
from tests.plans import StackPlans
from tritonft.probe.cli import CLI_DEADLINE_S
from tritonft.synth.budget import provider_await_minutes, up_budget_minutes, wait_minutes
from tritonft.synth.plandiff import load_plan

GITHUB_HOSTED_MAX_MINUTES = 360
"""The longest a job may run on a GitHub-hosted runner."""
RUNNER_OVERHEAD_MINUTES = 2
"""What a job spends outside its steps: GitHub's "Set up job" (the actions' downloads) and the post steps (the uv
cache saved)."""
STAGES = ("dev", "staging", "prod")


def deploy_job(stage: str) -> dict[str, Any]:
    job = yaml.safe_load((WORKFLOWS / "deploy.yml").read_text())["jobs"][stage]
    assert isinstance(job, dict)
    return job


def up_index(steps: list[dict[str, Any]]) -> int:
    return next(i for i, s in enumerate(steps) if (s.get("with") or {}).get("command") == "up")


def lock_release(steps: list[dict[str, Any]]) -> dict[str, Any]:
    return next(s for s in steps if "pulumi cancel" in str(s.get("run", "")))


def probe(steps: list[dict[str, Any]]) -> dict[str, Any]:
    return next(s for s in steps if "probe-stack.sh" in str(s.get("run", "")))


@pytest.mark.parametrize("stage", STAGES)
def test_every_step_of_a_deploy_job_has_its_own_timeout(stage: str) -> None:
    steps = deploy_job(stage)["steps"]
    assert [s.get("name") or s.get("uses") for s in steps if "timeout-minutes" not in s] == []


@pytest.mark.parametrize("stage", STAGES)
def test_the_up_steps_timeout_covers_the_longest_up_of_its_stack(stage: str, stack_plan: StackPlans) -> None:
    budget = up_budget_minutes(load_plan(stack_plan(stage).out))
    steps = deploy_job(stage)["steps"]
    assert budget > 60, "a stack with a cluster, conversion Jobs and rollouts waits for more than an hour"
    assert steps[up_index(steps)]["timeout-minutes"] >= budget, (stage, budget)


@pytest.mark.parametrize("stage", STAGES)
def test_the_probe_steps_timeout_covers_every_models_probe(stage: str) -> None:
    """probe-stack.sh runs one `tritonft probe` per model, each within the CLI's deadline, after reading outputs."""
    models = settings_from_stack_file(REPO, stage, assume_secrets=("hfToken",)).models
    needed = math.ceil(len(models) * CLI_DEADLINE_S / 60) + 1
    assert probe(deploy_job(stage)["steps"])["timeout-minutes"] >= needed, (stage, len(models))


@pytest.mark.parametrize("stage", STAGES)
def test_a_deploy_job_runs_its_longest_path_within_a_hosted_runners_360_minutes(stage: str) -> None:
    job = deploy_job(stage)
    steps = job["steps"]
    up = up_index(steps)
    before = sum(s["timeout-minutes"] for s in steps[:up])
    after = max(probe(steps)["timeout-minutes"], lock_release(steps)["timeout-minutes"])
    longest = before + steps[up]["timeout-minutes"] + after + RUNNER_OVERHEAD_MINUTES
    assert longest <= job["timeout-minutes"] <= GITHUB_HOSTED_MAX_MINUTES, (stage, longest)


@pytest.mark.parametrize("stage", STAGES)
def test_the_lock_is_released_only_when_up_failed_timed_out_or_was_cancelled(stage: str) -> None:
    """A step timeout fails the step (``failure()``); a cancelled run cancels it (``cancelled()``). A failure before
    `up` (or a failed probe after it) holds no lock, and cancelling then could cancel someone else's update."""
    condition = str(lock_release(deploy_job(stage)["steps"])["if"])

    def runs(status: str, up_outcome: str) -> bool:
        return bool(evaluate(condition, lambda path: up_outcome if path == "steps.up.outcome" else "", status))

    assert runs("failure", "failure") and runs("cancelled", "cancelled")
    assert not runs("success", "success")
    assert not runs("failure", "success"), "the probe failed after a finished `up`"
    assert not runs("failure", ""), "a step before `up` failed"
    assert not runs("cancelled", ""), "cancelled before `up` started"


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


@pytest.mark.parametrize("stage", STAGES)
def test_the_first_push_walkthrough_states_each_jobs_bound_and_limit(stage: str, stack_plan: StackPlans) -> None:
    """docs/aws.md's table of the push says how long each job may take, as the plan and the workflow have it."""
    budget = up_budget_minutes(load_plan(stack_plan(stage).out))
    text = (REPO / "docs" / "aws.md").read_text()
    (row,) = [line for line in text.splitlines() if line.startswith(f"| `{stage}` |")]
    assert f"bound {math.ceil(budget)} min; limit {deploy_job(stage)['timeout-minutes']}" in row, row
