"""``tritonft github-setup``: the repository's side of the deploy roles' trust, made from the roles themselves: the
OIDC subject template their conditions read, every environment's protection, and ``main`` as the only branch that
may deploy to an environment whose role trusts ``main`` only, and production's required reviewers, stated in every
PUT of production (GitHub's PUT sets the reviewers it is given: review S4). The printed script is run by bash against
a ``gh`` that records what it is asked."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

from components.delivery.github import Reviewer, ShellNumber, repository_setup, setup_script
from components.delivery.trust import MAIN, ROLES, SUBJECT_TEMPLATE, environment_settings
from stackcli.cli import main
from tritonft.errors import UserError

REPO = "my-org/triton-ft"
REVIEWERS = (Reviewer("User", "octocat"), Reviewer("Team", "sre"))
FLAGS = ["--production-reviewer", "user:octocat", "--production-reviewer", "team:sre"]
IDS = {"users/octocat": "583231", "orgs/my-org/teams/sre": "7001"}


def test_the_subject_template_the_roles_read_is_set_first() -> None:
    first = repository_setup(REPO, REVIEWERS)[0]
    assert (first.method, first.path, first.body) == (
        "PUT",
        f"repos/{REPO}/actions/oidc/customization/sub",
        SUBJECT_TEMPLATE,
    )


def test_every_environment_of_a_role_gets_its_protection() -> None:
    calls = {(c.method, c.path): c.body for c in repository_setup(REPO, REVIEWERS)}
    for role in ROLES:
        if role.environment is None:
            continue
        body = calls[("PUT", f"repos/{REPO}/environments/{role.environment}")]
        assert {k: v for k, v in body.items() if k != "reviewers"} == environment_settings(role)
        assert ("reviewers" in body) == (role.environment == "production")


def test_only_main_may_deploy_where_the_role_trusts_main_only() -> None:
    policies = {
        c.path.split("/")[4]: c.body
        for c in repository_setup(REPO, REVIEWERS)
        if c.path.endswith("/deployment-branch-policies")
    }
    trusting_main = {r.environment for r in ROLES if r.environment is not None and r.ref == MAIN}
    assert trusting_main == {"dev", "staging", "production", "images"}
    assert policies == {env: {"name": "main", "type": "branch"} for env in trusting_main}


def test_review_deploys_pull_requests_so_it_gets_no_branch_policy() -> None:
    calls = {(c.method, c.path): c.body for c in repository_setup(REPO, REVIEWERS)}
    assert calls[("PUT", f"repos/{REPO}/environments/review")] == {"deployment_branch_policy": None}
    assert ("POST", f"repos/{REPO}/environments/review/deployment-branch-policies") not in calls


def test_productions_put_names_its_reviewers_by_the_ids_the_script_looks_up() -> None:
    calls = {(c.method, c.path): c for c in repository_setup(REPO, REVIEWERS)}
    production = calls[("PUT", f"repos/{REPO}/environments/production")]
    assert production.body["reviewers"] == [
        {"type": "User", "id": ShellNumber("reviewer_1", "gh api users/octocat --jq .id")},
        {"type": "Team", "id": ShellNumber("reviewer_2", "gh api orgs/my-org/teams/sre --jq .id")},
    ]
    assert production.body["prevent_self_review"] is True
    assert "required reviewers user:octocat, team:sre" in production.why


def test_production_is_never_put_without_a_reviewer() -> None:
    with pytest.raises(UserError, match="--production-reviewer user:LOGIN") as refused:
        repository_setup(REPO)
    assert "no approval" in str(refused.value)


def test_a_reviewer_named_twice_is_asked_once() -> None:
    calls = {(c.method, c.path): c.body for c in repository_setup(REPO, (*REVIEWERS, REVIEWERS[0]))}
    assert len(calls[("PUT", f"repos/{REPO}/environments/production")]["reviewers"]) == 2


def test_more_reviewers_than_github_allows_are_refused() -> None:
    many = tuple(Reviewer("User", f"u{i}") for i in range(7))
    with pytest.raises(UserError, match="at most 6 reviewers, 7 given"):
        repository_setup(REPO, many)


@pytest.mark.parametrize("text", ["octocat", "org:sre", "user:", "team:a b", "user:-bad", "user:a;rm -rf /"])
def test_a_reviewer_not_given_as_user_or_team_is_refused_naming_the_form(text: str) -> None:
    with pytest.raises(UserError, match="give user:LOGIN or team:SLUG"):
        Reviewer.parse(text)


@pytest.mark.parametrize("repo", ["triton-ft", "my-org/triton ft", "https://github.com/my-org/triton-ft", "a/b/c"])
def test_a_repository_not_given_as_owner_and_name_is_refused_naming_the_form(repo: str) -> None:
    with pytest.raises(UserError, match="give it as OWNER/NAME"):
        repository_setup(repo)


def _recording_gh(tmp_path: Path, ids: dict[str, str]) -> tuple[dict[str, str], Path]:
    """A ``gh`` that logs each call and its stdin, and answers ``--jq .id`` lookups from ``ids`` (else prints
    nothing, as ``gh`` does for a missing field)."""
    log = tmp_path / "calls.jsonl"
    gh = tmp_path / "gh"
    gh.write_text(
        "#!/usr/bin/env python3\n"
        "import json, os, sys\n"
        "args = sys.argv[1:]\n"
        "lookup = '--jq' in args\n"
        "with open(os.environ['GH_LOG'], 'a') as f:\n"
        "    f.write(json.dumps({'argv': args, 'stdin': '' if lookup else sys.stdin.read()}) + '\\n')\n"
        "if lookup:\n"
        f"    print({ids!r}.get(args[1], ''))\n"
    )
    gh.chmod(gh.stat().st_mode | stat.S_IXUSR)
    return {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}", "GH_LOG": str(log)}, log


def test_bash_runs_the_script_as_exactly_these_calls(tmp_path: Path) -> None:
    env, log = _recording_gh(tmp_path, IDS)
    subprocess.run(["bash", "-c", setup_script(REPO, REVIEWERS)], check=True, env=env)
    made = [json.loads(line) for line in log.read_text().splitlines()]
    lookups = [["api", path, "--jq", ".id"] for path in IDS]
    puts = [m for m in made if m["argv"][:2] == ["api", "-X"]]
    expected = repository_setup(REPO, REVIEWERS)
    assert [m["argv"] for m in made if m not in puts] == lookups
    assert [m["argv"] for m in puts] == [["api", "-X", c.method, c.path, "--input", "-"] for c in expected]
    sent = {c["argv"][3]: json.loads(c["stdin"]) for c in puts}
    assert sent[f"repos/{REPO}/environments/production"]["reviewers"] == [
        {"type": "User", "id": 583231},
        {"type": "Team", "id": 7001},
    ]
    for call in expected:
        if "reviewers" not in call.body:
            assert sent[call.path] == call.body


def test_the_script_stops_before_productions_put_when_a_reviewer_is_not_found(tmp_path: Path) -> None:
    env, log = _recording_gh(tmp_path, {"users/octocat": "583231"})  # no team "sre" in my-org
    run = subprocess.run(
        ["bash", "-c", setup_script(REPO, REVIEWERS)], check=False, env=env, capture_output=True, text=True
    )
    assert run.returncode == 1
    assert "gh api orgs/my-org/teams/sre --jq .id: no id" in run.stderr
    paths = [json.loads(line)["argv"][3] for line in log.read_text().splitlines() if "-X" in line]
    assert f"repos/{REPO}/environments/production" not in paths


def test_the_installed_script_prints_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["github-setup", REPO, *FLAGS]) == 0
    assert capsys.readouterr().out == setup_script(REPO, REVIEWERS)


def test_the_installed_script_refuses_production_without_a_reviewer(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["github-setup", REPO]) == 1
    captured = capsys.readouterr()
    assert "--production-reviewer" in captured.err and captured.out == ""


def test_the_installed_script_names_a_bad_repository(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["github-setup", "triton-ft", *FLAGS]) == 1
    assert "OWNER/NAME" in capsys.readouterr().err
