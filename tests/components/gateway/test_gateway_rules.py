"""The gateway's 5xx alert under Debian's real ``promtool``: it fires, pends and stays silent as its unit tests
(``components/gateway/gateway_rules_test.yaml``) specify, and the plan carries it with the gateway's monitor."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from components.gateway.spec import SERVER_ERROR_ALERT, gateway_rule_spec
from tests.components.gateway.test_spec import GATEWAY, _run
from tests.components.serving.test_monitoring import PROMETHEUS_RULE
from tests.components.serving.test_monitoring_rules import REPO, promtool
from tritonft.synth.engine import RecordingMocks

UNIT_TESTS = REPO / "components" / "gateway" / "gateway_rules_test.yaml"


def test_the_5xx_alert_fires_pends_and_stays_silent_as_specified(tmp_path: Path) -> None:
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(gateway_rule_spec("triton", "gw"), sort_keys=False))
    shutil.copy(UNIT_TESTS, tmp_path / UNIT_TESTS.name)
    result = promtool("test", "rules", UNIT_TESTS.name, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_alert_reads_only_its_own_gateways_series() -> None:
    (rule,) = gateway_rule_spec("ns", "gw")["groups"][0]["rules"]
    assert rule["alert"] == SERVER_ERROR_ALERT
    assert rule["expr"].count('namespace="ns",job="gw"') == 3


def test_a_monitored_gateway_carries_its_alert_rule_beside_its_monitor(mocks: RecordingMocks) -> None:
    _run(mocks)
    (rule,) = [r for r in mocks.of_type(PROMETHEUS_RULE) if r.inputs["metadata"]["name"] == GATEWAY]
    (group,) = rule.inputs["spec"]["groups"]
    assert [r["alert"] for r in group["rules"]] == [SERVER_ERROR_ALERT]
    assert rule.inputs["metadata"]["labels"]["release"] == "kube-prometheus-stack", "Prometheus selects it"
