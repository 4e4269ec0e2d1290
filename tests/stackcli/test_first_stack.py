"""The newcomer's path as the docs write it: a minimal stack of "Your first stack" saved as ``stacks/Pulumi.mine.yaml``
in a checkout, and the pages' own command, ``.venv/bin/tritonft synth --stack mine --quiet``, run there as written
(the real program under Pulumi's mock engine); the plan it writes is what "Deploy on your cluster" tells the reader
to expect (the OpenAI base URL, the gateway Service to port-forward)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.stackcli.doc_commands import ROOT, checkout, page_commands, run_as_written
from tests.stackcli.test_snippets import STACK_SNIPPETS

FIRST_STACK = "docs/get-started/first-stack.md"
YOUR_CLUSTER = "docs/deploy/your-cluster.md"
SYNTH_PAGES = (FIRST_STACK, YOUR_CLUSTER)


def first_stack() -> dict[str, object]:
    """The page's stack on an existing cluster, as written (its vLLM model)."""
    return next(v for w, v in STACK_SNIPPETS if w.startswith(FIRST_STACK) and v.get("platform") == "kubernetes")


def project_with_the_first_stack(tmp_path: Path) -> Path:
    """A checkout whose ``stacks/`` holds only the page's first stack, as ``stacks/Pulumi.mine.yaml``."""
    project = checkout(tmp_path)
    config = {f"triton-ft:{k}": v for k, v in first_stack().items()}
    (project / "stacks" / "Pulumi.mine.yaml").write_text(yaml.safe_dump({"config": config}, sort_keys=False))
    return project


@pytest.mark.slow
def test_the_first_vllm_stack_on_your_cluster_synthesizes_with_the_pages_command(tmp_path: Path) -> None:
    commands = {tuple(argv) for page in SYNTH_PAGES for argv in page_commands(page, __file__)}
    assert commands == {(".venv/bin/tritonft", "synth", "--stack", "mine", "--quiet")}, "the pages' synth changed"
    project = project_with_the_first_stack(tmp_path)

    (argv,) = commands
    done = run_as_written(list(argv), project)

    assert done.returncode == 0, done.stderr[-3000:]
    plan = project / "build" / "synth" / "mine"
    model = first_stack()["models"][0]["name"]  # type: ignore[index]
    deployments = sorted(p.name for p in (plan / "manifests").rglob("deployment-*.yaml"))
    assert any(model in name for name in deployments), deployments
    page = (ROOT / YOUR_CLUSTER).read_text(encoding="utf-8")
    outputs = json.loads((plan / "outputs.json").read_text())
    assert f"# {outputs['openaiBaseUrl']}" in page, "the first request's comment shows the openaiBaseUrl output"
    namespace = outputs["namespace"]
    service = yaml.safe_load((plan / "manifests" / namespace / "service-mine-gateway.yaml").read_text())
    (port,) = (p["port"] for p in service["spec"]["ports"])
    assert f"kubectl -n {namespace} port-forward svc/mine-gateway {port}:{port}" in page
    assert f"`{namespace}` is the default `namespace`" in page
