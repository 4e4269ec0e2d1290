"""The keys' expiry alerts under the real ``promtool``: ``ApiKeyExpiringSoon`` fires from 14 days before a key's
``expires`` day, ``ApiKeyExpired`` from the day itself, by the clock alone (no ``up``, no traffic); a key without an
``expires`` day has no alert; the rule exists only where the Prometheus operator runs."""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any

import yaml

from components.common.edge import GatewayRef, api_key_expiry_rule_spec
from components.common.exposure import PROBE_CLIENT, EdgeObjects, EdgeObjectsArgs
from components.settings.api_keys import ApiKey
from tests.components.fixtures import make_target
from tests.components.serving.test_monitoring_rules import promtool
from tritonft.synth.engine import RecordingMocks, run_program

EXPIRING = ApiKey("webapp", "default", date(1970, 1, 15))
"""promtool evaluates from the epoch: this key's warning is due at once, its expiry at 14 days."""


def _unit_test(spec: dict[str, Any], eval_time: str, alert: str, firing: bool) -> dict[str, Any]:
    """A promtool case: ``alert`` of webapp's key fires (with the labels and annotations it is rendered with) or not."""
    (rule,) = [r for r in spec["groups"][0]["rules"] if r["alert"] == alert and r["labels"]["api_key"] == "webapp"]
    expected = [{"exp_labels": rule["labels"], "exp_annotations": rule["annotations"]}] if firing else []
    return {
        "interval": "1d",
        "input_series": [],
        "alert_rule_test": [{"alertname": alert, "eval_time": eval_time, "exp_alerts": expected}],
    }


def test_the_warning_fires_two_weeks_ahead_and_the_expiry_on_the_day(tmp_path: Path) -> None:
    spec = api_key_expiry_rule_spec([EXPIRING, ApiKey("batch")])
    assert spec is not None
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    tests = [
        _unit_test(spec, "0m", "ApiKeyExpiringSoon", True),
        _unit_test(spec, "13d", "ApiKeyExpired", False),
        _unit_test(spec, "14d", "ApiKeyExpired", True),
    ]
    # Both rules read only the clock (``for: 0m``): an hourly grid lands on every day boundary the cases name, and
    # keeps promtool to 336 evaluations per case instead of 20,160 (at 1m it took over 120 s on a loaded CI machine).
    suite = {"rule_files": ["rules.yaml"], "evaluation_interval": "1h", "tests": tests}
    (tmp_path / "test.yaml").write_text(yaml.safe_dump(suite, sort_keys=False))
    result = promtool("test", "rules", "test.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_each_alert_names_the_key_and_its_day_and_links_its_runbook() -> None:
    spec = api_key_expiry_rule_spec([EXPIRING])
    assert spec is not None
    for rule in spec["groups"][0]["rules"]:
        assert (rule["labels"]["api_key"], rule["labels"]["expires"]) == ("webapp", "1970-01-15")
        assert rule["annotations"]["runbook_url"].endswith("#" + rule["alert"].lower())


def test_keys_without_an_expiry_get_no_alert() -> None:
    assert api_key_expiry_rule_spec([ApiKey("probe"), ApiKey("webapp", "k2")]) is None


def test_the_rule_is_made_only_where_the_prometheus_operator_runs(mocks: RecordingMocks) -> None:
    def build(monitoring: bool) -> None:
        args = EdgeObjectsArgs(
            target=make_target(),
            gateway=GatewayRef("test-edge"),
            base_host="triton.example.com",
            models=(),
            api=True,
            keys=(ApiKey(PROBE_CLIENT), EXPIRING),
            monitoring=monitoring,
        )
        EdgeObjects(f"edge-{monitoring}", args)

    run_program(lambda: build(False))
    assert not [r for r in mocks.resources if r.inputs.get("kind") == "PrometheusRule"]
    run_program(lambda: build(True))
    (rule,) = [r for r in mocks.resources if r.inputs.get("kind") == "PrometheusRule"]
    assert rule.inputs["metadata"]["labels"]["release"] == "kube-prometheus-stack"
