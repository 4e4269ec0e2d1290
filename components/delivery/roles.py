"""The deploy roles of the delivery account, one per GitHub environment, with the trust of
:mod:`components.delivery.trust`."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pulumi
import pulumi_aws as aws

from components.delivery.sessions import WORKFLOWS, max_session_seconds, workflow_sessions
from components.delivery.trust import AUDIENCE, ISSUER, ROLES, DeployRole, trust_policy_json

READ_ONLY_POLICY = "arn:aws:iam::aws:policy/ReadOnlyAccess"
GITHUB_THUMBPRINT = "6938fd4d98bab03faadb97b34396831e3780aea1"
"""GitHub's OIDC thumbprint as AWS's console records it (IAM no longer checks it for this issuer)."""


@dataclass
class DeployRolesArgs:
    repository: str
    """``<org>/<repo>``."""
    provider: aws.Provider
    """The delivery account's AWS provider (explicit: no ambient credentials)."""
    policy_arns: Mapping[str, Sequence[str]] = field(default_factory=dict)
    """Permission policies per role name (``dev``, ``production`` ...); the preview gets ``ReadOnlyAccess``."""
    oidc_provider_arn: str | None = None
    """The account's existing GitHub OIDC provider; None = create it."""
    roles: tuple[DeployRole, ...] = ROLES
    workflows: Path = WORKFLOWS
    """The workflows whose jobs assume the roles: each role's maximum session is the longest its jobs ask
    (:func:`components.delivery.sessions.max_session_seconds`)."""


def validate_deploy_roles_args(args: DeployRolesArgs) -> list[str]:
    problems = []
    if args.repository.count("/") != 1 or not all(args.repository.split("/")):
        problems.append(f"repository: {args.repository!r} is not `<org>/<repo>`")
    unknown = sorted(set(args.policy_arns) - {r.name for r in args.roles})
    if unknown:
        problems.append(f"policy_arns: no role named {', '.join(unknown)}")
    read_only = {r.name for r in args.roles if r.read_only} & set(args.policy_arns)
    if read_only:
        problems.append(f"policy_arns: {', '.join(sorted(read_only))} is read-only (it runs branch code)")
    return problems


def _trust(repository: str, role: DeployRole, provider_arn: str) -> str:
    return trust_policy_json(repository, provider_arn, role)


class DeployRoles(pulumi.ComponentResource):
    """One IAM role per GitHub environment (and the PR preview's read-only role); ``role_arns`` by role name."""

    role_arns: pulumi.Output[dict[str, str]]

    def __init__(self, name: str, args: DeployRolesArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        problems = validate_deploy_roles_args(args)
        if problems:
            raise ValueError("; ".join(problems))
        sessions = workflow_sessions(args.workflows)
        max_sessions = {deploy.name: max_session_seconds(deploy, sessions) for deploy in args.roles}
        super().__init__("tritonft:delivery:DeployRoles", name, None, opts)
        child = pulumi.ResourceOptions(parent=self, provider=args.provider)
        provider_arn: pulumi.Input[str]
        if args.oidc_provider_arn:
            provider_arn = args.oidc_provider_arn
        else:
            provider_arn = aws.iam.OpenIdConnectProvider(
                f"{name}-github",
                url=f"https://{ISSUER}",
                client_id_lists=[AUDIENCE],
                thumbprint_lists=[GITHUB_THUMBPRINT],
                opts=child,
            ).arn
        arns: dict[str, pulumi.Output[str]] = {}
        for deploy in args.roles:
            role = aws.iam.Role(
                f"{name}-{deploy.name}",
                name=f"triton-ft-{deploy.name}",
                assume_role_policy=pulumi.Output.from_input(provider_arn).apply(
                    functools.partial(_trust, args.repository, deploy)
                ),
                # STS refuses a job's session longer than this: as long as the longest its jobs ask.
                max_session_duration=max_sessions[deploy.name],
                opts=child,
            )
            policies = [READ_ONLY_POLICY] if deploy.read_only else list(args.policy_arns.get(deploy.name, ()))
            for i, policy in enumerate(policies):
                aws.iam.RolePolicyAttachment(f"{name}-{deploy.name}-{i}", role=role.name, policy_arn=policy, opts=child)
            arns[deploy.name] = role.arn
        self.role_arns = pulumi.Output.all(**arns)
        self.register_outputs({"role_arns": self.role_arns})
