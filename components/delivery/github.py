"""The repository's side of the deploy roles' trust, as the GitHub REST calls that set it (pure).

The roles (:mod:`components.delivery.trust`) accept only tokens whose ``sub`` names the environment, the workflow
and its ref, which GitHub sends once the repository's OIDC subject template is set; and a job may declare an
environment only from the branches that environment allows. Both live in GitHub, not in AWS, so the stack cannot
make them: ``tritonft github-setup OWNER/REPO --production-reviewer user:NAME`` prints these calls (``gh api``), made
from the same definitions the roles are, for a repository administrator to run once (and again after a role changes).

GitHub's "Create or update an environment" (``PUT /repos/{owner}/{repo}/environments/{name}``) sets the protection
rules its body gives (``reviewers``, ``wait_timer``, ``prevent_self_review``, ``deployment_branch_policy``): a body
without ``reviewers`` can leave production with none, and a prod deploy with no approval. So production's required
reviewers are an input (:class:`Reviewer`, resolved to GitHub's ids by ``gh api`` in the printed script) and its PUT
always carries them; no script is printed without one.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from components.delivery.trust import MAIN, ROLES, SUBJECT_TEMPLATE, environment_settings
from tritonft.errors import UserError

REPO_PATTERN = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}$")


REVIEWER_FLAG = "--production-reviewer"
MAX_REVIEWERS = 6
"""GitHub's cap on an environment's required reviewers (users and teams together)."""
USER_PATTERN = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$")
TEAM_PATTERN = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")


@dataclass(frozen=True)
class Reviewer:
    """A required reviewer of production: a GitHub user (``user:LOGIN``) or a team of the repository's owner
    (``team:SLUG``). GitHub's environment API takes their numeric ids, which the printed script looks up."""

    kind: str
    """``User`` or ``Team`` (the API's ``type``)."""
    name: str

    @classmethod
    def parse(cls, text: str) -> Reviewer:
        kind, _, name = text.partition(":")
        if kind == "user" and USER_PATTERN.match(name):
            return cls("User", name)
        if kind == "team" and TEAM_PATTERN.match(name):
            return cls("Team", name)
        raise UserError(f"{REVIEWER_FLAG} {text!r}: give user:LOGIN or team:SLUG (e.g. user:octocat, team:sre)")

    def lookup(self, owner: str) -> str:
        """The ``gh api`` call that prints this reviewer's id."""
        path = f"users/{self.name}" if self.kind == "User" else f"orgs/{owner}/teams/{self.name}"
        return f"gh api {shlex.quote(path)} --jq .id"


@dataclass(frozen=True)
class ShellNumber:
    """A number in a call's body that the script reads into the shell variable ``variable`` before the call."""

    variable: str
    command: str
    """What prints it (a ``gh api`` lookup)."""


def _render(body: dict[str, Any]) -> tuple[str, tuple[ShellNumber, ...]]:
    """``body`` as JSON, each :class:`ShellNumber` as its shell variable's expansion, and those numbers."""
    numbers: list[ShellNumber] = []

    def mark(value: object) -> str:
        if not isinstance(value, ShellNumber):
            raise TypeError(f"{value!r} is not JSON")
        numbers.append(value)
        return f"@@{value.variable}@@"

    text = json.dumps(body, sort_keys=True, default=mark)
    for number in numbers:
        text = text.replace(f'"@@{number.variable}@@"', "${" + number.variable + "}")
    return text, tuple(numbers)


def _without(body: str, numbers: Sequence[ShellNumber]) -> str:
    for number in numbers:
        body = body.replace("${" + number.variable + "}", "")
    return body


@dataclass(frozen=True)
class GitHubCall:
    """One call of GitHub's REST API: ``method`` on ``path`` (under ``https://api.github.com/``) with ``body``."""

    method: str
    path: str
    body: dict[str, Any]
    why: str

    def command(self) -> str:
        """The call as ``gh api`` runs it, the JSON body on stdin (a shell here-document). A body with numbers to
        look up (:class:`ShellNumber`) first reads each (the script stops if a lookup fails or prints nothing) and
        expands them into the here-document; any other body is sent verbatim."""
        body, numbers = _render(self.body)
        reads = [
            f'{n.variable}="$({n.command})"\n'
            f'[[ "${{{n.variable}}}" =~ ^[0-9]+$ ]] || {{ echo "{n.command}: no id" >&2; exit 1; }}\n'
            for n in numbers
        ]
        if numbers and any(c in _without(body, numbers) for c in "$`\\"):
            raise ValueError(f"{self.path}: bash would expand this body's '$', '`' or '\\' (an unquoted here-document)")
        delimiter = "JSON" if numbers else "'JSON'"
        call = f"gh api -X {self.method} {shlex.quote(self.path)} --input - <<{delimiter}\n{body}\nJSON"
        return f"# {self.why}\n{''.join(reads)}{call}"


def branch_name(ref: str) -> str:
    return ref.removeprefix("refs/heads/")


def production_reviewers(owner: str, reviewers: Sequence[Reviewer]) -> list[dict[str, Any]]:
    """The ``reviewers`` of production's PUT: each reviewer's type and its id, looked up by the script. None given is
    refused: GitHub's PUT would leave production without a required reviewer."""
    if not reviewers:
        raise UserError(
            f"production needs at least one required reviewer: give {REVIEWER_FLAG} user:LOGIN or "
            f"{REVIEWER_FLAG} team:SLUG (repeatable); GitHub's environment PUT sets the reviewers it is given, so "
            "without one a re-run could leave prod deploying with no approval"
        )
    unique = list(dict.fromkeys(reviewers))
    if len(unique) > MAX_REVIEWERS:
        raise UserError(f"{REVIEWER_FLAG}: GitHub allows at most {MAX_REVIEWERS} reviewers, {len(unique)} given")
    return [
        {"type": r.kind, "id": ShellNumber(f"reviewer_{i}", r.lookup(owner))} for i, r in enumerate(unique, start=1)
    ]


def repository_setup(repo: str, reviewers: Sequence[Reviewer] = ()) -> tuple[GitHubCall, ...]:
    """Every call that makes ``repo`` (``OWNER/NAME``) send the tokens the roles trust and guard its environments:
    the OIDC subject template, then per environment its protection (production's with ``reviewers``:
    :func:`production_reviewers`) and, where its role trusts only ``main``, the deployment branch policy that lets
    only ``main`` deploy there."""
    if not REPO_PATTERN.match(repo):
        raise UserError(f"repository {repo!r}: give it as OWNER/NAME, e.g. my-org/triton-ft")
    approvers = production_reviewers(repo.split("/", maxsplit=1)[0], reviewers)
    calls = [
        GitHubCall(
            "PUT",
            f"repos/{repo}/actions/oidc/customization/sub",
            dict(SUBJECT_TEMPLATE),
            "the OIDC subject names the environment, the workflow and its ref (what every role's trust reads)",
        )
    ]
    for role in ROLES:
        settings = environment_settings(role)
        if role.environment is None or settings is None:
            continue
        env = f"repos/{repo}/environments/{role.environment}"
        restricted = role.ref == MAIN
        if role.environment == "production":
            settings = {**settings, "reviewers": approvers}
        calls.append(
            GitHubCall(
                "PUT",
                env,
                settings,
                f"environment {role.environment}: "
                + ("deployments from the branches listed below only" if restricted else "no branch restriction")
                + (", a reviewer other than the one who pushed" if settings.get("prevent_self_review") else "")
                + (
                    f", required reviewers {', '.join(f'{r.kind.lower()}:{r.name}' for r in dict.fromkeys(reviewers))}"
                    if role.environment == "production"
                    else ""
                ),
            )
        )
        if restricted:
            calls.append(
                GitHubCall(
                    "POST",
                    f"{env}/deployment-branch-policies",
                    {"name": branch_name(MAIN), "type": "branch"},
                    f"environment {role.environment}: {branch_name(MAIN)} may deploy (its role trusts {MAIN} only)",
                )
            )
    return tuple(calls)


def setup_script(repo: str, reviewers: Sequence[Reviewer] = ()) -> str:
    """:func:`repository_setup` as a shell script (``| bash``, with ``gh auth login`` as a repository admin)."""
    calls = repository_setup(repo, reviewers)
    lines = [
        "#!/usr/bin/env bash",
        f"# The GitHub side of triton-ft's deploy roles for {repo} (components/delivery/github.py).",
        f"# Production's required reviewers come from {REVIEWER_FLAG}: its PUT states them every time.",
        "set -euo pipefail",
    ]
    return "\n".join([*lines, *(call.command() for call in calls)]) + "\n"
