"""``tritonft judge`` (the judge Job's command): what it leaves as its termination message, and the settings it
refuses. Its verdict on a real Triton: ``tests/system/realtriton/test_judge.py``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from tritonft.errors import UserError
from tritonft.probe.in_cluster import CONFIG_ENV, MESSAGE_LIMIT, config_from_props, run, termination_message
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
        run(argparse.Namespace(config_env=CONFIG_ENV, termination_log=tmp_path / "log"))
    monkeypatch.setenv(CONFIG_ENV, json.dumps({"models": []}))
    with pytest.raises(UserError, match="does not hold the probe's settings"):
        run(argparse.Namespace(config_env=CONFIG_ENV, termination_log=tmp_path / "log"))
