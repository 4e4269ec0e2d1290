"""Who may assume which deploy role: the roles' trust policies and the GitHub OIDC subject they match (pure).

AWS evaluates only the ``aud`` and ``sub`` claims of GitHub's token (it supports no custom claims), so the
workflow and the branch are put **into** ``sub``: the repository's OIDC subject template
(:data:`SUBJECT_TEMPLATE`, ``PUT /repos/{owner}/{repo}/actions/oidc/customization/sub``) makes GitHub send
``repo:<org>/<repo>:<context>:job_workflow_ref:<org>/<repo>/.github/workflows/<file>@<ref>``, where ``<context>`` is
``environment:<name>`` for a job that declares an environment, ``pull_request`` for a pull request's job without
one, else ``ref:<ref>``. A workflow file edited on a branch runs as ``...@refs/heads/<branch>`` or
``...@refs/pull/<n>/merge``: it never matches a role that demands ``deploy.yml@refs/heads/main``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

ISSUER = "token.actions.githubusercontent.com"
AUDIENCE = "sts.amazonaws.com"
SUBJECT_TEMPLATE: dict[str, Any] = {"use_default": False, "include_claim_keys": ["repo", "context", "job_workflow_ref"]}
"""The repository's OIDC subject customization (GitHub REST: ``actions/oidc/customization/sub``)."""
MAIN = "refs/heads/main"


@dataclass(frozen=True)
class DeployRole:
    """One role: who may assume it (``subject`` pattern, IAM ``StringLike`` syntax) and what it may do."""

    name: str
    environment: str | None
    """The GitHub environment its jobs declare; None = a job without an environment (the PR preview)."""
    workflow: str
    ref: str
    """The ref the workflow file must come from (``*`` = any: review stacks run the PR's own workflow)."""
    read_only: bool = False


ROLES: tuple[DeployRole, ...] = (
    DeployRole("dev", "dev", "deploy.yml", MAIN),
    DeployRole("staging", "staging", "deploy.yml", MAIN),
    DeployRole("production", "production", "deploy.yml", MAIN),
    DeployRole("images", "images", "deploy.yml", MAIN),
    DeployRole("review", "review", "review-stacks.yml", "*"),
    DeployRole("preview", None, "pr.yml", "refs/pull/*/merge", read_only=True),
)
"""The roles, one per GitHub environment, and the PR preview's read-only one. Review stacks run branch code by
design (that is what a review is): their role lives in the review account, with no right on the others'."""


def context(environment: str | None, event: str, ref: str) -> str:
    """GitHub's ``context`` subject part."""
    if environment:
        return f"environment:{environment}"
    if event in ("pull_request", "pull_request_target"):
        return "pull_request"
    return f"ref:{ref}"


def subject(repo: str, claims: dict[str, str]) -> str:
    """The ``sub`` GitHub sends under :data:`SUBJECT_TEMPLATE` for a job with these claims (``environment``,
    ``event_name``, ``ref``, ``job_workflow_ref``)."""
    ctx = context(claims.get("environment"), claims["event_name"], claims["ref"])
    return f"repo:{repo}:{ctx}:job_workflow_ref:{claims['job_workflow_ref']}"


def subject_pattern(repo: str, role: DeployRole) -> str:
    """The ``sub`` a role accepts (``StringLike``: ``*`` any run of characters)."""
    ctx = f"environment:{role.environment}" if role.environment else "pull_request"
    return f"repo:{repo}:{ctx}:job_workflow_ref:{repo}/.github/workflows/{role.workflow}@{role.ref}"


def trust_policy(repo: str, provider_arn: str, role: DeployRole) -> dict[str, Any]:
    """The role's trust policy: GitHub's OIDC provider, audience ``sts.amazonaws.com``, and the one subject; a role
    with no wildcard in its pattern is matched with ``StringEquals``."""
    pattern = subject_pattern(repo, role)
    sub_test = "StringLike" if "*" in pattern or "?" in pattern else "StringEquals"
    conditions: dict[str, dict[str, str]] = {"StringEquals": {f"{ISSUER}:aud": AUDIENCE}}
    conditions.setdefault(sub_test, {})[f"{ISSUER}:sub"] = pattern
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Federated": provider_arn},
                "Action": "sts:AssumeRoleWithWebIdentity",
                "Condition": conditions,
            }
        ],
    }


def trust_policy_json(repo: str, provider_arn: str, role: DeployRole) -> str:
    return json.dumps(trust_policy(repo, provider_arn, role), sort_keys=True)


def environment_settings(role: DeployRole) -> dict[str, Any] | None:
    """The GitHub environment's protection (REST ``PUT /repos/{owner}/{repo}/environments/{name}``): deployments
    only from the branch its role trusts (``main``); production also waits for a reviewer, never the one who pushed
    (its reviewers are people, given to ``tritonft github-setup`` and added to its PUT by
    ``components.delivery.github.production_reviewers``: a PUT without them could remove them). None: no environment."""
    if role.environment is None:
        return None
    if role.ref != MAIN:
        # Review stacks deploy pull requests: no branch restriction could hold; their account holds nothing else.
        return {"deployment_branch_policy": None}
    settings: dict[str, Any] = {
        "deployment_branch_policy": {"protected_branches": False, "custom_branch_policies": True},
    }
    if role.environment == "production":
        settings["prevent_self_review"] = True
    return settings
