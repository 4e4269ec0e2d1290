"""``tritonft github-setup``: the repository's side of the deploy roles' trust, made from the roles themselves: the
OIDC subject template their conditions read, every environment's protection, and ``main`` as the only branch that
may deploy to an environment whose role trusts ``main`` only. The printed script is run by bash against a ``gh``
that records what it is asked."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

from components.delivery.github import repository_setup, setup_script
from components.delivery.trust import MAIN, ROLES, SUBJECT_TEMPLATE, environment_settings
from stackcli.cli import main
from tritonft.errors import UserError

REPO = "my-org/triton-ft"


def test_the_subject_template_the_roles_read_is_set_first() -> None:
    first = repository_setup(REPO)[0]
    assert (first.method, first.path, first.body) == (
        "PUT",
        f"repos/{REPO}/actions/oidc/customization/sub",
        SUBJECT_TEMPLATE,
    )


def test_every_environment_of_a_role_gets_its_protection() -> None:
    calls = {(c.method, c.path): c.body for c in repository_setup(REPO)}
    for role in ROLES:
        if role.environment is None:
            continue
        assert calls[("PUT", f"repos/{REPO}/environments/{role.environment}")] == environment_settings(role)


def test_only_main_may_deploy_where_the_role_trusts_main_only() -> None:
    policies = {
        c.path.split("/")[4]: c.body for c in repository_setup(REPO) if c.path.endswith("/deployment-branch-policies")
    }
    trusting_main = {r.environment for r in ROLES if r.environment is not None and r.ref == MAIN}
    assert trusting_main == {"dev", "staging", "production", "images"}
    assert policies == {env: {"name": "main", "type": "branch"} for env in trusting_main}


def test_review_deploys_pull_requests_so_it_gets_no_branch_policy() -> None:
    calls = {(c.method, c.path): c.body for c in repository_setup(REPO)}
    assert calls[("PUT", f"repos/{REPO}/environments/review")] == {"deployment_branch_policy": None}
    assert ("POST", f"repos/{REPO}/environments/review/deployment-branch-policies") not in calls


@pytest.mark.parametrize("repo", ["triton-ft", "my-org/triton ft", "https://github.com/my-org/triton-ft", "a/b/c"])
def test_a_repository_not_given_as_owner_and_name_is_refused_naming_the_form(repo: str) -> None:
    with pytest.raises(UserError, match="give it as OWNER/NAME"):
        repository_setup(repo)


def test_bash_runs_the_script_as_exactly_these_calls(tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    gh = tmp_path / "gh"
    gh.write_text(
        "#!/usr/bin/env python3\n"
        "import json, os, sys\n"
        "with open(os.environ['GH_LOG'], 'a') as f:\n"
        "    f.write(json.dumps({'argv': sys.argv[1:], 'stdin': sys.stdin.read()}) + '\\n')\n"
    )
    gh.chmod(gh.stat().st_mode | stat.S_IXUSR)
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}", "GH_LOG": str(log)}
    subprocess.run(["bash", "-c", setup_script(REPO)], check=True, env=env)
    made = [json.loads(line) for line in log.read_text().splitlines()]
    expected = repository_setup(REPO)
    assert [m["argv"] for m in made] == [["api", "-X", c.method, c.path, "--input", "-"] for c in expected]
    assert [json.loads(m["stdin"]) for m in made] == [c.body for c in expected]


def test_the_installed_script_prints_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["github-setup", REPO]) == 0
    assert capsys.readouterr().out == setup_script(REPO)


def test_the_installed_script_names_a_bad_repository(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["github-setup", "triton-ft"]) == 1
    assert "OWNER/NAME" in capsys.readouterr().err
