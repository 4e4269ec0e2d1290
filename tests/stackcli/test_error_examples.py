"""The invalid stacks the quick start and the troubleshooting page show are what ``tritonft synth`` prints: each
page's example (a ``$ tritonft synth --stack broken`` block) run as written, in a checkout holding the stack the page
describes, prints the page's lines exactly and exits 1."""

from __future__ import annotations

import copy
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.stackcli.doc_commands import FENCE, ROOT, checkout, run_as_written
from tests.stackcli.test_snippets import STACK_SNIPPETS

PROMPT = "$ tritonft synth --stack broken"


def first_ft_stack() -> dict[str, Any]:
    """The FasterTransformer stack on your cluster of "Your first stack", as written."""
    return next(
        copy.deepcopy(v)
        for w, v in STACK_SNIPPETS
        if w.startswith("docs/get-started/first-stack.md")
        and v.get("platform") == "kubernetes"
        and v["models"][0]["hfRepo"] == "google-t5/t5-small"
    )


def quick_start_mistakes(stack: dict[str, Any]) -> None:
    """``storageClass`` misspelled, ``tensorParallel: 3`` on its model, ``replicasMin: 3`` above ``replicasMax: 2``."""
    stack["storageClas"] = stack.pop("storageClass")
    stack["models"][0]["tensorParallel"] = 3
    stack |= {"replicasMin": 3, "replicasMax": 2}


def troubleshooting_mistakes(stack: dict[str, Any]) -> None:
    """``storageClass`` misspelled, ``replicasMin: 3`` above ``replicasMax: 2``, GPT-2's ``hfRepo`` misspelled."""
    stack["storageClas"] = stack.pop("storageClass")
    stack |= {"replicasMin": 3, "replicasMax": 2}
    stack["models"] = [
        {"name": "gpt2", "hfRepo": "openai-community/gpt-2", "revision": "607a30d783dfa663caf39e06633721c8d4cfcd7e"}
    ]


EXAMPLES: dict[str, Callable[[dict[str, Any]], None]] = {
    "docs/get-started/quickstart.md": quick_start_mistakes,
    "docs/troubleshooting.md": troubleshooting_mistakes,
}


def example(page: str) -> tuple[list[str], list[str]]:
    """The page's example: the command of its ``$`` line, and the lines it shows printed."""
    text = (ROOT / page).read_text(encoding="utf-8")
    (block,) = [m.group(2) for m in FENCE.finditer(text) if m.group(2).startswith(PROMPT)]
    prompt, *printed = block.splitlines()
    return shlex.split(prompt.removeprefix("$ ")), printed


@pytest.mark.slow
@pytest.mark.parametrize("page", EXAMPLES)
def test_the_pages_invalid_stack_prints_what_the_page_shows(page: str, tmp_path: Path) -> None:
    argv, printed = example(page)
    stack = first_ft_stack()
    EXAMPLES[page](stack)
    project = checkout(tmp_path)
    config = {f"triton-ft:{k}": v for k, v in stack.items()}
    (project / "stacks" / "Pulumi.broken.yaml").write_text(yaml.safe_dump({"config": config}, sort_keys=False))

    done = run_as_written(argv, project)

    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr.splitlines() == printed
