"""``tritonft judge`` (the judge Job's command): what it leaves as its termination message, and the settings it
refuses. Its verdict on a real Triton: ``tests/system/realtriton/test_judge.py``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from tritonft.errors import UserError
from tritonft.probe.in_cluster import (
    CONFIG_ENV,
    MESSAGE_LIMIT,
    config_from_props,
    run,
    settings_of,
    termination_message,
)
from tritonft.probe.report import CheckOutcome, ModelReport, ModelStatus, ProbeReport


def _report(ok: bool, detail: str = "wrong answer") -> ProbeReport:
    checks = () if ok else (CheckOutcome("inference", False, detail, 1.0, model="t5-small"),)
    status = ModelStatus.OK if ok else ModelStatus.WRONG_ANSWER
    return ProbeReport("http://c:8000", "http", ok, 1.0, checks=checks, models=(ModelReport("t5-small", "t5", status),))


def test_a_passed_judgement_leaves_passed_and_each_models_status() -> None:
    assert termination_message(_report(True)) == "passed: t5-small ok"


def test_a_failed_judgement_leaves_its_failed_checks() -> None:
    assert termination_message(_report(False)) == "inference[t5-small]: wrong answer"


def test_a_message_longer_than_kubernetes_keeps_is_cut_and_says_where_the_rest_is() -> None:
    message = termination_message(_report(False, "x" * 10_000))
    assert len(message.encode()) <= MESSAGE_LIMIT
    assert message.startswith("inference[t5-small]: xxx")
    assert message.endswith("[cut: the whole report is in the pod's log]")


def test_the_settings_read_are_the_in_process_probes() -> None:
    from components.probe import _config_from_props

    props = {"endpoint": "http://c:8000", "models": [{"name": "t5-small", "family": "t5"}], "deadline_s": 12}
    assert config_from_props(props) == _config_from_props(props)


def test_without_its_settings_the_command_names_the_variable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(CONFIG_ENV, raising=False)
    with pytest.raises(UserError, match=CONFIG_ENV):
        run(_args(tmp_path))
    monkeypatch.setenv(CONFIG_ENV, json.dumps({"models": []}))
    with pytest.raises(UserError, match="does not hold the probe's settings"):
        run(_args(tmp_path))


def _args(tmp_path: Path, config: Path | None = None, endpoint: str | None = None) -> argparse.Namespace:
    return argparse.Namespace(config_env=CONFIG_ENV, config=config, endpoint=endpoint, termination_log=tmp_path / "log")


PLANNED = {"endpoint": "http://dev-gpt2.triton.svc:8000", "models": [{"name": "gpt2", "family": "gpt2"}]}


def test_outside_the_cluster_the_settings_come_from_a_file_and_the_endpoint_from_the_command_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(CONFIG_ENV, raising=False)
    config = tmp_path / "judge.json"
    config.write_text(json.dumps({**PLANNED, "deadline_s": 60}))

    props = settings_of(_args(tmp_path, config, "http://127.0.0.1:8000"))

    assert props == {**PLANNED, "deadline_s": 60, "endpoint": "http://127.0.0.1:8000"}


def test_without_an_endpoint_the_settings_ask_the_planned_one(tmp_path: Path) -> None:
    config = tmp_path / "judge.json"
    config.write_text(json.dumps(PLANNED))
    assert settings_of(_args(tmp_path, config))["endpoint"] == PLANNED["endpoint"]


def test_a_missing_or_wrong_settings_file_is_named_with_the_fix(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"--config .*judge\.json: No such file .*`tritonft judge-inputs` wrote"):
        settings_of(_args(tmp_path, tmp_path / "judge.json"))
    (tmp_path / "judge.json").write_text("{}")
    with pytest.raises(UserError, match=r"--config .*judge\.json does not hold the probe's settings"):
        settings_of(_args(tmp_path, tmp_path / "judge.json"))
