"""Files named on the command line are read one way: a bad one is refused with the option, the path and the reason,
before any other work, by every command that takes one."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.tritonft.repo.conftest import make_spec
from tritonft import option_file
from tritonft.cli import main
from tritonft.errors import UserError
from tritonft.spec import Family


def test_a_missing_file_is_named_with_the_systems_reason(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"^--spec .*absent\.json: cannot read it \(No such file or directory\)$"):
        option_file.read_text("--spec", tmp_path / "absent.json")


def test_a_directory_is_not_read_as_a_file(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"cannot read it \(Is a directory\)"):
        option_file.read_text("--spec", tmp_path)


def test_bytes_that_are_not_utf8_are_named_with_their_offset(tmp_path: Path) -> None:
    path = tmp_path / "latin1.json"
    path.write_bytes(b'{"prompt": "caf\xe9"}')
    with pytest.raises(UserError, match=r"latin1\.json: not UTF-8 text \(invalid continuation byte at byte 15\)"):
        option_file.read_json("--expected-answers", path)


def test_invalid_json_is_named_with_the_parsers_position(tmp_path: Path) -> None:
    path = tmp_path / "answers.json"
    path.write_text('{"gpt2": [}')
    with pytest.raises(UserError, match=r"^--expected-answers .*answers\.json: not JSON: .*line 1 column 11"):
        option_file.read_json("--expected-answers", path)


def test_json_is_returned_as_parsed(tmp_path: Path) -> None:
    path = tmp_path / "answers.json"
    path.write_text('{"gpt2": [{"prompt": "a", "answer": "b"}]}')
    assert option_file.read_json("--expected-answers", path) == {"gpt2": [{"prompt": "a", "answer": "b"}]}


def test_a_spec_with_an_unknown_field_is_refused_naming_the_field(tmp_path: Path) -> None:
    path = tmp_path / "spec.json"
    path.write_text(make_spec(Family.GPT2).to_json().replace('"name"', '"nmae"', 1))
    with pytest.raises(UserError, match=r"spec\.json: model spec has unknown field\(s\) \['nmae'\]"):
        option_file.read_spec("--spec", path)


def test_a_valid_spec_round_trips(tmp_path: Path) -> None:
    spec = make_spec(Family.T5)
    path = tmp_path / "spec.json"
    path.write_text(spec.to_json())
    assert option_file.read_spec("--spec", path) == spec


@pytest.mark.parametrize(
    ("command", "option"),
    [
        (["repo", "--out", "{tmp}/out", "--spec", "{bad}"], "--spec"),
        (["gateway", "--triton-url", "127.0.0.1:1", "--port", "1", "--spec", "{bad}"], "--spec"),
        (["probe", "--url", "grpc://127.0.0.1:1", "--spec", "{bad}"], "--spec"),
        (
            ["probe", "--url", "grpc://127.0.0.1:1", "--model", "gpt2", "--expected-answers", "{bad}"],
            "--expected-answers",
        ),
        (["verify", "{tmp}/absent-2-gpu", "--expected-tokens", "{bad}"], "--expected-tokens"),
    ],
    ids=["repo", "gateway", "probe-spec", "probe-answers", "verify"],
)
def test_every_command_refuses_a_missing_file_before_any_other_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str], option: str
) -> None:
    bad = tmp_path / "absent.json"
    words = [w.format(tmp=tmp_path, bad=bad) for w in command]
    assert main(words) == 1
    assert capsys.readouterr().err == f"error: {option} {bad}: cannot read it (No such file or directory)\n"
    assert list(tmp_path.iterdir()) == []


def test_a_spec_that_is_not_a_json_object_is_refused_as_such(tmp_path: Path) -> None:
    path = tmp_path / "spec.json"
    path.write_text('"gpt2"')
    expected = r"spec\.json: model spec must be a JSON object with the fields \[.*\], not str$"
    with pytest.raises(UserError, match=expected):
        option_file.read_spec("--spec", path)
