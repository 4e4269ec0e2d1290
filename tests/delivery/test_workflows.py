"""The GitHub workflows: lint clean (actionlint, yamllint) and wired as the delivery process requires."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.delivery.conftest import REPO, WORKFLOWS

WORKFLOW_FILES = sorted(WORKFLOWS.glob("*.yml"))
PULUMI_ACTION = re.compile(r"^pulumi/actions@(v[67]|[0-9a-f]{40})$")


def load(name: str) -> dict[str, Any]:
    data = yaml.safe_load((WORKFLOWS / name).read_text())
    assert isinstance(data, dict)
    if True in data:  # YAML 1.1 reads the `on:` key as the boolean true
        data["on"] = data.pop(True)
    return data


def steps(workflow: dict[str, Any], job: str) -> list[dict[str, Any]]:
    return list(workflow["jobs"][job]["steps"])


def uses(step: dict[str, Any]) -> str:
    return str(step.get("uses", ""))


def lint(command: list[str], *paths: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*command, *map(str, paths)], cwd=REPO, capture_output=True, text=True, timeout=120, check=False
    )


def test_the_three_workflows_exist() -> None:
    assert {p.name for p in WORKFLOW_FILES} == {"pr.yml", "deploy.yml", "review-stacks.yml"}


@pytest.mark.parametrize("path", WORKFLOW_FILES, ids=lambda p: p.name)
def test_workflow_passes_actionlint(actionlint: list[str], path: Path) -> None:
    proc = lint(actionlint, path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout == ""


def test_actionlint_runner_reports_a_broken_workflow(actionlint: list[str], tmp_path: Path) -> None:
    broken = tmp_path / "broken.yml"
    broken.write_text(
        "on:\n  push:\n    branch: main\njobs:\n  a:\n    runs-on: ubuntu-latest\n    needs: build\n"
        "    steps:\n      - run: echo '${{ github.event.pull_request.title }}'\n"
    )
    proc = lint(actionlint, broken)
    assert proc.returncode == 1
    assert 'unexpected key "branch" for "push" section' in proc.stdout
    assert 'needs job "build" which does not exist' in proc.stdout
    assert '"github.event.pull_request.title" is potentially untrusted' in proc.stdout


def test_actionlint_runner_only_forgives_the_vars_context(actionlint: list[str], tmp_path: Path) -> None:
    workflow = tmp_path / "contexts.yml"
    workflow.write_text(
        "on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n"
        "      - run: echo '${{ vars.REGION }}'\n      - run: echo '${{ varz.REGION }}'\n"
    )
    proc = lint(actionlint, workflow)
    assert proc.returncode == 1
    assert 'undefined variable "varz"' in proc.stdout
    assert '"vars"' not in proc.stdout


def test_yaml_of_workflows_actions_and_policy_passes_yamllint_strict() -> None:
    proc = lint([str(REPO / ".venv" / "bin" / "yamllint"), "--strict"], REPO / ".github", REPO / "policy")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_yamllint_config_catches_a_plain_scalar_with_a_colon(tmp_path: Path) -> None:
    bad = tmp_path / "action.yml"
    bad.write_text("inputs:\n  x:\n    description: for `policyPacks: policy`.\n")
    proc = lint([str(REPO / ".venv" / "bin" / "yamllint"), "-c", str(REPO / ".yamllint.yaml")], bad)
    assert proc.returncode == 1
    assert "syntax error" in proc.stdout


@pytest.mark.parametrize("path", sorted((REPO / ".github" / "scripts").glob("*.sh")), ids=lambda p: p.name)
def test_shell_helpers_parse(path: Path) -> None:
    assert lint(["bash", "-n"], path).returncode == 0


# --- wiring ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", WORKFLOW_FILES, ids=lambda p: p.name)
def test_workflow_has_read_only_default_permissions_and_a_concurrency_group(path: Path) -> None:
    workflow = yaml.safe_load(path.read_text())
    assert workflow["permissions"] == {"contents": "read"}
    assert workflow["concurrency"]["group"]


@pytest.mark.parametrize("path", WORKFLOW_FILES, ids=lambda p: p.name)
def test_only_jobs_that_assume_an_aws_role_get_an_oidc_token(path: Path) -> None:
    workflow = yaml.safe_load(path.read_text())
    for name, job in workflow["jobs"].items():
        assumes_role = any(uses(s).startswith("aws-actions/configure-aws-credentials@") for s in job["steps"])
        assert (job.get("permissions", {}).get("id-token") == "write") is assumes_role, name


PINNED_BY_SHA = [WORKFLOWS / "deploy.yml", REPO / ".github/actions/setup/action.yml"]
"""The files whose every action is pinned by commit (a tag can be moved to other code; a commit cannot)."""
ACTION_BY_SHA = re.compile(r"^[\w.-]+/[\w./-]+@[0-9a-f]{40} # v\d+(\.\d+)*$")


@pytest.mark.parametrize("path", [*WORKFLOW_FILES, REPO / ".github/actions/setup/action.yml"], ids=lambda p: p.name)
def test_every_action_is_pinned_to_a_release(path: Path) -> None:
    text = path.read_text()
    refs = re.findall(r"uses:\s*(\S+)", text)
    assert refs
    for ref in refs:
        assert ref.startswith("./") or re.search(r"@(v\d+(\.\d+)*|[0-9a-f]{40})$", ref), ref


@pytest.mark.parametrize("name", ["pr.yml", "review-stacks.yml"])
def test_the_pr_workflows_pin_every_action_by_commit_sha(name: str) -> None:
    """A tag can be moved to other code; a commit cannot (jobs here hold `id-token: write`)."""
    refs = re.findall(r"uses:\s*(\S+)(.*)$", (WORKFLOWS / name).read_text(), flags=re.MULTILINE)
    for ref, comment in refs:
        if not ref.startswith("./"):
            assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", ref), ref
            assert re.fullmatch(r" # v\d+\.\d+\.\d+", comment), f"{ref}: name the release in a comment"


def test_pull_requests_preview_only_dev_against_state() -> None:
    """Reading a stack's state decrypts its secrets: staging and prod are previewed offline (synth), never by the
    preview token."""
    assert load("pr.yml")["jobs"]["preview"]["strategy"]["matrix"]["stack"] == ["dev"]


def test_review_stacks_get_no_hugging_face_token() -> None:
    assert "HF_TOKEN" not in (WORKFLOWS / "review-stacks.yml").read_text()


@pytest.mark.parametrize("path", PINNED_BY_SHA, ids=lambda p: p.name)
def test_every_action_of_the_deploy_path_is_pinned_by_commit_with_its_release_named(path: Path) -> None:
    uses_lines = re.findall(r"uses:\s*(.+)$", path.read_text(), re.MULTILINE)
    assert uses_lines
    for line in uses_lines:
        assert line.startswith("./") or ACTION_BY_SHA.match(line.strip()), line


def test_an_action_pinned_by_a_tag_alone_is_refused_on_the_deploy_path() -> None:
    assert not ACTION_BY_SHA.match("actions/checkout@v4")
    assert not ACTION_BY_SHA.match("actions/checkout@11d5960a326750d5838078e36cf38b85af677262")
    assert ACTION_BY_SHA.match("actions/checkout@11d5960a326750d5838078e36cf38b85af677262 # v4.4.0")


def test_setup_pins_python_311_and_the_bootstrap_uv_version() -> None:
    action = yaml.safe_load((REPO / ".github/actions/setup/action.yml").read_text())
    by_action = {uses(s).split("@")[0]: s for s in action["runs"]["steps"]}
    bootstrap_uv = re.search(r"^UV_VERSION=(\S+)$", (REPO / "scripts/bootstrap.sh").read_text(), re.MULTILINE)
    assert bootstrap_uv is not None
    assert by_action["actions/setup-python"]["with"]["python-version"] == "3.11"
    assert by_action["astral-sh/setup-uv"]["with"]["version"] == bootstrap_uv.group(1)


def test_pr_runs_tests_then_synth_then_preview() -> None:
    pr = load("pr.yml")
    assert set(pr["on"]) == {"pull_request"}
    assert any(s.get("run") == "bash scripts/test.sh" for s in steps(pr, "test"))
    assert pr["jobs"]["synth"]["needs"] == "test"
    assert pr["jobs"]["preview"]["needs"] == "synth"


def test_pr_synth_diffs_against_the_base_branch_and_posts_a_sticky_comment() -> None:
    synth = steps(load("pr.yml"), "synth")
    base_checkout = [s for s in synth if uses(s).startswith("actions/checkout@") and "with" in s]
    assert base_checkout[0]["with"]["ref"] == "${{ github.event.pull_request.base.sha }}"
    runs = "\n".join(str(s.get("run", "")) for s in synth)
    assert "tritonft synth --stack" in runs
    assert "python -m policy.synth_check" in runs
    assert ".github/scripts/synth_report.py" in runs
    comment = next(s for s in synth if uses(s).startswith("actions/github-script@"))
    assert "updateComment" in comment["with"]["script"]
    assert not any("AWS" in str(s) or "PULUMI_ACCESS_TOKEN" in str(s) for s in synth), "synth needs no credentials"


def test_pr_preview_uses_pulumi_actions_with_pr_comment_policy_pack_and_oidc() -> None:
    preview = load("pr.yml")["jobs"]["preview"]
    pulumi_preview = next(s for s in preview["steps"] if s.get("with", {}).get("command") == "preview")
    assert PULUMI_ACTION.match(uses(pulumi_preview))
    assert pulumi_preview["with"]["comment-on-pr"] is True
    assert pulumi_preview["with"]["policyPacks"] == "policy"
    aws = next(s for s in preview["steps"] if uses(s).startswith("aws-actions/configure-aws-credentials@"))
    assert aws["with"]["role-to-assume"] == "${{ vars.AWS_PREVIEW_ROLE_ARN }}"


def test_pr_preview_has_no_deploy_power_read_only_role_and_token_no_environment_no_stack_secrets() -> None:
    preview = load("pr.yml")["jobs"]["preview"]
    text = yaml.safe_dump(preview)
    assert "environment" not in preview
    assert preview["env"]["PULUMI_ACCESS_TOKEN"] == "${{ secrets.PULUMI_PREVIEW_TOKEN }}"
    assert preview["env"]["AWS_ROLE_ARN"] == "${{ vars.AWS_PREVIEW_ROLE_ARN }}"
    for deploy_power in ("secrets.PULUMI_ACCESS_TOKEN", "vars.AWS_ROLE_ARN", "secrets.HF_TOKEN", "INGRESS_HTPASSWD"):
        assert deploy_power not in text, deploy_power


def test_pr_preview_is_skipped_cleanly_without_credentials() -> None:
    preview = load("pr.yml")["jobs"]["preview"]
    first, *rest = preview["steps"]
    assert first["id"] == "creds"
    assert all(s["if"] == "steps.creds.outputs.configured == 'true'" for s in rest)


def test_deploy_goes_dev_then_staging_then_prod_behind_approval() -> None:
    deploy = load("deploy.yml")
    assert deploy["on"]["push"]["branches"] == ["main"]
    assert deploy["concurrency"]["cancel-in-progress"] is False
    jobs = deploy["jobs"]
    assert "needs" not in jobs["build"]
    assert jobs["dev"]["needs"] == ["build"]
    assert jobs["staging"]["needs"] == ["build", "dev"]
    assert jobs["prod"]["needs"] == ["build", "staging"]
    assert jobs["prod"]["environment"] == "production"


def test_deploy_builds_the_images_once_and_every_stage_promotes_the_same_digests() -> None:
    jobs = load("deploy.yml")["jobs"]
    build = jobs["build"]
    assert any("build-images.sh" in str(s.get("run", "")) for s in build["steps"])
    assert build["outputs"] == {
        "server-image": "${{ steps.images.outputs.server-image }}",
        "tools-image": "${{ steps.images.outputs.tools-image }}",
        "engine-images": "${{ steps.images.outputs.engine-images }}",
    }
    for stage in ("dev", "staging", "prod"):
        config = next(s for s in jobs[stage]["steps"] if "stack-config.sh" in str(s.get("run", "")))
        assert config["env"]["SERVER_IMAGE"] == "${{ needs.build.outputs.server-image }}"
        assert config["env"]["TOOLS_IMAGE"] == "${{ needs.build.outputs.tools-image }}"
        assert config["env"]["ENGINE_IMAGES"] == "${{ needs.build.outputs.engine-images }}"
        assert not any("docker" in uses(s) or "build-images" in str(s.get("run", "")) for s in jobs[stage]["steps"])
    script = (REPO / ".github/scripts/stack-config.sh").read_text()
    assert 'triton-ft:serverImage "$SERVER_IMAGE"' in script and 'triton-ft:toolsImage "$TOOLS_IMAGE"' in script
    assert '"triton-ft:engineImages.$engine" "$ref"' in script


def test_the_image_build_reads_the_programs_build_plan_and_uses_no_registry_cache_and_no_existing_tag() -> None:
    script = (REPO / ".github/scripts/build-images.sh").read_text()
    assert "python -m components.platform.build_plan . --base-digests" in script
    assert "--cache-from" not in script and "--cache-to" not in script
    assert '--tag "$ref" --push' in script and '-$run_tag"' in script
    assert "--provenance=false --sbom=false" in script, "one manifest per image: no untagged children to expire"


def test_the_deploy_workflow_sends_no_ingress_credential_the_edge_does_not_use() -> None:
    assert "TRITONFT_PROBE_AUTHORIZATION" not in (WORKFLOWS / "deploy.yml").read_text()


def test_a_documentation_only_push_deploys_nothing() -> None:
    ignored = load("deploy.yml")["on"]["push"]["paths-ignore"]
    assert {"docs/**", "**/*.md"} <= set(ignored)
    assert not any(p.startswith(("components", "tritonft", "stacks", "images", ".github")) for p in ignored)


@pytest.mark.parametrize("stage", ["dev", "staging", "prod"])
def test_each_deploy_stage_releases_the_stack_lock_of_its_own_stack_after_up(stage: str) -> None:
    """When it runs (up failed, timed out or was cancelled: tests/delivery/test_runner_limits.py)."""
    stage_steps = steps(load("deploy.yml"), stage)
    cancel = next(s for s in stage_steps if "pulumi cancel" in str(s.get("run", "")))
    assert stage_steps.index(cancel) == len(stage_steps) - 1
    assert "steps.up.outcome" in cancel["if"]
    assert "--yes" in cancel["run"] and cancel["run"].split("--stack", 1)[1].split()[0].endswith(f'{stage}"')


@pytest.mark.parametrize("stage", ["dev", "staging", "prod"])
def test_each_deploy_stage_names_its_stacks_pending_operations_after_releasing_the_lock(stage: str) -> None:
    """A killed `up` may leave pending creates the next `up` would drop (docs/day2.md): the script fails the job."""
    cancel = next(s for s in steps(load("deploy.yml"), stage) if "pulumi cancel" in str(s.get("run", "")))
    assert cancel["run"].splitlines() == [
        f'pulumi cancel --yes --stack "${{STACK_PREFIX}}{stage}" || true',
        f'bash .github/scripts/pending-operations.sh "${{STACK_PREFIX}}{stage}"',
    ]


@pytest.mark.parametrize("stage", ["dev", "staging", "prod"])
def test_each_stage_marks_its_images_live_only_after_its_probe(stage: str) -> None:
    """In the probe's own step, after it: a failed `up` skips it, a failed probe stops before it."""
    probe = next(s for s in steps(load("deploy.yml"), stage) if "probe-stack.sh" in str(s.get("run", "")))
    assert probe["run"].splitlines() == [
        f'bash .github/scripts/probe-stack.sh "${{STACK_PREFIX}}{stage}"',
        f"bash .github/scripts/mark-promoted.sh {stage} live",
    ]
    assert "if" not in probe
    assert {k: probe["env"][k] for k in ("SERVER_IMAGE", "TOOLS_IMAGE", "ENGINE_IMAGES")} == {
        "SERVER_IMAGE": "${{ needs.build.outputs.server-image }}",
        "TOOLS_IMAGE": "${{ needs.build.outputs.tools-image }}",
        "ENGINE_IMAGES": "${{ needs.build.outputs.engine-images }}",
    }


def test_the_deploy_jobs_install_the_project_without_its_dev_group() -> None:
    """UV_NO_DEV reaches both `uv sync`s of a job: the setup action's and the Pulumi CLI's own before the program."""
    assert load("deploy.yml")["env"]["UV_NO_DEV"] == "1"


@pytest.mark.parametrize("stage", ["dev", "staging", "prod"])
def test_each_stage_requires_every_promoted_image_and_marks_them_before_up(stage: str) -> None:
    stage_steps = steps(load("deploy.yml"), stage)
    config = next(s for s in stage_steps if "stack-config.sh" in str(s.get("run", "")))
    assert config["env"]["REQUIRE_PROMOTED_IMAGES"] == "true"
    lines = [line.split()[1] for line in config["run"].splitlines()]
    assert lines == [".github/scripts/stack-config.sh", ".github/scripts/mark-promoted.sh"]
    assert config["run"].splitlines()[1].split()[-2:] == [stage, "try"]
    up = next(i for i, s in enumerate(stage_steps) if s.get("with", {}).get("command") == "up")
    assert stage_steps.index(config) < up


@pytest.mark.parametrize("stage", ["dev", "staging", "prod"])
def test_each_deploy_stage_runs_up_with_the_policy_pack_then_probes(stage: str) -> None:
    stage_steps = steps(load("deploy.yml"), stage)
    up = next(i for i, s in enumerate(stage_steps) if s.get("with", {}).get("command") == "up")
    assert PULUMI_ACTION.match(uses(stage_steps[up]))
    assert stage_steps[up]["with"]["stack-name"].endswith(stage)
    assert stage_steps[up]["with"]["policyPacks"] == "policy"
    probe = next(i for i, s in enumerate(stage_steps) if "probe-stack.sh" in str(s.get("run", "")))
    assert probe > up


def test_probe_helper_reads_stack_outputs_and_calls_tritonft_probe() -> None:
    script = (REPO / ".github/scripts/probe-stack.sh").read_text()
    assert "pulumi stack output --stack" in script
    assert "--json" in script
    assert 'tritonft probe "${url_args[@]}" --spec "$spec" "${headers[@]}"' in script


def test_review_stack_comes_up_on_the_label_and_goes_away_on_close() -> None:
    review = load("review-stacks.yml")
    assert set(review["on"]["pull_request"]["types"]) >= {"labeled", "synchronize", "closed"}
    jobs = review["jobs"]
    assert "deploy-preview" in jobs["up"]["if"]
    assert jobs["up"]["env"]["STACK"] == "pr-${{ github.event.pull_request.number }}"
    down = jobs["down"]["steps"]
    destroy = next(s for s in down if s.get("with", {}).get("command") == "destroy")
    rm_step = down[down.index(destroy) + 1]
    assert "pulumi stack rm --yes" in rm_step["run"]


def test_stale_review_stacks_are_reaped_on_a_schedule() -> None:
    review = load("review-stacks.yml")
    assert review["on"]["schedule"][0]["cron"]
    runs = "\n".join(str(s.get("run", "")) for s in steps(review, "reap"))
    assert "pulumi stack ls --json" in runs
    assert ".github/scripts/stale_review_stacks.py" in runs
    assert "pulumi destroy --yes" in runs
    assert "pulumi stack rm --yes" in runs


def test_the_deploying_pages_own_commands_run_the_policy_pack_and_say_how_to_publish_it() -> None:
    page = (REPO / "docs" / "deploy" / "deploying.md").read_text()
    commands = page.split("# Deploying for real", 1)[1].split("\n## Day 2", 1)[0]
    assert re.search(r"^pulumi preview -s dev .*--policy-pack policy", commands, re.MULTILINE)
    assert re.search(r"^pulumi up -s dev .*--policy-pack policy", commands, re.MULTILINE)
    assert "pulumi policy publish" in commands
    assert "policy/venv" in commands and "tools/policy-requirements.txt" in commands
