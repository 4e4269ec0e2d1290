"""The rules the real Pulumi CLI applies around the program, applied to the committed project and stacks.

The mock engine never sees them, and breaking any of them stops every user's `pulumi preview/up/destroy` before the
program starts. Each rule comes from Pulumi v3's sources (cited per test; the reproduction is
`tritonft/synth/cli_rules.py`), and was seen in a run with the real CLI v3.259.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from components.settings.load import load_settings
from tests.plans import StackPlans, deploy_secrets
from tritonft.errors import UserError
from tritonft.synth.cli_rules import (
    CliRuleError,
    CliValue,
    merge_project_config,
    missing_keys_message,
    project_config_problems,
    stack_values,
    stringified_stack,
    validate_config_value,
)

REPO = Path(__file__).resolve().parents[3]
PROJECT = yaml.safe_load((REPO / "Pulumi.yaml").read_text())
STACKS = sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in (REPO / "stacks").glob("Pulumi.*.yaml"))


def stack_text(stack: str) -> str:
    return (REPO / "stacks" / f"Pulumi.{stack}.yaml").read_text()


def test_the_four_environments_are_checked() -> None:
    assert {"local", "dev", "staging", "prod"} <= set(STACKS)


def test_project_config_block_is_accepted_by_the_cli() -> None:
    """`project.json` (configTypeDeclaration) and `Project.Validate`: types, array items, typed defaults."""
    assert project_config_problems(PROJECT) == []


@pytest.mark.parametrize("stack", STACKS)
def test_every_declared_key_without_default_is_set_by_the_stack(stack: str) -> None:
    """`pkg/workspace/config.go` mergeConfig: a declared project key with no default must be set by every stack."""
    values = stack_values(stack_text(stack))
    required = [k for k, d in PROJECT["config"].items() if isinstance(d, dict) and "default" not in d]
    assert required, "platform is required of every stack and declared so"
    assert [k for k in required if k not in values and k.split(":", 1)[1] not in values] == []


@pytest.mark.parametrize("stack", STACKS)
def test_stack_passes_the_cli_config_validation(stack: str) -> None:
    """mergeConfig + `ValidateConfigValue`: every declared key set with a value of its declared type."""
    merged = merge_project_config(PROJECT, stack, stack_values(stack_text(stack)))
    assert "triton-ft:platform" in merged


@pytest.mark.parametrize("stack", STACKS)
def test_stringified_stack_passes_the_cli_config_validation(stack: str) -> None:
    """After `pulumi config set` every scalar is a string ("1", "false"); the CLI accepts those for typed keys."""
    merge_project_config(PROJECT, stack, stack_values(stringified_stack(stack_text(stack))))


@pytest.mark.parametrize("stack", STACKS)
def test_stringified_copy_quotes_every_scalar(stack: str) -> None:
    original = yaml.safe_load(stack_text(stack))["config"]
    copy = yaml.safe_load(stringified_stack(stack_text(stack)))
    assert "encryptionsalt" in copy
    scalars = {k: v for k, v in copy["config"].items() if not isinstance(v, (dict, list))}
    assert scalars and all(isinstance(v, str) for v in scalars.values())
    assert any(not isinstance(original[k], str) for k in scalars), "the stack has typed scalars to stringify"
    assert {k: v for k, v in copy["config"].items() if isinstance(v, (dict, list))} == {
        k: v for k, v in original.items() if isinstance(v, (dict, list))
    }


@pytest.mark.slow
@pytest.mark.parametrize("stack", STACKS)
def test_stringified_stack_synthesises_the_same_plan(stack: str, stack_plan: StackPlans, tmp_path: Path) -> None:
    """The program must accept the stringified file and build exactly the same plan from it."""
    from tritonft.synth.run import synthesize

    copy_root = tmp_path / "project"
    copy_root.mkdir()
    for entry in REPO.iterdir():
        if entry.name not in ("stacks", "build", ".git"):
            (copy_root / entry.name).symlink_to(entry)
    (copy_root / "stacks").mkdir()
    (copy_root / "stacks" / f"Pulumi.{stack}.yaml").write_text(stringified_stack(stack_text(stack)))

    original = stack_plan(stack)
    stringified = synthesize(
        stack, out=tmp_path / "stringified", project_dir=copy_root, assume_secrets=deploy_secrets(stack)
    )

    assert original.resources and len(original.resources) == len(stringified.resources)
    assert _tree(original.out) == _tree(stringified.out)


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# --- the reproduction of the CLI's rules, each against the behaviour its source defines ---------------------------


def test_missing_keys_are_reported_together_in_the_cli_words() -> None:
    """`missingStackConfigurationKeysError` / `formatMissingKeys`, as the real run printed it."""
    assert missing_keys_message("local", ["triton-ft:vpcId"]) == (
        "Stack 'local' is missing configuration value 'triton-ft:vpcId'"
    )
    assert missing_keys_message("local", ["triton-ft:vpcId", "triton-ft:addons", "triton-ft:awsRegion"]) == (
        "Stack 'local' is missing configuration values 'triton-ft:addons', 'triton-ft:awsRegion' and 'triton-ft:vpcId'"
    )


def test_a_declared_key_without_default_is_required() -> None:
    project = {"name": "p", "config": {"p:region": {"type": "string"}, "p:size": {"type": "integer"}}}
    with pytest.raises(CliRuleError, match=r"^Stack 's' is missing configuration values 'p:region' and 'p:size'$"):
        merge_project_config(project, "s", {})


def test_a_key_of_another_namespace_is_not_required() -> None:
    project = {"name": "p", "config": {"aws:region": {"value": "us-west-2"}}}
    assert merge_project_config(project, "s", {})["aws:region"] == CliValue("us-west-2")


def test_a_declared_default_fills_an_unset_key_as_go_prints_it() -> None:
    """`createConfigValue`: primitives through `%v` (true, 3), anything else as a JSON object value."""
    project = {
        "name": "p",
        "config": {
            "p:on": {"type": "boolean", "default": True},
            "p:n": {"type": "integer", "default": 3},
            "p:archs": {"type": "array", "items": {"type": "string"}, "default": ["80"]},
        },
    }
    merged = merge_project_config(project, "s", {})
    assert merged["p:on"] == CliValue("true")
    assert merged["p:n"] == CliValue("3")
    assert merged["p:archs"] == CliValue('["80"]', is_object=True)


def test_stack_scalars_keep_their_literal_text() -> None:
    """`Value.UnmarshalYAML` decodes a scalar into a string first: the text as written, not a parsed value."""
    values = stack_values("config:\n  p:a: True\n  p:b: 010\n  p:c: '1'\n  p:d: [80, 90]\n")
    assert values["p:a"] == CliValue("True")
    assert values["p:b"] == CliValue("010")
    assert values["p:c"] == CliValue("1")
    assert values["p:d"] == CliValue("[80, 90]", is_object=True)


@pytest.mark.parametrize(("text", "ok"), [("1", True), ("-4", True), ("1.0", False), ("one", False), ("", False)])
def test_integer_keys_take_text_that_parses_as_an_integer(text: str, ok: bool) -> None:
    assert validate_config_value("integer", None, text) is ok


@pytest.mark.parametrize(("text", "ok"), [("true", True), ("false", True), ("True", False), ("yes", False)])
def test_boolean_keys_take_only_lower_case_true_or_false(text: str, ok: bool) -> None:
    assert validate_config_value("boolean", None, text) is ok


def test_a_capitalised_boolean_in_a_stack_file_stops_the_cli() -> None:
    project = {"name": "p", "config": {"p:autoscaling": {"type": "boolean", "default": True}}}
    with pytest.raises(CliRuleError, match="key 'p:autoscaling' must be of type 'boolean'"):
        merge_project_config(project, "s", stack_values("config:\n  p:autoscaling: True\n"))


def test_numbers_in_a_list_of_strings_stop_the_cli() -> None:
    project = {"name": "p", "config": {"p:archs": {"type": "array", "items": {"type": "string"}, "default": []}}}
    with pytest.raises(CliRuleError, match="must be of type 'array<string>'"):
        merge_project_config(project, "s", stack_values("config:\n  p:archs: [80, 90]\n"))


def test_a_declared_secret_set_in_plain_text_stops_the_cli() -> None:
    project = {"name": "p", "config": {"p:token": {"type": "string", "secret": True, "default": ""}}}
    with pytest.raises(CliRuleError, match="must be encrypted as it's secret"):
        merge_project_config(project, "s", stack_values("config:\n  p:token: hf_abc\n"))
    merge_project_config(project, "s", stack_values("config:\n  p:token:\n    secure: AAEAAQ==\n"))


@pytest.mark.parametrize(
    ("declaration", "problem"),
    [
        ({"type": "object"}, "is not one of"),
        ({"type": "array"}, "does not specify the underlying type"),
        ({"type": "integer", "default": "ten"}, "is not of the expected type 'integer'"),
        ({"type": "string", "required": True}, "are not allowed"),
    ],
)
def test_a_project_declaration_the_cli_refuses_is_reported(declaration: dict[str, object], problem: str) -> None:
    (found,) = project_config_problems({"name": "p", "config": {"p:key": declaration}})
    assert problem in found


# --- around the program -------------------------------------------------------------------------------------------


def test_the_language_host_runs_no_typechecker_before_each_command() -> None:
    """`runtime.options.typechecker` makes the Python host run, before every preview/up/destroy and from the project
    directory, `python -m mypy --exclude <venv> <project dir>` (sdk/python/cmd/pulumi-language-python/main.go). A
    directory argument replaces `[tool.mypy] files`, so the whole tree is checked: the model_repo/*/1/model.py files
    are duplicate modules to mypy and stop it at once, and a cold strict run costs tens of seconds per command.
    The test command runs mypy (strict, configured files) instead; the option stays off.
    """
    options = PROJECT["runtime"].get("options", {})
    assert "typechecker" not in options
    assert options.get("toolchain") == "uv"


def test_a_stack_without_platform_is_told_only_that() -> None:
    """No Python `None` in user messages: platform-specific requirements are not guessed without a platform."""
    with pytest.raises(UserError) as caught:
        load_settings({"models": "[]"}, project="triton-ft", stack="s")
    problems = caught.value.problems
    assert any(p.startswith("platform: is required") for p in problems)
    assert not [p for p in problems if "None" in p or "for platform" in p]


def test_synth_stops_like_the_cli_on_a_missing_declared_key(tmp_path: Path) -> None:
    from tritonft.synth.run import synthesize

    root = tmp_path / "project"
    (root / "stacks").mkdir(parents=True)
    (root / "Pulumi.yaml").write_text((REPO / "Pulumi.yaml").read_text())
    (root / "stacks" / "Pulumi.bare.yaml").write_text("config:\n  triton-ft:environment: dev\n")
    with pytest.raises(UserError, match="Stack 'bare' is missing configuration value 'triton-ft:platform'"):
        synthesize("bare", out=tmp_path / "out", project_dir=root)
    assert not (tmp_path / "out").exists()
