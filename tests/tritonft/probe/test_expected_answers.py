"""Exact expected answers (``tritonft probe --expected-answers``): parsing, judging, and the target's JSON form."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from tritonft.errors import UserError
from tritonft.probe.cli import add_arguments, config_from_args
from tritonft.probe.expectations import Sample, judge_exact
from tritonft.probe.runner import ModelTarget
from tritonft.spec import Family

SAMPLES = (Sample("w1 w2", "w3 w4"), Sample("w5", "w6"))


def probe_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(["--url", "http://127.0.0.1:8000", *argv])


def write(tmp_path: Path, content: object) -> Path:
    path = tmp_path / "expected.json"
    path.write_text(json.dumps(content))
    return path


def test_answers_equal_to_the_expected_text_pass() -> None:
    verdict = judge_exact(SAMPLES, ["w3 w4", "w6"])
    assert verdict.ok and verdict.detail == "the expected answer, exactly, for 2 prompt(s)"


def test_an_answer_that_differs_in_one_character_fails_naming_the_prompt_and_both_texts() -> None:
    verdict = judge_exact(SAMPLES, ["w3 w4", "w6 "])
    assert not verdict.ok
    assert verdict.detail == "the answer to 'w5' is not the expected one: expected 'w6', got 'w6 '"


def test_the_file_gives_each_named_model_its_expected_answers(tmp_path: Path) -> None:
    path = write(tmp_path, {"t5": [{"prompt": "w1 w2", "answer": "w3 w4"}]})

    config = config_from_args(probe_args("--model", "t5", "--model", "gpt", "--expected-answers", str(path)))

    assert {t.name: t.expected for t in config.models} == {"t5": (Sample("w1 w2", "w3 w4"),), "gpt": ()}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ({"other": [{"prompt": "a", "answer": "b"}]}, "model 'other' is not probed (probed: t5)"),
        ({"t5": [{"prompt": "a"}]}, "'t5' must be a non-empty list like"),
        ({"t5": []}, "'t5' must be a non-empty list like"),
        ([{"prompt": "a", "answer": "b"}], 'expected {"MODEL": [{"prompt": "...", "answer": "..."}, ...]}'),
    ],
    ids=["unknown-model", "no-answer", "empty", "not-a-mapping"],
)
def test_a_bad_expected_answers_file_is_refused_naming_the_problem(
    tmp_path: Path, content: object, message: str
) -> None:
    path = write(tmp_path, content)
    with pytest.raises(UserError, match="--expected-answers") as failure:
        config_from_args(probe_args("--model", "t5", "--expected-answers", str(path)))
    assert message in str(failure.value)


def test_a_target_keeps_its_expected_answers_through_json_and_omits_them_when_there_are_none() -> None:
    target = ModelTarget("t5", Family.T5, expected=SAMPLES)

    assert ModelTarget.from_dict(json.loads(json.dumps(target.to_dict()))) == target
    assert "expected" not in ModelTarget("t5", Family.T5).to_dict()
