"""The deploy roles as the plan creates them (DeployRoles under the mock engine), their trust policies evaluated
against the claims GitHub sends for each kind of run (tests/components/delivery/iam.py: IAM's StringEquals /
StringLike semantics): a token from a pull request's branch, or from any branch but main, assumes no role but the
review stacks' (and the preview's read-only one); each environment's role takes only deploy.yml from main. Every
workflow job that assumes a role asks a session as long as its timeout, and its role's maximum allows it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pulumi_aws as aws
import pytest
import yaml

from components.delivery.roles import READ_ONLY_POLICY, DeployRoles, DeployRolesArgs
from components.delivery.sessions import JobSession, max_session_seconds
from components.delivery.trust import ROLES, SUBJECT_TEMPLATE, environment_settings, subject
from tests.components.delivery.iam import allows
from tritonft.synth.engine import RecordingMocks, run_program

REPO = "acme/triton-ft"
OIDC = "arn:aws:iam::123456789012:oidc-provider/token.actions.githubusercontent.com"
ENVIRONMENTS = ("dev", "staging", "production", "images", "review")
DEPLOY = "arn:aws:iam::123456789012:policy/triton-ft-deploy"


WORKFLOWS = Path(__file__).resolve().parents[3] / ".github" / "workflows"
IAM_MAX_SESSION_SECONDS = 43200


def planned(mocks: RecordingMocks) -> dict[str, dict[str, Any]]:
    """Role name -> its trust policy, as registered."""

    def program() -> Any:
        provider = aws.Provider("delivery", region="us-west-2")
        roles = DeployRoles(
            "deploy",
            DeployRolesArgs(
                REPO,
                provider,
                policy_arns={e: [DEPLOY] for e in ENVIRONMENTS},
                oidc_provider_arn=OIDC,
            ),
        )
        return roles.role_arns

    run_program(program)
    return {
        r.inputs["name"].removeprefix("triton-ft-"): json.loads(r.inputs["assumeRolePolicy"])
        for r in mocks.of_type("aws:iam/role:Role")
    }


def token(*, environment: str | None, event: str, ref: str, workflow: str) -> dict[str, str]:
    """The claims IAM sees: ``aud`` and the ``sub`` GitHub builds under the repository's subject template."""
    claims = {
        "environment": environment or "",
        "event_name": event,
        "ref": ref,
        "job_workflow_ref": f"{REPO}/.github/workflows/{workflow}@{ref}",
    }
    return {"aud": "sts.amazonaws.com", "sub": subject(REPO, claims)}


def accepted_by(policies: dict[str, dict[str, Any]], claims: dict[str, str]) -> set[str]:
    return {name for name, policy in policies.items() if allows(policy, OIDC, claims)}


PR_REF = "refs/pull/42/merge"


@pytest.mark.parametrize("environment", [*ENVIRONMENTS, None])
@pytest.mark.parametrize("workflow", ["deploy.yml", "pr.yml", "review-stacks.yml", "evil.yml"])
def test_a_token_from_a_pull_request_assumes_only_reviews_or_the_read_only_preview(
    mocks: RecordingMocks, environment: str | None, workflow: str
) -> None:
    """Branch code can rewrite any workflow and declare any environment: it still runs from the PR's ref."""
    claims = token(environment=environment, event="pull_request", ref=PR_REF, workflow=workflow)
    expected: set[str] = set()
    if environment == "review" and workflow == "review-stacks.yml":
        expected = {"review"}
    if environment is None and workflow == "pr.yml":
        expected = {"preview"}
    assert accepted_by(planned(mocks), claims) == expected


@pytest.mark.parametrize("environment", ENVIRONMENTS)
def test_a_push_to_another_branch_assumes_no_environments_role(mocks: RecordingMocks, environment: str) -> None:
    claims = token(environment=environment, event="push", ref="refs/heads/feature", workflow="deploy.yml")
    assert accepted_by(planned(mocks), claims) == set()


@pytest.mark.parametrize("environment", ["dev", "staging", "production", "images"])
def test_deploy_yml_on_main_assumes_exactly_its_environments_role(mocks: RecordingMocks, environment: str) -> None:
    claims = token(environment=environment, event="push", ref="refs/heads/main", workflow="deploy.yml")
    assert accepted_by(planned(mocks), claims) == {environment}


def test_another_workflow_on_main_cannot_deploy_prod(mocks: RecordingMocks) -> None:
    claims = token(environment="production", event="workflow_dispatch", ref="refs/heads/main", workflow="pr.yml")
    assert accepted_by(planned(mocks), claims) == set()


def test_prods_trust_is_one_exact_subject(mocks: RecordingMocks) -> None:
    (statement,) = planned(mocks)["production"]["Statement"]
    assert statement["Condition"] == {
        "StringEquals": {
            "token.actions.githubusercontent.com:aud": "sts.amazonaws.com",
            "token.actions.githubusercontent.com:sub": f"repo:{REPO}:environment:production:job_workflow_ref:"
            f"{REPO}/.github/workflows/deploy.yml@refs/heads/main",
        }
    }


def test_a_token_for_another_audience_or_repository_is_refused(mocks: RecordingMocks) -> None:
    good = token(environment="production", event="push", ref="refs/heads/main", workflow="deploy.yml")
    policies = planned(mocks)
    assert not accepted_by(policies, good | {"aud": "https://github.com/acme"})
    assert not accepted_by(policies, good | {"sub": good["sub"].replace(REPO, "evil/triton-ft")})


def test_the_preview_role_is_read_only_and_the_others_get_their_policies(mocks: RecordingMocks) -> None:
    planned(mocks)
    attached: dict[str, list[str]] = {}
    for a in mocks.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment"):
        attached.setdefault(a.name.split("-")[1], []).append(a.inputs["policyArn"])
    assert attached["preview"] == [READ_ONLY_POLICY]
    assert all(attached[e] == [DEPLOY] for e in ENVIRONMENTS)


def test_every_role_gets_the_delivery_accounts_provider(mocks: RecordingMocks) -> None:
    planned(mocks)
    roles = mocks.of_type("aws:iam/role:Role")
    assert len(roles) == len(ROLES)
    assert all("delivery" in str(r.provider) for r in roles)


def test_a_read_only_role_cannot_be_given_deploy_rights(mocks: RecordingMocks) -> None:
    refused: list[str] = []

    def program() -> None:
        provider = aws.Provider("delivery", region="us-west-2")
        try:
            DeployRoles("x", DeployRolesArgs(REPO, provider, {"preview": [DEPLOY]}))
        except ValueError as exc:
            refused.append(str(exc))

    run_program(program)
    assert refused == ["policy_arns: preview is read-only (it runs branch code)"]
    assert not mocks.of_type("aws:iam/role:Role")


def test_the_subject_template_puts_the_workflow_and_ref_into_sub() -> None:
    assert SUBJECT_TEMPLATE["include_claim_keys"] == ["repo", "context", "job_workflow_ref"]


def test_environments_deploy_from_main_only_and_production_needs_another_reviewer() -> None:
    by_name = {r.name: environment_settings(r) for r in ROLES}
    for name in ("dev", "staging", "production", "images"):
        assert by_name[name]["deployment_branch_policy"] == {  # type: ignore[index]
            "protected_branches": False,
            "custom_branch_policies": True,
        }
    assert by_name["production"]["prevent_self_review"] is True  # type: ignore[index]
    assert by_name["preview"] is None


def max_sessions(mocks: RecordingMocks) -> dict[str, int]:
    """Role name -> its MaxSessionDuration, as registered."""
    planned(mocks)
    return {
        r.inputs["name"].removeprefix("triton-ft-"): int(r.inputs["maxSessionDuration"])
        for r in mocks.of_type("aws:iam/role:Role")
    }


CREDENTIALS = "aws-actions/configure-aws-credentials@"


def role_assuming_jobs() -> list[tuple[str, str, dict[str, Any]]]:
    """(workflow file, job name, job) of every job that runs configure-aws-credentials, read from the workflows."""
    jobs = []
    for path in sorted(WORKFLOWS.glob("*.yml")):
        for name, job in yaml.safe_load(path.read_text())["jobs"].items():
            if any(str(s.get("uses", "")).startswith(CREDENTIALS) for s in job["steps"]):
                jobs.append((path.name, name, job))
    return jobs


def session_and_role(mocks: RecordingMocks, workflow: str, job: dict[str, Any]) -> tuple[int, str]:
    """The session the job asks (the action's default: 1 h) and the one role whose trust accepts its token."""
    (credentials,) = [s for s in job["steps"] if str(s.get("uses", "")).startswith(CREDENTIALS)]
    seconds = int(credentials["with"].get("role-duration-seconds", 3600))
    pull_request = workflow != "deploy.yml"
    claims = token(
        environment=job.get("environment"),
        event="pull_request" if pull_request else "push",
        ref=PR_REF if pull_request else "refs/heads/main",
        workflow=workflow,
    )
    (role,) = accepted_by(planned(mocks), claims)
    return seconds, role


def test_the_workflows_assume_roles_in_every_kind_of_job() -> None:
    assert {(w, j) for w, j, _ in role_assuming_jobs()} == {
        ("deploy.yml", "build"),
        ("deploy.yml", "dev"),
        ("deploy.yml", "staging"),
        ("deploy.yml", "prod"),
        ("pr.yml", "preview"),
        ("review-stacks.yml", "up"),
        ("review-stacks.yml", "down"),
        ("review-stacks.yml", "reap"),
    }


@pytest.mark.parametrize(
    ("workflow", "name", "job"), role_assuming_jobs(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_each_jobs_session_lasts_its_timeout_and_its_role_allows_that_session(
    mocks: RecordingMocks, workflow: str, name: str, job: dict[str, Any]
) -> None:
    """STS refuses a session longer than the role's MaxSessionDuration (the job fails at its first AWS step); a
    session shorter than the job's timeout expires in the middle of `up`."""
    seconds, role = session_and_role(mocks, workflow, job)
    maxima = max_sessions(mocks)
    assert job["timeout-minutes"] * 60 <= seconds, f"{workflow} {name}: the session ends before the job's timeout"
    assert seconds <= maxima[role], f"{workflow} {name}: role {role} allows {maxima[role]} s, the job asks {seconds}"
    assert maxima[role] <= IAM_MAX_SESSION_SECONDS


def test_each_roles_maximum_is_the_longest_session_its_jobs_ask(mocks: RecordingMocks) -> None:
    longest: dict[str, int] = {}
    for workflow, _, job in role_assuming_jobs():
        seconds, role = session_and_role(mocks, workflow, job)
        longest[role] = max(longest.get(role, 0), seconds)
    assert max_sessions(mocks) == longest
    assert longest["production"] > 3600 and longest["review"] > 3600


def test_a_role_without_jobs_keeps_iams_least_maximum_and_a_job_past_12_hours_is_refused() -> None:
    (review,) = [r for r in ROLES if r.name == "review"]
    assert max_session_seconds(review, []) == 3600
    too_long = JobSession("review-stacks.yml", "up", "review", 800, 48000)
    with pytest.raises(ValueError, match="asks a 48000 s session of role review: IAM allows at most 43200"):
        max_session_seconds(review, [too_long])
    other = JobSession("deploy.yml", "dev", "dev", 245, 48000)
    assert max_session_seconds(review, [other]) == 3600


def test_the_docs_state_each_roles_maximum_session_as_the_code_sets_it(mocks: RecordingMocks) -> None:
    """docs/delivery.md names every role's maximum, docs/aws.md's first push those of deploy.yml's roles."""
    root = WORKFLOWS.parents[1]
    delivery = " ".join((root / "docs/delivery.md").read_text().split())
    first_push = " ".join((root / "docs/aws.md").read_text().split())
    for role, seconds in max_sessions(mocks).items():
        assert f"`triton-ft-{role}` {seconds} s" in delivery, role
        if role in ("images", "dev", "staging", "production"):
            assert f"`triton-ft-{role}` {seconds} s" in first_push, role
