"""The rendered Prometheus rules under Debian's real ``promtool``: every stack's rule files load, and each rule
records / stays pending / fires / stays silent on synthetic Triton series
(``components/serving/monitoring_rules_test.yaml``).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.serving.monitoring import prometheus_rule_spec
from tests.plans import StackPlans
from tritonft.synth.result import SynthResult

REPO = Path(__file__).resolve().parents[3]
STACKS = sorted(p.name.split(".")[1] for p in (REPO / "stacks").glob("Pulumi.*.yaml"))
MONITORED = {"staging", "prod"}
UNIT_TESTS = REPO / "components" / "serving" / "monitoring_rules_test.yaml"


def promtool(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("promtool")
    assert exe, "promtool is missing: run `bash scripts/setup/prometheus.sh` (Debian package prometheus)"
    return subprocess.run([exe, *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=120, check=False)


def rendered(plan: SynthResult) -> list[dict[str, Any]]:
    """The Kubernetes objects of a synthesized plan."""
    docs: list[dict[str, Any]] = []
    for manifest in sorted((plan.out / "manifests").rglob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(manifest.read_text()) if d]
    return docs


def of_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d.get("kind") == kind]


def rule_files(rules: list[dict[str, Any]], out: Path) -> list[Path]:
    """Each PrometheusRule as the ``groups:`` rule file the operator hands Prometheus."""
    files = []
    for doc in rules:
        path = out / f"{doc['metadata']['namespace']}-{doc['metadata']['name']}.rules.yaml"
        path.write_text(yaml.safe_dump(doc["spec"], sort_keys=False))
        files.append(path)
    return files


@pytest.mark.parametrize("stack", STACKS)
def test_promtool_accepts_every_rule_file_the_stack_renders(stack: str, stack_plan: StackPlans, tmp_path: Path) -> None:
    docs = rendered(stack_plan(stack))
    rules, monitors = of_kind(docs, "PrometheusRule"), of_kind(docs, "ServiceMonitor")
    component = {m["metadata"]["name"]: m["metadata"]["labels"]["app.kubernetes.io/component"] for m in monitors}
    alerting = {name for name, kind in component.items() if kind in ("triton", "gateway")}
    platform = [r for r in rules if r["metadata"]["labels"]["app.kubernetes.io/component"] == "platform"]
    component |= {r["metadata"]["name"]: "platform" for r in platform}
    assert {r["metadata"]["name"] for r in rules} - {r["metadata"]["name"] for r in platform} == alerting
    assert bool(rules) == (stack in MONITORED), "staging and prod monitor their services, the others not"
    # Triton: the ratio, 2 start-up records, 3 alerts; a vLLM model's: the queue, its TTFT p95, 2 start-up records,
    # 4 alerts (its scheduler gauges' absence among them); the gateway: its 5xx alert; the platform's (one per stack
    # with kube-prometheus-stack): Jobs and serving, certificates, the edge, the blackbox probes, the GPUs.
    expected = {"triton": 6, "vllm": 8, "gateway": 1, "platform": 10}
    for doc, path in zip(rules, rule_files(rules, tmp_path), strict=True):
        result = promtool("check", "rules", path, cwd=tmp_path)
        assert result.returncode == 0, result.stdout + result.stderr
        kind = component[doc["metadata"]["name"]]
        count = expected["vllm" if kind == "triton" and "vllm:" in str(doc["spec"]) else kind]
        assert f"SUCCESS: {count} rules found" in result.stdout, result.stdout


def test_each_rule_records_pends_fires_and_stays_silent_as_specified(tmp_path: Path) -> None:
    spec = prometheus_rule_spec("triton", "m", ratio_target=1.0, max_pending=32, ensembles=("e",))
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    shutil.copy(UNIT_TESTS, tmp_path / UNIT_TESTS.name)
    result = promtool("test", "rules", UNIT_TESTS.name, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_unit_tests_cover_every_rule_the_renderer_emits() -> None:
    spec = prometheus_rule_spec("triton", "m", ratio_target=1.0, max_pending=32, ensembles=("e",))
    names = {r.get("record") or r["alert"] for g in spec["groups"] for r in g["rules"]}
    tests = yaml.safe_load(UNIT_TESTS.read_text())["tests"]
    covered = {a["alertname"] for t in tests for a in t.get("alert_rule_test", [])}
    covered |= {e["expr"] for t in tests for e in t.get("promql_expr_test", [])}
    assert names <= covered, names - covered


def _alerts(spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["alert"]: r for g in spec["groups"] for r in g["rules"] if "alert" in r}


def test_alert_for_changes_only_the_named_alerts_duration_and_its_description() -> None:
    default = _alerts(prometheus_rule_spec("triton", "m", ratio_target=1.0, max_pending=32))
    tuned = _alerts(
        prometheus_rule_spec("triton", "m", ratio_target=1.0, max_pending=32, for_={"TritonQueueSaturated": "90s"})
    )
    assert {name: rule["for"] for name, rule in tuned.items()} == {
        "TritonInferenceFailures": "10m",
        "TritonQueueSaturated": "90s",
        "TritonRequestsPiling": "5m",
    }
    assert "for 90s:" in tuned["TritonQueueSaturated"]["annotations"]["description"]
    for name in ("TritonInferenceFailures", "TritonRequestsPiling"):
        assert tuned[name] == default[name]
    assert tuned["TritonQueueSaturated"]["expr"] == default["TritonQueueSaturated"]["expr"]


@pytest.mark.parametrize(
    ("for_", "message"),
    [
        (
            {"TritonQueueSaturation": "5m"},
            "no alert named TritonQueueSaturation; the alerts are TritonInferenceFailures",
        ),
        ({"TritonRequestsPiling": "5 min"}, "TritonRequestsPiling: '5 min' is not a Prometheus duration"),
        ({"TritonRequestsPiling": "m5"}, "TritonRequestsPiling: 'm5' is not a Prometheus duration"),
    ],
)
def test_alert_for_refuses_unknown_alerts_and_bad_durations(for_: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        prometheus_rule_spec("triton", "m", ratio_target=1.0, max_pending=32, for_=for_)


def test_promtool_accepts_every_alert_for_duration_the_renderer_accepts(tmp_path: Path) -> None:
    """The grammar checked at config time is Prometheus's own: each form loads under the real promtool."""
    for_ = {"TritonInferenceFailures": "1h30m", "TritonQueueSaturated": "45s", "TritonRequestsPiling": "1500ms"}
    spec = prometheus_rule_spec("triton", "m", ratio_target=1.0, max_pending=32, for_=for_)
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    result = promtool("check", "rules", "rules.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
