"""The configuration reference and Pulumi.yaml's typed config are generated from the schema and kept in sync."""

from __future__ import annotations

from pathlib import Path

import yaml

from components.settings.docs import pulumi_config_block, reference_tables
from components.settings.schema import MODEL_KNOBS, STACK_KNOBS

REPO = Path(__file__).resolve().parents[3]


PAGE = REPO / "docs" / "reference" / "configuration.md"


def test_the_configuration_reference_page_is_current() -> None:
    assert reference_tables() in PAGE.read_text(), "run: python -m stackcli.docs"


def test_pulumi_yaml_config_block_is_current() -> None:
    project = yaml.safe_load((REPO / "Pulumi.yaml").read_text())
    assert project["config"] == pulumi_config_block(), "run: python -m stackcli.docs"
    assert project["stackConfigDir"] == "stacks"


def test_every_knob_is_documented_in_the_reference_page() -> None:
    page = PAGE.read_text()
    for knob in (*STACK_KNOBS, *MODEL_KNOBS):
        assert f"| `{knob.key}` |" in page


def test_platform_specific_knobs_are_not_declared_in_the_project() -> None:
    """A declared key without a default is required of every stack by the CLI, so scoped keys stay undeclared."""
    block = pulumi_config_block()
    scoped = [k for k in STACK_KNOBS if k.scope != "any"]
    assert scoped
    assert not [k.key for k in scoped if f"triton-ft:{k.key}" in block]
