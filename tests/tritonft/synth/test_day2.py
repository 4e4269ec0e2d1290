"""The day-2 check on prod: the plan of ``up`` after each routine change, from two synthesized plans.

Each routine change (a README edit, a new model, a larger model, a changed model revision, a new chart pin) is made
to a copy of the project; prod is synthesized before and after under Pulumi's mock engine and the two plans are
compared with the providers' replace rules (``tritonft.synth.plandiff``). Nothing stateful or expensive (the model
store's claim, the EFS file system and its mount targets, the cluster, its node groups, the VPC and subnets, the ECR
repositories) may be replaced or deleted; each test also says what the change does touch.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.platform.aws import charts
from stackcli.cli import main
from tests.plans import deploy_secrets
from tests.stackcli.doc_commands import page_commands
from tritonft.synth.plandiff import Action, Change, Report, load_plan, plan_diff
from tritonft.synth.run import synthesize

REPO = Path(__file__).resolve().parents[3]
STACK = "prod"
UNTOUCHABLE = (
    "kubernetes:core/v1:PersistentVolumeClaim",
    "aws:efs/fileSystem:FileSystem",
    "aws:efs/mountTarget:MountTarget",
    "eks:index:Cluster",
    "aws:eks/nodeGroup:NodeGroup",
    "aws:ec2/subnet:Subnet",
    "aws:ec2/vpc:Vpc",
    "aws:ecr/repository:Repository",
)


@contextlib.contextmanager
def _inside(folder: Path) -> Iterator[None]:
    """The image builds' contexts are relative to the working directory, as under ``pulumi up``."""
    before = Path.cwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The program, its stacks and everything an image build sends, in a scratch directory."""
    root = tmp_path_factory.mktemp("day2") / "project"
    root.mkdir()
    for name in ("Pulumi.yaml", "__main__.py", "pyproject.toml", "uv.lock", "README.md"):
        shutil.copy(REPO / name, root / name)
    for folder in ("stacks", "images", "tritonft", "model_repo"):
        shutil.copytree(REPO / folder, root / folder, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def _synth(project: Path, out: Path) -> list[dict[str, Any]]:
    with _inside(project):
        synthesize(STACK, out=out, project_dir=project, extras=(), assume_secrets=deploy_secrets(STACK))
    return load_plan(out)


@pytest.fixture(scope="module")
def base(project: Path, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    return _synth(project, tmp_path_factory.mktemp("base"))


def _edit_models(project: Path, edit: Callable[[list[dict[str, Any]]], None]) -> Callable[[], object]:
    """Apply ``edit`` to the stack's model list; returns the undo."""
    path = project / "stacks" / f"Pulumi.{STACK}.yaml"
    original = path.read_text()
    doc = yaml.safe_load(original)
    edit(doc["config"]["triton-ft:models"])
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return lambda: path.write_text(original)


def _after(project: Path, tmp_path: Path, base: list[dict[str, Any]], undo: Callable[[], object]) -> Report:
    try:
        head = _synth(project, tmp_path / "head")
    finally:
        undo()
    report = Report.of(plan_diff(base, head))
    print(report.text())  # the plan of `up`, shown with -s and on failure
    return report


def _named(report: Report, action: Action) -> set[str]:
    return {c.name for c in report.of_action(action)}


def _untouched(report: Report) -> list[Change]:
    return [c for c in report.changes if c.type in UNTOUCHABLE and c.action is not Action.SAME]


def test_a_readme_edit_changes_nothing(project: Path, base: list[dict[str, Any]], tmp_path: Path) -> None:
    readme = project / "README.md"
    original = readme.read_text()
    readme.write_text(original + "\nA routine documentation edit.\n")
    report = _after(project, tmp_path, base, lambda: readme.write_text(original))
    assert [c for c in report.changes if c.action is not Action.SAME] == [], report.text()


def test_a_new_model_adds_its_own_resources_and_leaves_the_platform_and_store_untouched(
    project: Path, base: list[dict[str, Any]], tmp_path: Path
) -> None:
    # An embedding model on the CPU nodes (prod's GPUs are all spoken for at replicasMax).
    new = {
        "name": "minilm-b",
        "family": "bert",
        "hfRepo": "sentence-transformers/all-MiniLM-L6-v2",
        "revision": "1110a243fdf4706b3f48f1d95db1a4f5529b4d41",
        "device": "cpu",
    }
    report = _after(project, tmp_path, base, _edit_models(project, lambda models: models.append(new)))
    assert report.harmful == () and _untouched(report) == [], report.text()
    created = _named(report, Action.CREATE)
    assert {f"{STACK}-minilm-b-rollout", f"{STACK}-minilm-b-probe"} <= created
    # A CPU model has room for a candidate beside it: its Deployment (and its judge) are keyed by its serving version.
    assert any(name.startswith(f"{STACK}-minilm-b-deployment-") for name in created), created
    assert any(name.startswith(f"{STACK}-minilm-b-judge-") for name in created), created
    assert any(name.startswith(f"{STACK}-minilm-b") and "job" in name for name in created), created
    assert _named(report, Action.REPLACE) <= {f"{STACK}-gateway-specs"}, report.text()
    # The other models' servers do not roll; the gateway learns the new model (its pods roll).
    rolled = {c.name for c in report.changes if c.rolls}
    assert rolled <= {f"{STACK}-gateway-deployment"}, report.text()


def test_a_larger_model_reconverts_it_and_leaves_the_platform_and_store_untouched(
    project: Path, base: list[dict[str, Any]], tmp_path: Path
) -> None:
    def larger(models: list[dict[str, Any]]) -> None:
        (gptj,) = [m for m in models if m["name"] == "gpt-j-6b"]
        gptj["maxBatchSize"] = 32
        gptj["maxOutputLen"] = 512

    report = _after(project, tmp_path, base, _edit_models(project, larger))
    assert report.harmful == () and _untouched(report) == [], report.text()
    rolled = {c.name for c in report.changes if c.rolls}
    assert not any("t5-3b" in name or "minilm" in name for name in rolled), report.text()
    # gpt-j-6b surges (room for a candidate): the new version comes up beside the old one, judged in the cluster
    # (no judge route: issue 51), then the old version's Deployment, candidate Service and judge are deleted.
    created, deleted = _named(report, Action.CREATE), _named(report, Action.DELETE)
    kinds = ("deployment", "candidate", "judge")
    for kind in kinds:
        versioned = re.compile(rf"{STACK}-gpt-j-6b-{kind}-[0-9a-f]{{8}}")
        assert len([n for n in created if versioned.fullmatch(n)]) == 1, report.text()
        assert len([n for n in deleted if versioned.fullmatch(n)]) == 1, report.text()
    assert all("gpt-j-6b" in n for n in created | deleted), report.text()


def test_a_changed_revision_replaces_that_models_job_and_brings_a_judged_new_version_of_its_server(
    project: Path, base: list[dict[str, Any]], tmp_path: Path
) -> None:
    def bump(models: list[dict[str, Any]]) -> None:
        (t5,) = [m for m in models if m["name"] == "t5-3b"]
        t5["revision"] = "0" * 40

    report = _after(project, tmp_path, base, _edit_models(project, bump))
    assert report.harmful == () and _untouched(report) == [], report.text()
    touched = {c.name for c in report.changes if c.action is not Action.SAME}
    assert all(("t5-3b" in n) or n.startswith(f"{STACK}-gateway") for n in touched), report.text()
    # t5-3b surges (prod keeps a node for its surge pod): the new revision's server comes up beside the serving one.
    versioned = re.compile(rf"{STACK}-t5-3b-deployment-[0-9a-f]{{8}}")
    assert len([n for n in _named(report, Action.CREATE) if versioned.fullmatch(n)]) == 1, report.text()
    assert len([n for n in _named(report, Action.DELETE) if versioned.fullmatch(n)]) == 1, report.text()
    probe = next(c for c in report.changes if c.name == f"{STACK}-t5-3b-probe")
    assert probe.action is Action.UPDATE and "trigger" in probe.changed


def test_a_new_chart_pin_updates_that_chart_alone(
    project: Path, base: list[dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(charts, "NVIDIA_DEVICE_PLUGIN", replace(charts.NVIDIA_DEVICE_PLUGIN, version="0.17.2"))
    report = _after(project, tmp_path, base, lambda: None)
    changed = [c for c in report.changes if c.action is not Action.SAME]
    assert [(c.name, c.action, c.changed) for c in changed] == [
        (f"{STACK}-nvidia-device-plugin", Action.UPDATE, ("version",))
    ], report.text()


def test_a_change_to_the_tools_code_rebuilds_the_tools_image_and_every_probe_judges_it(
    project: Path, base: list[dict[str, Any]], tmp_path: Path
) -> None:
    """Not routine for the platform either: a new tools image rolls what runs it and re-runs the probes."""
    cli = project / "tritonft" / "cli.py"
    original = cli.read_text()
    cli.write_text(original + "\n# a change to the in-cluster tools\n")
    report = _after(project, tmp_path, base, lambda: cli.write_text(original))
    assert report.harmful == () and _untouched(report) == [], report.text()
    assert _named(report, Action.UPDATE) >= {
        f"{STACK}-images-tools",
        f"{STACK}-gateway-deployment",
        f"{STACK}-t5-3b-probe",
        f"{STACK}-gpt-j-6b-probe",
        f"{STACK}-minilm-probe",
    }
    assert f"{STACK}-images-server" not in _named(report, Action.UPDATE)


DAY2_PAGES = ("docs/day2.md", "docs/deploy/deploying.md")
GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "day2",
    "GIT_AUTHOR_EMAIL": "day2@example.com",
    "GIT_COMMITTER_NAME": "day2",
    "GIT_COMMITTER_EMAIL": "day2@example.com",
}
"""``git stash`` records a commit: the scratch repository's identity (no user configuration needed)."""


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, env={**os.environ, **GIT_IDENTITY}, check=True, capture_output=True)


@pytest.mark.slow
def test_the_pages_day2_check_runs_as_written_and_shows_the_uncommitted_change(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The day-2 block of both pages, command by command, in a checkout with a new model not yet committed: the
    base plan is the committed stack's (the stash took the change away), the head plan has the change, and
    ``tritonft diff`` names what it creates and exits 0 (nothing stateful replaced)."""
    commands = page_commands(DAY2_PAGES[0], __file__)
    assert page_commands(DAY2_PAGES[1], __file__) == commands, "both pages write the same check"
    repo = tmp_path / "repo"
    shutil.copytree(project, repo)
    _git(repo, "init", "--quiet")
    _git(repo, "add", "--all")
    _git(repo, "commit", "--quiet", "--message", "the deployed state")
    new = {
        "name": "minilm-b",
        "hfRepo": "sentence-transformers/all-MiniLM-L6-v2",
        "revision": "1110a243fdf4706b3f48f1d95db1a4f5529b4d41",
        "device": "cpu",
    }
    _edit_models(repo, lambda models: models.append(new))

    codes = []
    for argv in commands:
        if argv[0] == "git":
            _git(repo, *argv[1:])
            continue
        assert argv[0] == "tritonft", argv
        capsys.readouterr()
        with _inside(repo):
            codes.append(main(argv[1:]))
    diff = capsys.readouterr().out

    assert codes == [0, 0, 0], diff
    assert [argv[1] for argv in commands if argv[0] == "tritonft"] == ["synth", "synth", "diff"]
    probe = f"{STACK}-minilm-b-probe"
    planned = {side: {r["name"] for r in load_plan(repo / "build" / "day2" / side)} for side in ("base", "head")}
    assert probe not in planned["base"] and probe in planned["head"]
    assert probe in diff
    models = yaml.safe_load((repo / "stacks" / f"Pulumi.{STACK}.yaml").read_text())["config"]["triton-ft:models"]
    assert models[-1]["name"] == "minilm-b", "git stash pop gave the change back"
