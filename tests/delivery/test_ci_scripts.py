"""The workflows' helper scripts: stale review stack selection and the synth PR comment."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from policy.synth_check import main as synth_check_main
from tests.delivery.conftest import REPO
from tritonft.synth.run import synthesize


def load_script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, REPO / ".github" / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


stale = load_script("stale_review_stacks")
report = load_script("synth_report")
NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
WEEK = timedelta(days=7)


def stack(name: str, days_ago: float, **extra: object) -> dict[str, object]:
    when = (NOW - timedelta(days=days_ago)).isoformat().replace("+00:00", "Z")
    return {"name": name, "lastUpdate": when, **extra}


def test_review_stack_of_a_closed_pr_is_stale() -> None:
    verdicts = stale.stale_review_stacks([stack("acme/triton-ft/pr-12", 1)], [13], NOW, WEEK)
    assert [(v.stack, v.reason) for v in verdicts] == [("acme/triton-ft/pr-12", "pull request #12 is closed")]


def test_idle_review_stack_of_an_open_pr_is_stale() -> None:
    verdicts = stale.stale_review_stacks([stack("pr-12", 9)], [12], NOW, WEEK)
    assert [(v.stack, v.reason) for v in verdicts] == [("pr-12", "not updated for 9 days (limit 7)")]


def test_fresh_review_stack_of_an_open_pr_is_kept() -> None:
    assert stale.stale_review_stacks([stack("pr-12", 2)], [12], NOW, WEEK) == []


@pytest.mark.parametrize("name", ["dev", "staging", "prod", "acme/triton-ft/prod", "pr-abc", "hotfix-pr-3"])
def test_non_review_stacks_are_never_touched(name: str) -> None:
    assert stale.stale_review_stacks([stack(name, 400)], [], NOW, WEEK) == []


def test_review_stack_being_updated_is_left_alone() -> None:
    assert stale.stale_review_stacks([stack("pr-5", 30, updateInProgress=True)], [], NOW, WEEK) == []


def test_review_stack_never_updated_is_stale_only_when_its_pr_is_closed() -> None:
    never = [{"name": "pr-7"}]
    assert stale.stale_review_stacks(never, [7], NOW, WEEK) == []
    assert len(stale.stale_review_stacks(never, [], NOW, WEEK)) == 1


def test_stale_command_prints_one_stack_per_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "stacks.json").write_text(json.dumps([{"name": "o/p/pr-1"}, {"name": "o/p/pr-2"}, {"name": "dev"}]))
    (tmp_path / "open.json").write_text(json.dumps([{"number": 2}]))
    assert stale.main([str(tmp_path / "stacks.json"), str(tmp_path / "open.json")]) == 0
    assert capsys.readouterr().out == "o/p/pr-1\n"


# synth report


@pytest.fixture(scope="module")
def sides(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`synth/base` and `synth/head` for the local stack; head renames the namespace's managed-by label."""
    root = tmp_path_factory.mktemp("report")
    synthesize("local", out=root / "base" / "local", project_dir=REPO)
    shutil.copytree(root / "base" / "local", root / "head" / "local")
    manifest = next((root / "head" / "local" / "manifests").rglob("namespace-*.yaml"))
    manifest.write_text(manifest.read_text().replace("managed-by: triton-ft", "managed-by: someone-else"))
    (root / "head" / "staging.log").write_text("error: stack 'staging' has 1 configuration problem(s)\n")
    (root / "head" / "local.guardrails").write_text("")
    return root


def test_report_shows_the_manifest_diff_against_base(sides: Path) -> None:
    r = report.stack_report(sides / "head", sides / "base", "local")
    assert r.ok and r.base_ok
    assert "-    app.kubernetes.io/managed-by: triton-ft" in r.diff
    assert "+    app.kubernetes.io/managed-by: someone-else" in r.diff
    text = report.render([r])
    assert text.startswith(report.MARKER)
    count = len(json.loads((sides / "head" / "local" / "resources.json").read_text()))
    assert f"| `local` | ✅ stack local: {count} resources" in text
    assert "1 file(s), +1 -1" in text


def test_report_shows_why_a_stack_failed_to_synthesize(sides: Path) -> None:
    r = report.stack_report(sides / "head", sides / "base", "staging")
    assert not r.ok
    text = report.render([r])
    assert "| `staging` | ❌ synth failed |" in text
    assert "error: stack 'staging' has 1 configuration problem(s)" in text


def test_report_fits_a_github_comment_however_large_the_diff() -> None:
    huge = report.StackReport("prod", "stack prod: 90 resources", True, "", "+x\n" * 100_000, True)
    text = report.render([huge], limit=20_000)
    assert len(text) <= 20_000
    assert "cut to fit the comment" in text


def test_report_command_fails_when_a_guardrail_is_broken(sides: Path, tmp_path: Path) -> None:
    head = tmp_path / "head"
    shutil.copytree(sides / "head", head)
    (head / "local.guardrails").write_text("[images-pinned-by-digest] Job x/y (manifests/x/job-y.yaml): ...\n")
    out = tmp_path / "comment.md"
    assert (
        report.main(["--head", str(head), "--base", str(sides / "base"), "--stacks", "local", "--out", str(out)]) == 1
    )
    assert "❌ 1" in out.read_text()


def test_report_command_passes_for_a_clean_plan(sides: Path, tmp_path: Path) -> None:
    assert synth_check_main([str(sides / "head" / "local")]) == 0
    out = tmp_path / "comment.md"
    assert (
        report.main(
            ["--head", str(sides / "head"), "--base", str(sides / "base"), "--stacks", "local", "--out", str(out)]
        )
        == 0
    )
    assert "✅ clean" in out.read_text()


# probe targets (probe-stack.sh)

targets = load_script("probe_targets")
OUTPUTS = {
    "models": ["t5-small", "gpt2"],
    "endpoints": {"t5-small": "https://t5-small.example.com", "gpt2": "https://gpt2.example.com"},
    "openaiBaseUrl": "https://triton.example.com/v1",
}
SPECS = {"t5-small": '{"name": "t5-small"}', "gpt2": '{"name": "gpt2"}'}


def test_probe_targets_are_the_exported_endpoints_with_the_gateway() -> None:
    assert targets.probe_targets(OUTPUTS, SPECS) == [
        ("t5-small", "https://t5-small.example.com", SPECS["t5-small"], "https://triton.example.com/v1"),
        ("gpt2", "https://gpt2.example.com", SPECS["gpt2"], "https://triton.example.com/v1"),
    ]


def test_probe_targets_name_an_output_the_stack_does_not_export() -> None:
    with pytest.raises(targets.MissingOutputError, match=r"exports no `endpoints` output \(it has: models, "):
        targets.probe_targets({k: v for k, v in OUTPUTS.items() if k != "endpoints"}, SPECS)


def test_a_model_without_a_public_endpoint_is_probed_through_the_gateway_alone() -> None:
    """A FasterTransformer or vLLM model's Triton has no route at the edge: its clients reach it through ``/v1``."""
    outputs = {**OUTPUTS, "endpoints": {"t5-small": "https://t5-small.example.com"}}
    assert targets.probe_targets(outputs, SPECS)[1] == ("gpt2", "", SPECS["gpt2"], "https://triton.example.com/v1")


def test_a_model_reachable_neither_way_is_an_error_not_a_skip() -> None:
    outputs = {"models": ["t5-small", "gpt2"], "endpoints": {"t5-small": "https://t5-small.example.com"}}
    with pytest.raises(targets.MissingOutputError, match="`endpoints` has no URL for model gpt2 and the stack"):
        targets.probe_targets(outputs, SPECS)


def test_without_a_gateway_the_models_are_probed_on_their_endpoints_only() -> None:
    outputs = {k: v for k, v in OUTPUTS.items() if k != "openaiBaseUrl"}
    assert {gateway for *_, gateway in targets.probe_targets(outputs, SPECS)} == {None}


def test_the_specs_come_from_the_checked_out_stack_file_whatever_the_org_prefix() -> None:
    specs = targets.stack_specs("acme/triton-ft/staging")
    assert set(specs) == {"t5-3b", "gpt-j-6b", "minilm", "qwen2-5-7b"}
    assert json.loads(specs["minilm"])["family"] == "bert"


# stack-config.sh and mark-promoted.sh, with the rehearsal's stand-in `pulumi` and `aws` (tests.delivery.standins)

ECR = "123456789012.dkr.ecr.us-west-2.amazonaws.com/triton-ft"
PROMOTED = {
    "SERVER_IMAGE": f"{ECR}/server@sha256:{'1' * 64}",
    "TOOLS_IMAGE": f"{ECR}/tools@sha256:{'2' * 64}",
    "ENGINE_IMAGES": json.dumps(
        {"onnxruntime": f"{ECR}/server-onnxruntime@sha256:{'3' * 64}", "vllm": f"{ECR}/server-vllm@sha256:{'4' * 64}"}
    ),
}


def run_script(tmp_path: Path, script: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``.github/scripts/<script>`` in ``tmp_path`` (its stack files land there) with the stand-ins on PATH."""
    bin_dir = tmp_path / "bin"
    if not bin_dir.exists():
        bin_dir.mkdir()
        (tmp_path / "stacks").mkdir()
        for command in ("aws", "pulumi"):
            stub = bin_dir / command
            stub.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m tests.delivery.standins {command} "$@"\n')
            stub.chmod(0o755)
    return subprocess.run(
        ["bash", str(REPO / ".github" / "scripts" / script), *args],
        cwd=tmp_path,
        env={
            "PATH": f"{bin_dir}:/usr/bin:/bin",
            "PYTHONPATH": str(REPO),
            "REHEARSAL_STATE": str(tmp_path),
            "GITHUB_RUN_ID": "7",
            "GITHUB_RUN_ATTEMPT": "1",
            **env,
        },
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def stack_config(tmp_path: Path) -> dict[str, Any]:
    config = yaml.safe_load((tmp_path / "stacks" / "Pulumi.dev.yaml").read_text())["config"]
    assert isinstance(config, dict)
    return config


def test_a_deploys_stack_config_sets_every_promoted_image(tmp_path: Path) -> None:
    proc = run_script(tmp_path, "stack-config.sh", "dev", REQUIRE_PROMOTED_IMAGES="true", **PROMOTED)
    assert proc.returncode == 0, proc.stderr
    config = stack_config(tmp_path)
    assert config["triton-ft:serverImage"] == PROMOTED["SERVER_IMAGE"]
    assert config["triton-ft:toolsImage"] == PROMOTED["TOOLS_IMAGE"]
    assert config["triton-ft:engineImages"] == json.loads(PROMOTED["ENGINE_IMAGES"])


@pytest.mark.parametrize(
    ("variable", "value", "named"),
    [
        ("SERVER_IMAGE", "", "no server image (serverImage) (SERVER_IMAGE is empty)"),
        ("TOOLS_IMAGE", "", "no tools image (toolsImage) (TOOLS_IMAGE is empty)"),
        ("ENGINE_IMAGES", "", "no engine server images (engineImages) (ENGINE_IMAGES is empty)"),
        ("ENGINE_IMAGES", "{}", "no engine server images (engineImages) (ENGINE_IMAGES is empty)"),
        (
            "ENGINE_IMAGES",
            json.dumps({"onnxruntime": "x@sha256:" + "3" * 64, "vllm": ""}),
            "no server image of engine(s) vllm (engineImages.vllm) (ENGINE_IMAGES maps it to nothing)",
        ),
    ],
)
def test_a_deploys_stack_config_stops_on_an_empty_promoted_image_naming_it(
    tmp_path: Path, variable: str, value: str, named: str
) -> None:
    proc = run_script(
        tmp_path, "stack-config.sh", "dev", REQUIRE_PROMOTED_IMAGES="true", **(PROMOTED | {variable: value})
    )
    assert proc.returncode == 1
    assert f"::error::stack dev: the build job promoted {named}: " in proc.stdout, proc.stdout
    assert not (tmp_path / "pulumi-calls.json").exists(), "the stack was touched before the check"


def test_stack_config_outside_a_deploy_keeps_the_stack_files_images_when_none_is_given(tmp_path: Path) -> None:
    """pr.yml and review-stacks.yml promote no image: the stack file's own images stay."""
    proc = run_script(tmp_path, "stack-config.sh", "dev", HF_TOKEN="hf_x")
    assert proc.returncode == 0, proc.stderr
    assert set(stack_config(tmp_path)) == {"triton-ft:hfToken"}


def registry(tmp_path: Path) -> dict[str, str]:
    data = json.loads((tmp_path / "registry.json").read_text())
    assert isinstance(data, dict)
    return data


def pushed(tmp_path: Path) -> None:
    """The build job's pushes: each promoted image under its run tag."""
    refs = [PROMOTED["SERVER_IMAGE"], PROMOTED["TOOLS_IMAGE"], *json.loads(PROMOTED["ENGINE_IMAGES"]).values()]
    (tmp_path / "registry.json").write_text(
        json.dumps({f"{ref.split('@')[0]}:c0ffee-r7.1": ref.split("@")[1] for ref in refs})
    )


@pytest.mark.parametrize("mark", ["try", "live"])
def test_mark_promoted_tags_each_promoted_digest_with_its_stage_mark_and_run(tmp_path: Path, mark: str) -> None:
    pushed(tmp_path)
    proc = run_script(tmp_path, "mark-promoted.sh", "prod", mark, **PROMOTED)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    tags = {tag: digest for tag, digest in registry(tmp_path).items() if tag.endswith(f":prod-{mark}-r7.1")}
    refs = [PROMOTED["SERVER_IMAGE"], PROMOTED["TOOLS_IMAGE"], *json.loads(PROMOTED["ENGINE_IMAGES"]).values()]
    assert tags == {f"{ref.split('@')[0]}:prod-{mark}-r7.1": ref.split("@")[1] for ref in refs}
    assert len(registry(tmp_path)) == 2 * len(refs), "the run tag and the one mark, nothing else"


def test_mark_promoted_refuses_a_mark_it_does_not_know(tmp_path: Path) -> None:
    pushed(tmp_path)
    before = registry(tmp_path)
    proc = run_script(tmp_path, "mark-promoted.sh", "dev", "promoted", **PROMOTED)
    assert proc.returncode == 2
    assert "::error::usage: mark-promoted.sh STAGE try|live (not promoted)" in proc.stdout
    assert registry(tmp_path) == before


def test_mark_promoted_run_again_on_the_same_run_is_a_no_op(tmp_path: Path) -> None:
    pushed(tmp_path)
    assert run_script(tmp_path, "mark-promoted.sh", "dev", "try", **PROMOTED).returncode == 0
    before = registry(tmp_path)
    proc = run_script(tmp_path, "mark-promoted.sh", "dev", "try", **PROMOTED)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert registry(tmp_path) == before


def test_mark_promoted_stops_on_an_image_the_registry_does_not_hold(tmp_path: Path) -> None:
    pushed(tmp_path)
    never = f"{ECR}/tools@sha256:{'9' * 64}"
    proc = run_script(tmp_path, "mark-promoted.sh", "dev", "try", **(PROMOTED | {"TOOLS_IMAGE": never}))
    assert proc.returncode == 1
    assert f"::error::triton-ft/tools@sha256:{'9' * 64} is not in the registry" in proc.stdout


def test_mark_promoted_refuses_a_reference_that_is_not_an_ecr_digest(tmp_path: Path) -> None:
    pushed(tmp_path)
    proc = run_script(
        tmp_path, "mark-promoted.sh", "dev", "try", **(PROMOTED | {"SERVER_IMAGE": f"{ECR}/server:latest"})
    )
    assert proc.returncode == 1
    assert "is not an ECR image pinned by digest" in proc.stdout


# pending-operations.sh, with a stand-in `pulumi` whose `stack export` prints a given state

CLUSTER_URN = "urn:pulumi:prod::triton-ft::triton-ft:platform:EksCluster$eks:index:Cluster$aws:eks/cluster:Cluster::tft"
ROLE_URN = "urn:pulumi:prod::triton-ft::aws:iam/role:Role::tft-nodes"


def export(*pending: dict[str, Any]) -> dict[str, Any]:
    """What `pulumi stack export` prints (a v3 deployment), with ``pending`` as its pending operations."""
    resources = [{"urn": "urn:pulumi:prod::triton-ft::pulumi:pulumi:Stack::triton-ft-prod", "custom": False}]
    deployment: dict[str, Any] = {"manifest": {"time": "2026-11-29T17:00:00Z"}, "resources": resources}
    if pending:
        deployment["pending_operations"] = list(pending)
    return {"version": 3, "deployment": deployment}


def pending_operations(tmp_path: Path, state: dict[str, Any] | None) -> tuple[subprocess.CompletedProcess[str], str]:
    """The script against a stand-in `pulumi` printing ``state`` (None: the export fails); its output and summary."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "state.json").write_text(json.dumps(state))
    pulumi = bin_dir / "pulumi"
    fail = "" if state is not None else 'echo "error: [401] Unauthorized" >&2; exit 255\n'
    pulumi.write_text(f'#!/bin/sh\necho "$@" >> "{tmp_path}/pulumi-args"\n{fail}cat "{tmp_path}/state.json"\n')
    pulumi.chmod(0o755)
    summary = tmp_path / "summary.md"
    proc = subprocess.run(
        ["bash", str(REPO / ".github" / "scripts" / "pending-operations.sh"), "acme/triton-ft/prod"],
        cwd=tmp_path,
        env={"PATH": f"{bin_dir}:/usr/bin:/bin", "GITHUB_STEP_SUMMARY": str(summary)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return proc, summary.read_text() if summary.exists() else ""


def test_a_stack_without_pending_operations_passes_and_writes_no_summary(tmp_path: Path) -> None:
    proc, summary = pending_operations(tmp_path, export())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout == "stack acme/triton-ft/prod: no pending operations\n"
    assert summary == ""
    assert (tmp_path / "pulumi-args").read_text() == "stack export --stack acme/triton-ft/prod\n"


def test_pending_creates_fail_the_job_naming_each_with_its_repair_in_the_summary(tmp_path: Path) -> None:
    state = export(
        {"resource": {"urn": CLUSTER_URN, "type": "aws:eks/cluster:Cluster", "custom": True}, "type": "creating"},
        {"resource": {"urn": ROLE_URN, "type": "aws:iam/role:Role", "id": "tft-nodes"}, "type": "updating"},
    )
    proc, summary = pending_operations(tmp_path, state)
    assert proc.returncode == 1
    errors = [line for line in proc.stdout.splitlines() if line.startswith("::error::")]
    assert errors == [
        f"::error::stack acme/triton-ft/prod: pending creating of aws:eks/cluster:Cluster {CLUSTER_URN}: repair it"
        " before the next deploy (docs/day2.md; the job's summary)",
        f"::error::stack acme/triton-ft/prod: pending updating of aws:iam/role:Role {ROLE_URN} (ID tft-nodes): repair"
        " it before the next deploy (docs/day2.md; the job's summary)",
    ]
    assert summary.startswith("## Stack `acme/triton-ft/prod`: 2 pending operation(s) left by the interrupted `up`")
    assert f"| creating | `aws:eks/cluster:Cluster` | `{CLUSTER_URN}` |  |" in summary
    assert f"| updating | `aws:iam/role:Role` | `{ROLE_URN}` | `tft-nodes` |" in summary
    assert "--import-pending-creates <URN> --import-pending-creates <its ID>" in summary
    assert "pulumi refresh -s acme/triton-ft/prod --clear-pending-creates" in summary


def test_a_state_that_cannot_be_read_fails_the_job_rather_than_passing_it(tmp_path: Path) -> None:
    proc, summary = pending_operations(tmp_path, None)
    assert proc.returncode == 1
    assert "::error::stack acme/triton-ft/prod: could not read its state (pulumi stack export)" in proc.stdout
    assert summary == ""
