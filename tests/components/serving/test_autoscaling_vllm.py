"""A vLLM model's service scales on the requests waiting inside each pod's vLLM (``vllm:num_requests_waiting``), not on
Triton's queue/compute ratio (a decoupled vLLM model's requests wait inside vLLM: Triton's queue stays empty) nor on
time to first token (the SLO's alert: it lags the queue)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from components.common.triton import RATIO_METRIC, RATIO_RECORD, TTFT_P95_RECORD, WAITING_METRIC, WAITING_RECORD
from components.platform.aws.charts import prometheus_adapter_values
from components.serving.autoscaling import (
    DEFAULT_WAITING_TARGET,
    scaling_signal,
    signal_hpa_spec,
    waiting_signal,
)
from tests.components.fixtures import GPTJ_6B, NAMESPACE, serve
from tests.tritonft.engines.vllm.test_engine import LLAMA_8B
from tritonft.synth.engine import RecordingMocks, run_program

HPA = "kubernetes:autoscaling/v2:HorizontalPodAutoscaler"
SCALED_OBJECT = "kubernetes:keda.sh/v1alpha1:ScaledObject"


def _hpa_metric(mocks: RecordingMocks) -> dict[str, Any]:
    run_program(lambda: serve("m", LLAMA_8B))
    (hpa,) = mocks.of_type(HPA)
    (metric,) = hpa.inputs["spec"]["metrics"]
    return dict(metric)


def test_a_vllm_models_hpa_scales_on_its_pods_waiting_requests_against_the_default_target(mocks):
    metric = _hpa_metric(mocks)
    assert metric["type"] == "Pods"
    assert metric["pods"]["metric"]["name"] == WAITING_METRIC
    assert metric["pods"]["target"] == {"type": "AverageValue", "averageValue": f"{DEFAULT_WAITING_TARGET * 1000:g}m"}


def test_the_waiting_target_is_the_hpas_average_value() -> None:
    signal = scaling_signal(LLAMA_8B, ratio_target=2.0, waiting_target=4)
    (metric,) = signal_hpa_spec(signal, "m", 1, 4, 600)["metrics"]
    assert metric["pods"]["target"]["averageValue"] == "4000m"


def test_a_fastertransformer_model_keeps_the_queue_compute_ratio() -> None:
    signal = scaling_signal(GPTJ_6B, ratio_target=2.0, waiting_target=4)
    assert (signal.record, signal.metric, signal.target) == (RATIO_RECORD, RATIO_METRIC, 2.0)


@pytest.mark.parametrize("target", [0.0, -1.0])
def test_a_waiting_target_that_is_not_positive_is_refused_naming_it(target: float) -> None:
    with pytest.raises(ValueError, match=r"waiting_target must be positive"):
        waiting_signal(target)


def test_keda_scales_a_vllm_model_on_the_waiting_record_and_still_wakes_on_the_gateways_requests(mocks):
    run_program(lambda: serve("m", LLAMA_8B, autoscaler="keda", min_replicas=0, gateway_job="prod-gateway"))
    (obj,) = mocks.of_type(SCALED_OBJECT)
    scale, wake = obj.inputs["spec"]["triggers"]
    assert scale["metricType"] == "Value"
    assert scale["metadata"]["query"] == f'avg({WAITING_RECORD}{{namespace="{NAMESPACE}",job="m"}})'
    assert scale["metadata"]["threshold"] == f"{DEFAULT_WAITING_TARGET:g}"
    assert RATIO_RECORD not in json.dumps(obj.inputs["spec"])
    assert TTFT_P95_RECORD not in json.dumps(obj.inputs["spec"])
    assert wake["metadata"]["activationThreshold"] == "0"
    assert "tritonft_gateway_model_requests_total" in wake["metadata"]["query"]


def test_the_services_adapter_rule_serves_the_waiting_record_under_the_hpa_metric_name(mocks):
    seen: list[str] = []
    run_program(lambda: serve("m", LLAMA_8B).adapter_rules.apply(seen.append))
    (rule,) = json.loads(seen[0])["custom"]
    assert rule["seriesQuery"].startswith(WAITING_RECORD)
    assert rule["name"] == {"matches": f"^{WAITING_RECORD}$", "as": WAITING_METRIC}


def test_the_platforms_prometheus_adapter_serves_both_signals() -> None:
    served = {rule["name"]["as"] for rule in prometheus_adapter_values()["rules"]["custom"]}
    assert {RATIO_METRIC, WAITING_METRIC} <= served
