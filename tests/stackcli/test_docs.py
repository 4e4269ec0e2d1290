"""The generated references are the code's: committed pages equal what ``python -m stackcli.docs`` writes, a changed
setting's docstring (in a copy of the project) makes ``--check`` fail and the command rewrite the configuration page,
every alert has a runbook, the JSON Schema accepts every stack."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import jsonschema  # type: ignore[import-untyped]  # kubernetes-validate's; no stubs in the lock
import pytest
import yaml

from components.settings.alerting import ALERT_FOR
from stackcli import docs
from stackcli.cli import COMMANDS
from tests.stackcli.doc_commands import checkout, page_commands, run_as_written

ROOT = Path(__file__).resolve().parents[2]


def test_every_committed_generated_page_is_current() -> None:
    assert docs.stale() == [], "regenerate them: .venv/bin/python -m stackcli.docs"


def test_the_check_mode_names_a_stale_page_and_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text())
    docs.write(tmp_path, report=lambda _: None)
    assert docs.stale(tmp_path) == []
    page = tmp_path / "docs" / "reference" / "alerts.md"
    page.write_text(page.read_text() + "hand edit\n")
    assert docs.stale(tmp_path) == [Path("docs/reference/alerts.md")]


REGENERATE_PAGE = "docs/contributing/testing.md"
CHANGED_DOC = "Maximum Triton replicas, said differently."


def project_with_a_changed_docstring(tmp_path: Path) -> Path:
    """A checkout (a copy of the project: the generator writes beside its own path) with ``replicasMax``'s docstring
    changed in ``components/settings/schema.py``."""
    project = checkout(tmp_path)
    schema = project / "components" / "settings" / "schema.py"
    source = schema.read_text()
    original = '"replicasMax", "integer", "Maximum Triton replicas."'
    assert source.count(original) == 1, "replicasMax's docstring moved: update this test"
    schema.write_text(source.replace(original, f'"replicasMax", "integer", "{CHANGED_DOC}"'))
    return project


@pytest.mark.slow
def test_a_changed_settings_docstring_makes_the_pages_check_fail_and_its_command_rewrite_the_reference(
    tmp_path: Path,
) -> None:
    """The page's two commands, run in a copy of the project whose ``replicasMax`` docstring was edited: ``--check``
    names the configuration page (and the JSON Schema and ``Pulumi.yaml``'s typed config, which carry the same text)
    and exits 1; the regenerate command rewrites them, with the new words in the key's row; ``--check`` then
    passes."""
    regenerate, check = page_commands(REGENERATE_PAGE, __file__)
    assert regenerate == [".venv/bin/python", "-m", "stackcli.docs"] and check == [*regenerate, "--check"]
    project = project_with_a_changed_docstring(tmp_path)

    def run(argv: list[str]) -> subprocess.CompletedProcess[str]:
        return run_as_written(argv, project, timeout=300)

    stale = run(check)
    assert stale.returncode == 1, stale.stderr
    assert re.findall(r"^stale: (\S+)", stale.stderr, re.M) == [
        "docs/reference/configuration.md",
        "docs/reference/stack-settings.schema.json",
        "Pulumi.yaml",
    ]
    wrote = run(regenerate)
    assert wrote.returncode == 0, wrote.stderr
    assert "wrote docs/reference/configuration.md" in wrote.stdout
    page = (project / "docs" / "reference" / "configuration.md").read_text()
    assert f"| `replicasMax` | any | integer | `1` | {CHANGED_DOC}" in page
    assert "Maximum Triton replicas. " not in page
    assert f"description: {CHANGED_DOC}" in (project / "Pulumi.yaml").read_text()
    assert run(check).returncode == 0
    assert (ROOT / "docs" / "reference" / "configuration.md").read_text() != page, "the tree itself is untouched"


def test_the_cli_reference_has_every_commands_own_help() -> None:
    page = (ROOT / "docs" / "reference" / "cli.md").read_text()
    for name in COMMANDS:
        assert f"## tritonft {name}\n" in page
    assert "usage: tritonft preflight [-h] --stack STACK" in page


def test_every_alert_the_stack_renders_is_listed_with_a_runbook_section() -> None:
    alerts = {rule["alert"] for _, rule in docs.rendered_alerts()}
    assert set(ALERT_FOR) <= alerts
    runbooks = (ROOT / "docs" / "operate" / "runbooks.md").read_text()
    sections = set(re.findall(r"^## (\w+)$", runbooks, re.MULTILINE))
    assert alerts <= sections, f"write a runbook section for {sorted(alerts - sections)}"


def test_the_stack_settings_json_schema_accepts_every_stack_and_refuses_an_unknown_key() -> None:
    schema = json.loads((ROOT / "docs" / "reference" / "stack-settings.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    for path in sorted((ROOT / "stacks").glob("Pulumi.*.yaml")):
        jsonschema.validate(yaml.safe_load(path.read_text()), schema)
    with pytest.raises(jsonschema.ValidationError, match="gpuTyp"):
        jsonschema.validate({"config": {"triton-ft:platform": "aws", "triton-ft:gpuTyp": "L4"}}, schema)


def test_the_supported_models_page_names_every_catalog_model() -> None:
    from components.settings.catalog import KNOWN_MODELS

    page = (ROOT / "docs" / "reference" / "models.md").read_text()
    assert all(f"| `{repo}` |" in page for repo in KNOWN_MODELS)
