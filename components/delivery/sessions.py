"""How long each deploy role's sessions may last: read from the workflows whose jobs assume it (pure).

A job asks ``aws-actions/configure-aws-credentials`` for a session of ``role-duration-seconds`` (the action's default:
1 h); STS refuses a session longer than the role's ``MaxSessionDuration`` ("DurationSeconds exceeds the
MaxSessionDuration"), so the job fails at its first AWS step. A role's maximum is therefore the longest session any of
its jobs asks: the workflow is the one place the durations are written, :class:`components.delivery.roles.DeployRoles`
creates each role with :func:`max_session_seconds` of them. A job assumes the role whose trust matches its token's
``sub`` (:mod:`components.delivery.trust`): the one of its workflow file and its GitHub environment.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from components.delivery.trust import DeployRole

CREDENTIALS_ACTION = "aws-actions/configure-aws-credentials@"
DEFAULT_SESSION_SECONDS = 3600
"""The action's session when a job names no ``role-duration-seconds``, and IAM's least ``MaxSessionDuration``."""
MAX_SESSION_SECONDS = 43200
"""IAM's ceiling for a role's ``MaxSessionDuration`` (12 h)."""
WORKFLOWS = Path(__file__).resolve().parents[2] / ".github" / "workflows"


@dataclass(frozen=True)
class JobSession:
    """One workflow job's AWS session: the job's role is the one of ``workflow`` and ``environment``."""

    workflow: str
    job: str
    environment: str | None
    timeout_minutes: int | None
    seconds: int


def _environment(job: Mapping[str, Any]) -> str | None:
    environment = job.get("environment")
    if isinstance(environment, Mapping):
        environment = environment.get("name")
    return str(environment) if environment else None


def job_sessions(workflow: str, document: Mapping[str, Any]) -> list[JobSession]:
    """The sessions of a workflow's jobs that assume an AWS role (``workflow``: its file name, ``document``: the
    parsed YAML); a ``role-duration-seconds`` that is not a whole number of seconds is refused."""
    sessions = []
    for name, job in (document.get("jobs") or {}).items():
        for step in job.get("steps") or ():
            if not str(step.get("uses", "")).startswith(CREDENTIALS_ACTION):
                continue
            asked = (step.get("with") or {}).get("role-duration-seconds", DEFAULT_SESSION_SECONDS)
            try:
                seconds = int(asked)
            except (TypeError, ValueError):
                raise ValueError(f"{workflow} job {name}: role-duration-seconds {asked!r} is not a number") from None
            timeout = job.get("timeout-minutes")
            sessions.append(
                JobSession(workflow, name, _environment(job), int(timeout) if timeout is not None else None, seconds)
            )
    return sessions


def workflow_sessions(directory: Path = WORKFLOWS) -> list[JobSession]:
    """Every job session of the workflows in ``directory`` (the repository's ``.github/workflows``)."""
    sessions: list[JobSession] = []
    for path in sorted(directory.glob("*.yml")):
        sessions.extend(job_sessions(path.name, yaml.safe_load(path.read_text())))
    return sessions


def assumes(role: DeployRole, session: JobSession) -> bool:
    """Whether the job of ``session`` assumes ``role`` (its trust names the job's workflow and environment)."""
    return session.workflow == role.workflow and session.environment == role.environment


def max_session_seconds(role: DeployRole, sessions: Iterable[JobSession]) -> int:
    """The role's ``MaxSessionDuration``: the longest session its jobs ask (at least IAM's 1 h); a job asking more
    than IAM's 12 h is refused, as STS would refuse it."""
    longest = DEFAULT_SESSION_SECONDS
    for session in sessions:
        if not assumes(role, session):
            continue
        if session.seconds > MAX_SESSION_SECONDS:
            raise ValueError(
                f"{session.workflow} job {session.job} asks a {session.seconds} s session of role {role.name}: "
                f"IAM allows at most {MAX_SESSION_SECONDS}"
            )
        longest = max(longest, session.seconds)
    return longest
