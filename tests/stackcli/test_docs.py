"""The generated references are the code's: committed pages equal what ``python -m stackcli.docs`` writes, a changed
setting's docstring changes the configuration page, every alert has a runbook, the JSON Schema accepts every stack."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import jsonschema  # type: ignore[import-untyped]  # kubernetes-validate's; no stubs in the lock
import pytest
import yaml

from components.settings import docs as settings_docs
from components.settings import schema as settings_schema
from components.settings.alerting import ALERT_FOR
from stackcli import docs
from stackcli.cli import COMMANDS

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


def test_a_changed_settings_docstring_changes_the_configuration_page(monkeypatch: pytest.MonkeyPatch) -> None:
    before = docs.configuration_page()
    knobs = tuple(
        dataclasses.replace(k, doc="Where the replicas go, said differently.") if k.key == "replicasMax" else k
        for k in settings_schema.STACK_KNOBS
    )
    monkeypatch.setattr(settings_docs, "STACK_KNOBS", knobs)
    after = docs.configuration_page()
    assert after != before
    assert "| `replicasMax` | any | integer | `1` | Where the replicas go, said differently." in after


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


def test_the_regenerate_command_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """`python -m stackcli.docs --check` is the command the docs name: here, with everything current."""
    assert docs.main(["--check"]) == 0
