"""The newcomer's path as the docs write it: a minimal stack of "Your first stack" saved as ``stacks/Pulumi.mine.yaml``
is synthesized by ``tritonft synth --stack mine --quiet`` (the real program under Pulumi's mock engine)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from stackcli.cli import main
from tests.stackcli.test_snippets import ROOT, STACK_SNIPPETS

FIRST_STACK = "docs/get-started/first-stack.md"


def project_copy(tmp_path: Path, stack: str) -> Path:
    """The project as a deployer's checkout has it (its files linked), with ``stacks/`` holding only ``stack``."""
    project = tmp_path / "project"
    project.mkdir()
    for entry in ROOT.iterdir():
        if entry.name not in ("stacks", "build", ".git", "site") and not entry.name.startswith("."):
            (project / entry.name).symlink_to(entry)
    (project / "stacks").mkdir()
    (project / "stacks" / "Pulumi.mine.yaml").write_text(stack)
    return project


@pytest.mark.slow
def test_the_first_vllm_stack_on_your_cluster_synthesizes_as_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    where, values = next(
        (w, v) for w, v in STACK_SNIPPETS if w.startswith(FIRST_STACK) and v.get("platform") == "kubernetes"
    )
    stack = yaml.safe_dump({"config": {f"triton-ft:{k}": v for k, v in values.items()}}, sort_keys=False)
    project = project_copy(tmp_path, stack)
    out = tmp_path / "plan"
    code = main(["synth", "--stack", "mine", "--quiet", "--project-dir", str(project), "--out", str(out)])
    assert code == 0, f"{where}: {capsys.readouterr().err}"
    deployments = sorted(p.name for p in (out / "manifests").rglob("deployment-*.yaml"))
    assert any(values["models"][0]["name"] in name for name in deployments), deployments
