"""The repository's side of the deploy roles' trust, as the GitHub REST calls that set it (pure).

The roles (:mod:`components.delivery.trust`) accept only tokens whose ``sub`` names the environment, the workflow
and its ref, which GitHub sends once the repository's OIDC subject template is set; and a job may declare an
environment only from the branches that environment allows. Both live in GitHub, not in AWS, so the stack cannot
make them: ``tritonft github-setup OWNER/REPO`` prints these calls (``gh api``), made from the same definitions the
roles are, for a repository administrator to run once (and again after a role changes).
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from typing import Any

from components.delivery.trust import MAIN, ROLES, SUBJECT_TEMPLATE, environment_settings
from tritonft.errors import UserError

REPO_PATTERN = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}$")


@dataclass(frozen=True)
class GitHubCall:
    """One call of GitHub's REST API: ``method`` on ``path`` (under ``https://api.github.com/``) with ``body``."""

    method: str
    path: str
    body: dict[str, Any]
    why: str

    def command(self) -> str:
        """The call as ``gh api`` runs it, the JSON body on stdin (a shell here-document)."""
        body = json.dumps(self.body, sort_keys=True)
        return f"# {self.why}\ngh api -X {self.method} {shlex.quote(self.path)} --input - <<'JSON'\n{body}\nJSON"


def branch_name(ref: str) -> str:
    return ref.removeprefix("refs/heads/")


def repository_setup(repo: str) -> tuple[GitHubCall, ...]:
    """Every call that makes ``repo`` (``OWNER/NAME``) send the tokens the roles trust and guard its environments:
    the OIDC subject template, then per environment its protection and, where its role trusts only ``main``, the
    deployment branch policy that lets only ``main`` deploy there."""
    if not REPO_PATTERN.match(repo):
        raise UserError(f"repository {repo!r}: give it as OWNER/NAME, e.g. my-org/triton-ft")
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
        calls.append(
            GitHubCall(
                "PUT",
                env,
                settings,
                f"environment {role.environment}: "
                + ("deployments from the branches listed below only" if restricted else "no branch restriction")
                + (", a reviewer other than the one who pushed" if settings.get("prevent_self_review") else ""),
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


def setup_script(repo: str) -> str:
    """:func:`repository_setup` as a shell script (``| bash``, with ``gh auth login`` as a repository admin)."""
    lines = [
        "#!/usr/bin/env bash",
        f"# The GitHub side of triton-ft's deploy roles for {repo} (components/delivery/github.py).",
        "# Production's required reviewers are people: add them in Settings -> Environments -> production.",
        "set -euo pipefail",
    ]
    return "\n".join([*lines, *(call.command() for call in repository_setup(repo))]) + "\n"
