"""The platform's alerts under the real ``promtool``: each pends, fires and stays silent on synthetic series named and
labelled as their exporters name them (``components/platform/signals_rules_test.yaml``), and each group is rendered
only where its signal is scraped."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.platform.signals import platform_rule_spec
from tests.components.serving.test_monitoring_rules import promtool

UNIT_TESTS = Path(__file__).resolve().parents[3] / "components" / "platform" / "signals_rules_test.yaml"
EVERY_SIGNAL = {"cert_manager": True, "envoy": True, "blackbox": True, "gpus": True}


def _alerts(spec: dict[str, Any]) -> set[str]:
    return {r["alert"] for g in spec["groups"] for r in g["rules"]}


def test_each_platform_alert_pends_fires_and_stays_silent_as_specified(tmp_path: Path) -> None:
    spec = platform_rule_spec("triton", **EVERY_SIGNAL)
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    shutil.copy(UNIT_TESTS, tmp_path / UNIT_TESTS.name)
    result = promtool("test", "rules", UNIT_TESTS.name, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_unit_tests_cover_every_platform_alert() -> None:
    tests = yaml.safe_load(UNIT_TESTS.read_text())["tests"]
    fired = {a["alertname"] for t in tests for a in t.get("alert_rule_test", []) if a["exp_alerts"]}
    assert _alerts(platform_rule_spec("triton", **EVERY_SIGNAL)) == fired


@pytest.mark.parametrize("signal", sorted(EVERY_SIGNAL))
def test_a_group_is_rendered_only_where_its_signal_is_scraped(signal: str) -> None:
    without = _alerts(platform_rule_spec("triton", **{**EVERY_SIGNAL, signal: False}))
    every = _alerts(platform_rule_spec("triton", **EVERY_SIGNAL))
    assert without < every
    assert {"TritonFtJobFailed", "TritonFtServingUnavailable"} <= without


def test_every_platform_alert_has_a_severity_and_a_runbook() -> None:
    for group in platform_rule_spec("triton", **EVERY_SIGNAL)["groups"]:
        for rule in group["rules"]:
            assert rule["labels"]["severity"] in {"critical", "warning"}, rule["alert"]
            assert rule["annotations"]["runbook_url"].endswith("#" + rule["alert"].lower())
