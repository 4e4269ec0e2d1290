"""The stack file read as the Pulumi CLI reads it (Go's yaml.v3, ``tritonft/synth/go_yaml.py``), not as PyYAML does:
a key written twice is refused naming it, its lines and yaml.v3's words; YAML 1.1-only values inside objects reach the
settings as the CLI hands them over. Through ``tritonft synth``: exit 1, no traceback, nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tritonft.cli import main
from tritonft.synth.go_yaml import duplicate_keys, go_resolve, load

REPO = Path(__file__).resolve().parents[3]
DEV = (REPO / "stacks" / "Pulumi.dev.yaml").read_text()


def with_line_after(text: str, anchor: str, line: str) -> str:
    """``text`` with ``line`` inserted after the first line containing ``anchor`` (keeps the file's comments)."""
    lines = text.splitlines()
    at = next(i for i, existing in enumerate(lines) if anchor in existing)
    return "\n".join([*lines[: at + 1], line, *lines[at + 1 :]]) + "\n"


def synth(project: Path, text: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    (project / "stacks" / "Pulumi.broken.yaml").write_text(text)
    code = main(["synth", "--stack", "broken", "--project-dir", str(project)])
    return code, capsys.readouterr().err


def listed(err: str) -> list[str]:
    return [line.removeprefix("  - ") for line in err.splitlines() if line.startswith("  - ")]


def line_of(text: str, needle: str, occurrence: int = 1) -> int:
    hits = [i + 1 for i, line in enumerate(text.splitlines()) if needle in line]
    return hits[occurrence - 1]


def test_a_stack_key_written_twice_is_refused_with_both_lines(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = with_line_after(DEV, "triton-ft:gpuNodesMax", "  triton-ft:awsRegion: eu-west-1")

    code, err = synth(project, text, capsys)

    first, again = line_of(text, "triton-ft:awsRegion"), line_of(text, "triton-ft:awsRegion", 2)
    assert code == 1 and "Traceback" not in err
    assert "the Pulumi CLI refuses this stack file" in err
    assert listed(err) == [
        f"awsRegion: written again on line {again} (first on line {first}); keep one of them (yaml.v3: line {again}: "
        f'mapping key "triton-ft:awsRegion" already defined at line {first})'
    ]
    assert not (project / "build").exists()


def test_a_model_key_written_twice_is_refused_naming_the_models_entry(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = with_line_after(DEV, "maxOutputLen: 64", "      maxOutputLen: 128")

    code, err = synth(project, text, capsys)

    (problem,) = listed(err)
    assert code == 1
    assert problem.startswith("models[1].maxOutputLen: written again on line")
    assert 'mapping key "maxOutputLen" already defined at line' in problem


def test_every_key_written_twice_is_listed_at_once(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = with_line_after(DEV, "triton-ft:autoscaling", "  triton-ft:autoscaling: true")
    text = with_line_after(text, "name: t5-small", "      name: t5-base")

    code, err = synth(project, text, capsys)

    assert code == 1
    assert [p.split(":", 1)[0] for p in listed(err)] == ["autoscaling", "models[0].name"]


def test_a_project_file_key_written_twice_is_refused_too(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = (project / "Pulumi.yaml").read_text()
    text = with_line_after(text, "name: triton-ft", "name: triton-ft-copy")
    (project / "Pulumi.yaml").write_text(text)

    code, err = synth(project, DEV, capsys)

    first, again = line_of(text, "name: triton-ft"), line_of(text, "name: triton-ft", 2)
    assert code == 1 and "Traceback" not in err
    assert "Pulumi.yaml: the Pulumi CLI refuses this project file" in err
    assert listed(err) == [
        f"name: written again on line {again} (first on line {first}); keep one of them (yaml.v3: line {again}: "
        f'mapping key "name" already defined at line {first})'
    ]


def test_a_yaml_1_1_boolean_inside_a_model_reaches_the_settings_as_the_string_the_cli_passes(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = with_line_after(DEV, "maxOutputLen: 64", "      streaming: yes")

    code, err = synth(project, text, capsys)

    assert code == 1 and "Traceback" not in err
    assert listed(err) == ["models[1].streaming: must be true or false, got 'yes'"]


def test_a_date_like_value_inside_a_model_is_a_problem_not_a_traceback(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = with_line_after(DEV, "name: t5-small", "      revision: 2024-01-01").replace(
        "      revision: df1b051c49625cf57a3d0d8d3863ed4d13564fe4\n", ""
    )

    code, err = synth(project, text, capsys)

    assert code == 1 and "Traceback" not in err
    assert [p.split(":", 1)[0] for p in listed(err)] == ["models[0].revision"]


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("yes", "yes"),
        ("off", "off"),
        ("True", True),
        ("FALSE", False),
        ("1:20", "1:20"),
        ("1e3", 1000.0),
        ("0o17", 15),
        ("017", 15),
        ("0x1F", 31),
        ("1_000", 1000),
        ("08", 8.0),
        ("~", None),
        ("2024-01-01", "2024-01-01"),
    ],
)
def test_plain_scalars_resolve_as_yaml_v3_resolves_them(text: str, value: object) -> None:
    assert go_resolve(text) == value
    assert load(f"k: {text}\n") == {"k": value}


def test_quoted_scalars_stay_strings() -> None:
    assert load("a: 'yes'\nb: \"1e3\"\nc: !!str 12\n") == {"a": "yes", "b": "1e3", "c": "12"}


def test_pyyaml_alone_would_read_these_otherwise() -> None:
    assert yaml.safe_load("a: yes\nb: 1:20\nc: 1e3\n") == {"a": True, "b": 80, "c": "1e3"}


def test_duplicates_are_found_at_every_depth_with_their_paths() -> None:
    root = yaml.compose("config:\n  a: 1\n  m:\n    - x: 1\n      x: 2\n  a: 3\n")

    found = [(d.path, d.line, d.first_line) for d in duplicate_keys(root)]

    assert found == [("config.m[0].x", 5, 4), ("config.a", 6, 2)]


def test_merge_keys_still_merge() -> None:
    assert load("base: &b {x: 1}\nitem:\n  <<: *b\n  y: 2\n") == {"base": {"x": 1}, "item": {"x": 1, "y": 2}}
