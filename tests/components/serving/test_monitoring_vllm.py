"""The rules and the dashboard of a service serving a vLLM model read vLLM's signals (the metrics NVIDIA's vLLM
backend reports, which the project's backend reports under the same names) instead of Triton's queue."""

from __future__ import annotations

import json
import re
from typing import Any

from components.common.triton import RATIO_RECORD, TTFT_P95_RECORD, WAITING_RECORD
from components.serving import monitoring
from components.serving.monitoring import VLLM_METRICS, rule_spec_for, vllm_dashboard, vllm_prometheus_rule_spec
from tests.components.fixtures import NAMESPACE, T5_SMALL, serve
from tests.tritonft.engines.vllm.test_engine import LLAMA_8B
from tritonft.engines.vllm.contract import METRICS, SCHEDULER_GAUGES
from tritonft.synth.engine import RecordingMocks, run_program

PROMETHEUS_RULE = "kubernetes:monitoring.coreos.com/v1:PrometheusRule"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"


def _rules(spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r.get("record") or r["alert"]: r for g in spec["groups"] for r in g["rules"]}


def _served(mocks: RecordingMocks) -> tuple[dict[str, Any], dict[str, Any]]:
    run_program(lambda: serve("m", LLAMA_8B))
    (rule,) = mocks.of_type(PROMETHEUS_RULE)
    (board,) = [c for c in mocks.of_type(CONFIG_MAP) if c.name == "m-dashboard"]
    (text,) = board.inputs["data"].values()
    return dict(rule.inputs["spec"]), json.loads(text)


def test_a_vllm_service_records_the_queue_signal_and_ttft_and_alerts_on_ttft_and_engine_errors(mocks):
    spec, _ = _served(mocks)
    assert set(_rules(spec)) == {
        WAITING_RECORD,
        TTFT_P95_RECORD,
        monitoring.STARTUP_SCHEDULED_RECORD,
        monitoring.STARTUP_READY_RECORD,
        "TritonInferenceFailures",
        "VllmTimeToFirstTokenHigh",
        "VllmEngineErrors",
        "VllmSchedulerGaugesAbsent",
    }
    assert RATIO_RECORD not in json.dumps(spec), "the queue/compute ratio says nothing of a decoupled vLLM model"


def test_the_ttft_alert_fires_above_the_objective() -> None:
    rules = _rules(vllm_prometheus_rule_spec("triton", "m", 0.75))
    assert rules["VllmTimeToFirstTokenHigh"]["expr"].endswith(" > 0.75")
    assert "vllm:time_to_first_token_seconds_bucket" in rules["VllmTimeToFirstTokenHigh"]["expr"]


def test_alert_for_sets_the_vllm_alerts_durations() -> None:
    rules = _rules(vllm_prometheus_rule_spec("triton", "m", 1.0, for_={"VllmEngineErrors": "3m"}))
    assert rules["VllmEngineErrors"]["for"] == "3m"
    assert rules["VllmTimeToFirstTokenHigh"]["for"] == "10m"


def test_a_fastertransformer_service_keeps_the_ratio_rules() -> None:
    spec = rule_spec_for(T5_SMALL, "triton", "m", ratio_target=1.0, ttft_p95_target_s=1.0, max_pending=32)
    assert RATIO_RECORD in _rules(spec)
    assert "vllm:" not in json.dumps(spec)


def _queried_families(text: str) -> set[str]:
    names = set(re.findall(r"vllm:[a-z0-9_:]+", text))
    return {re.sub(r"_(bucket|count|sum)$", "", name) for name in names}


def test_every_vllm_metric_the_rules_and_dashboard_read_is_one_the_backend_reports(mocks):
    spec, board = _served(mocks)
    read = _queried_families(json.dumps(spec) + json.dumps(board))
    assert read == set(VLLM_METRICS)
    assert read <= {name for name, _ in METRICS + SCHEDULER_GAUGES}


def test_the_vllm_dashboard_shows_ttft_against_the_target_and_vllms_latencies(mocks):
    _, board = _served(mocks)
    by_title = {p["title"]: p for p in board["panels"]}
    ttft = by_title["Time to first token (SLO: p95 per pod)"]
    exprs = [t["expr"] for t in ttft["targets"]]
    assert "vector(1)" in exprs
    assert f'{TTFT_P95_RECORD}{{namespace="{NAMESPACE}",job="m"}}' in exprs
    assert any(
        "vllm:time_per_output_token_seconds_bucket" in t["expr"] for t in by_title["Inter-token latency"]["targets"]
    )
    assert "Queue / compute ratio (autoscaling signal)" not in by_title
    queue = [t["expr"] for t in by_title["Requests in vLLM (autoscaling signal: waiting per pod)"]["targets"]]
    assert queue[0] == f'{WAITING_RECORD}{{namespace="{NAMESPACE}",job="m"}}' and "vector(2)" in queue
    assert len({p["id"] for p in board["panels"]}) == len(board["panels"])


def test_the_vllm_dashboard_keeps_the_start_up_and_gpu_panels() -> None:
    titles = [p["title"] for p in vllm_dashboard("triton", "m", "t", 1.0)["panels"]]
    assert any(t.startswith("Pod start-up") for t in titles)
    assert {"GPU utilization", "GPU memory used", "Replicas serving", "Requests per second"} <= set(titles)
