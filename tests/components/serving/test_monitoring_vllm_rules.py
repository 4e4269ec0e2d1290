"""The rules of a vLLM model's service under Debian's real ``promtool``: each records / stays silent / fires as
specified on synthetic series named as NVIDIA's vLLM backend and Triton export them
(``components/serving/monitoring_vllm_rules_test.yaml``)."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from components.serving.monitoring import STARTUP_READY_RECORD, STARTUP_SCHEDULED_RECORD, vllm_prometheus_rule_spec
from tests.components.serving.test_monitoring_rules import promtool

REPO = Path(__file__).resolve().parents[3]
UNIT_TESTS = REPO / "components" / "serving" / "monitoring_vllm_rules_test.yaml"


def _rendered(out: Path) -> None:
    spec = vllm_prometheus_rule_spec("triton", "m", 0.5)
    (out / "rules.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))


def test_promtool_loads_the_vllm_rules(tmp_path: Path) -> None:
    _rendered(tmp_path)
    result = promtool("check", "rules", "rules.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 8 rules found" in result.stdout, result.stdout  # waiting, TTFT p95, 2 start-up records, 4 alerts


def test_each_vllm_rule_records_fires_and_stays_silent_as_specified(tmp_path: Path) -> None:
    _rendered(tmp_path)
    shutil.copy(UNIT_TESTS, tmp_path / UNIT_TESTS.name)
    result = promtool("test", "rules", UNIT_TESTS.name, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_unit_tests_cover_every_vllm_rule() -> None:
    spec = vllm_prometheus_rule_spec("triton", "m", 0.5)
    names = {r.get("record") or r["alert"] for g in spec["groups"] for r in g["rules"]}
    tests = yaml.safe_load(UNIT_TESTS.read_text())["tests"]
    covered = {a["alertname"] for t in tests for a in t.get("alert_rule_test", [])}
    covered |= {e["expr"] for t in tests for e in t.get("promql_expr_test", [])}
    assert names - {STARTUP_SCHEDULED_RECORD, STARTUP_READY_RECORD} <= covered
