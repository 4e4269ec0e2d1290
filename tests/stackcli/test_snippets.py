"""Docs that cannot go stale silently: every stack snippet of the README and the site is validated by the settings
loader, and every shell snippet is either run by a named test or says why no test can run it."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.settings.stack_file import settings_from_stack_file
from tests.stackcli.doc_commands import FENCE, PAGES, ROOT, RUN_BY, SHELLS, page_commands, shell_lines
from tritonft.errors import UserError

NEEDS = re.compile(r"^# needs-(cloud|cluster|network|gpu|docker|server|long-run): \S")
PREFIX = "triton-ft:"
BASE: dict[str, Any] = {
    "platform": "kubernetes",
    "environment": "local",
    "kubeContext": "docs",
    "gpuType": "A100-80GB",
    "gpusPerNode": 8,
    "imageRegistry": "registry.example.com/triton-ft",
    "storageClass": "nfs-rwx",
}
"""The stack a snippet that is only a part of one (some keys, some models) is checked in: an existing cluster with
room for any model of the docs."""
PLACEHOLDERS = {"<40-hex commit>": "ab" * 20}


def blocks(languages: tuple[str, ...]) -> list[tuple[str, str]]:
    """(page:line, body) of every fenced block in one of ``languages``."""
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for match in FENCE.finditer(text):
            if match.group(1) in languages:
                line = text[: match.start()].count("\n") + 1
                found.append((f"{page.relative_to(ROOT)}:{line}", match.group(2)))
    return found


def stack_snippet(body: str) -> dict[str, Any] | None:
    """The stack settings a YAML snippet states (``triton-ft:`` keys, or a list of model entries), or None when it
    is not a stack's (an ESC environment, a Kubernetes object)."""
    for placeholder, value in PLACEHOLDERS.items():
        body = body.replace(placeholder, value)
    data = yaml.safe_load(body)
    if isinstance(data, list) and all(isinstance(m, dict) and "hfRepo" in m for m in data):
        return {"models": data}
    if isinstance(data, dict):
        config = data.get("config", data)
        if isinstance(config, dict) and any(str(k).startswith(PREFIX) for k in config):
            return {k[len(PREFIX) :]: v for k, v in config.items() if str(k).startswith(PREFIX)}
    return None


STACK_SNIPPETS = [(where, s) for where, body in blocks(("yaml", "yml")) if (s := stack_snippet(body)) is not None]


AWS_ONLY = "applies to platform `aws` only"
"""The settings' words for a key of a built (EKS) cluster: a snippet of such keys is checked in prod's stack."""


def prods_values() -> dict[str, Any]:
    config = yaml.safe_load((ROOT / "stacks" / "Pulumi.prod.yaml").read_text())["config"]
    return {k[len(PREFIX) :]: v for k, v in config.items() if str(k).startswith(PREFIX)}


def load(values: dict[str, Any], tmp_path: Path) -> None:
    """A complete stack as it is; a part of one in :data:`BASE`, or in prod's stack when its keys are aws-only."""
    if "platform" in values:
        write_and_load(values, tmp_path)
        return
    try:
        write_and_load({**BASE, "models": BASE_MODELS, **values}, tmp_path)
    except UserError as exc:
        if AWS_ONLY not in str(exc):
            raise
        write_and_load({**prods_values(), **values}, tmp_path, secrets=("hfToken",))


def write_and_load(settings: dict[str, Any], tmp_path: Path, secrets: tuple[str, ...] = ()) -> None:
    (tmp_path / "stacks").mkdir(exist_ok=True)
    shutil.copy(ROOT / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    stack_file = {"config": {f"{PREFIX}{k}": v for k, v in settings.items()}}
    (tmp_path / "stacks" / "Pulumi.docs.yaml").write_text(yaml.safe_dump(stack_file, sort_keys=False))
    settings_from_stack_file(tmp_path, "docs", secrets)


BASE_MODELS = [
    {
        "name": "qwen-0-5b",
        "hfRepo": "Qwen/Qwen2.5-0.5B-Instruct",
        "revision": "7ae557604adf67be50417f59c2c2f167def9a775",
    }
]


@pytest.mark.parametrize(("where", "values"), STACK_SNIPPETS, ids=[w for w, _ in STACK_SNIPPETS])
def test_every_stack_snippet_of_the_docs_loads(where: str, values: dict[str, Any], tmp_path: Path) -> None:
    try:
        load(values, tmp_path)
    except UserError as exc:
        pytest.fail(f"{where}: the settings refuse this snippet:\n{exc}")


def test_the_docs_hold_a_complete_minimal_stack_per_platform_and_engine() -> None:
    complete = [(w, v) for w, v in STACK_SNIPPETS if "platform" in v and w.startswith("docs/get-started/first-stack")]
    engines = {
        (v["platform"], "vllm" if "Qwen" in m["hfRepo"] else "encoder" if "MiniLM" in m["hfRepo"] else "ft")
        for _, v in complete
        for m in v["models"]
    }
    assert engines == {(p, e) for p in ("kubernetes", "aws") for e in ("vllm", "encoder", "ft")}


def test_a_wrong_stack_snippet_is_refused(tmp_path: Path) -> None:
    wrong = stack_snippet("config:\n  triton-ft:models:\n    - name: gpt2\n      hfRepo: openai-community/gpt-2\n")
    assert wrong is not None
    with pytest.raises(UserError, match="did you mean 'openai-community/gpt2'"):
        load(wrong, tmp_path)


SHELL = blocks(SHELLS)


@pytest.mark.parametrize(("where", "body"), SHELL, ids=[w for w, _ in SHELL])
def test_every_shell_snippet_is_run_by_a_test_or_says_what_it_needs(where: str, body: str) -> None:
    first = body.strip().splitlines()[0]
    run_by = RUN_BY.match(first)
    if run_by is None:
        assert NEEDS.match(first), (
            f"{where}: a shell snippet's first line is `# run-by: tests/<file>.py` (a test that runs these commands) "
            f"or `# needs-<cloud|cluster|network|gpu|docker|server|long-run>: why`; it has {first!r}"
        )
        return
    test_file = ROOT / run_by.group(1)
    assert test_file.is_file(), f"{where}: {run_by.group(1)} does not exist"
    page = where.rsplit(":", 1)[0]
    assert reads_the_page(page, test_file.read_text(encoding="utf-8")), (
        f"{where}: {run_by.group(1)} does not run this block: it reads the page's blocks marked for it with "
        f'`page_commands("{page}", __file__)` and runs every command that returns'
    )


def reads_the_page(page: str, source: str) -> bool:
    """Whether a test's source takes ``page``'s commands from the page itself (:func:`page_commands`, which hands it
    every command of the blocks marked with that test, split as the shell splits them, or :func:`page_blocks`, the
    blocks as written for bash; both fail when there is none), rather than writing its own copy of them."""
    return ("page_commands(" in source or "page_blocks(" in source) and f'"{page}"' in source


def test_the_convention_catches_an_unmarked_snippet_and_a_test_that_does_not_read_the_page() -> None:
    assert NEEDS.match("# needs-cloud: a deployed stack")
    assert not NEEDS.match("pulumi up -s dev")
    names_the_command = 'main(["synth", "--stack", "mine", "--quiet"])  # as docs/get-started/first-stack.md says\n'
    assert not reads_the_page("docs/get-started/first-stack.md", names_the_command)
    first_stack_test = (ROOT / "tests" / "stackcli" / "test_first_stack.py").read_text(encoding="utf-8")
    assert reads_the_page("docs/get-started/first-stack.md", first_stack_test)
    assert not reads_the_page("docs/aws.md", first_stack_test)


def test_a_run_by_block_is_read_as_the_shell_reads_it() -> None:
    (synth,) = page_commands("docs/get-started/first-stack.md", str(ROOT / "tests/stackcli/test_first_stack.py"))
    assert synth == [".venv/bin/tritonft", "synth", "--stack", "mine", "--quiet"]
    assert shell_lines("# run-by: x\ngit stash && a --b c\\\n  --d  # note\n\n") == ["git stash && a --b c --d"]
