"""HPA on the queue/compute ratio with a tuned behavior, or KEDA with scale-to-zero."""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pytest

from components.common import sizing
from components.common.triton import RATIO_METRIC, RATIO_RECORD
from tests.components.fixtures import GPTJ_6B, NAMESPACE, T5_SMALL, secure_ingress, serve
from tritonft.errors import UserError
from tritonft.spec import ModelSpec
from tritonft.synth.engine import RecordingMocks, Registered, run_program

HPA = "kubernetes:autoscaling/v2:HorizontalPodAutoscaler"
SCALED_OBJECT = "kubernetes:keda.sh/v1alpha1:ScaledObject"


def _hpa(mocks: RecordingMocks, model: ModelSpec = GPTJ_6B) -> dict[str, Any]:
    run_program(lambda: serve("m", model))
    (hpa,) = mocks.of_type(HPA)
    return dict(hpa.inputs["spec"])


def test_the_hpa_targets_the_deployment_on_the_per_pod_ratio(mocks):
    spec = _hpa(mocks)
    assert spec["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "m"}
    (metric,) = spec["metrics"]
    assert metric["type"] == "Pods"
    assert metric["pods"]["metric"]["name"] == RATIO_METRIC
    assert metric["pods"]["target"] == {"type": "AverageValue", "averageValue": "1000m"}


def test_the_hpa_scales_up_immediately(mocks):
    up = _hpa(mocks)["behavior"]["scaleUp"]
    assert up["stabilizationWindowSeconds"] == 0
    assert up["selectPolicy"] == "Max"


def test_the_hpa_scales_down_one_pod_at_a_time_after_a_cold_start_window(mocks):
    down = _hpa(mocks)["behavior"]["scaleDown"]
    budget = sizing.startup_budget(GPTJ_6B)
    assert down["stabilizationWindowSeconds"] == sizing.scale_down_window_seconds(budget)
    assert down["stabilizationWindowSeconds"] > budget.seconds
    assert down["policies"] == [{"type": "Pods", "value": 1, "periodSeconds": 300}]


def test_a_larger_model_waits_longer_before_scaling_down(mocks):
    small = sizing.scale_down_window_seconds(sizing.startup_budget(T5_SMALL))
    assert _hpa(mocks)["behavior"]["scaleDown"]["stabilizationWindowSeconds"] > small


def test_the_adapter_rule_serves_the_recorded_ratio_under_the_hpa_metric_name(mocks):
    seen: list[str] = []
    run_program(lambda: serve("m", T5_SMALL).adapter_rules.apply(seen.append))
    (rule,) = json.loads(seen[0])["custom"]
    assert rule["seriesQuery"].startswith(RATIO_RECORD)
    assert rule["name"] == {"matches": f"^{RATIO_RECORD}$", "as": RATIO_METRIC}


def _scaled_object(mocks: RecordingMocks, ingress: bool = True, gateway_job: str | None = None) -> Registered:
    run_program(
        lambda: serve(
            "m",
            GPTJ_6B,
            autoscaler="keda",
            min_replicas=0,
            ingress=secure_ingress("m.example.com") if ingress else None,
            gateway_job=gateway_job,
        )
    )
    (obj,) = mocks.of_type(SCALED_OBJECT)
    return obj


def test_keda_replaces_the_hpa_and_can_scale_to_zero(mocks):
    obj = _scaled_object(mocks)
    assert mocks.of_type(HPA) == []
    assert obj.inputs["spec"]["minReplicaCount"] == 0
    assert (
        obj.inputs["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleUp"][
            "stabilizationWindowSeconds"
        ]
        == 0
    )


def test_keda_wakes_from_zero_on_ingress_requests(mocks):
    triggers = _scaled_object(mocks).inputs["spec"]["triggers"]
    (wake,) = [t for t in triggers if "activationThreshold" in t["metadata"]]
    assert "nginx_ingress_controller_requests" in wake["metadata"]["query"]
    assert f'exported_namespace="{NAMESPACE}"' in wake["metadata"]["query"]
    assert wake["metadata"]["activationThreshold"] == "0"


def test_keda_wakes_from_zero_on_the_gateways_requests_for_the_model_too(mocks):
    triggers = _scaled_object(mocks, gateway_job="prod-gateway").inputs["spec"]["triggers"]
    (wake,) = [t for t in triggers if "activationThreshold" in t["metadata"]]
    query = wake["metadata"]["query"]
    assert "nginx_ingress_controller_requests" in query
    assert (
        f'tritonft_gateway_model_requests_total{{namespace="{NAMESPACE}",job="prod-gateway",model="{GPTJ_6B.name}"}}'
        in (query)
    )
    # What the query computes is specified on real series in test_demand_query.py (promtool).
    assert query.startswith("(sum(rate(nginx_ingress_controller_requests{") and query.endswith(
        f'model="{GPTJ_6B.name}"}}[120s])) or vector(0))'
    )


def test_scale_to_zero_behind_the_gateway_alone_needs_no_ingress(mocks):
    triggers = _scaled_object(mocks, ingress=False, gateway_job="prod-gateway").inputs["spec"]["triggers"]
    (wake,) = [t for t in triggers if "activationThreshold" in t["metadata"]]
    assert wake["metadata"]["query"].startswith("(sum(rate(tritonft_gateway_model_requests_total{")
    assert "nginx" not in wake["metadata"]["query"]


def test_scale_to_zero_with_no_way_in_is_refused_naming_both(mocks):
    with pytest.raises(UserError, match="scale to zero needs an ingress or the gateway"):
        _scaled_object(mocks, ingress=False)


def test_keda_scales_a_running_service_on_the_ratio(mocks):
    triggers = _scaled_object(mocks).inputs["spec"]["triggers"]
    (ratio,) = [t for t in triggers if RATIO_RECORD in t["metadata"]["query"]]
    assert ratio["metricType"] == "Value" and ratio["metadata"]["threshold"] == "1"


def test_the_scaled_object_is_created_after_the_crd_installers(mocks):
    obj = _scaled_object(mocks)
    (chart,) = mocks.of_type("kubernetes:helm.sh/v4:Chart")
    assert chart.urn in obj.depends_on


def test_no_autoscaler_means_no_hpa_and_no_scaled_object(mocks):
    run_program(lambda: serve("m", T5_SMALL, autoscaler="none", monitoring=False))
    assert mocks.of_type(HPA) == [] and mocks.of_type(SCALED_OBJECT) == []


def test_the_startup_budget_is_exported(mocks):
    seen: list[int] = []
    run_program(lambda: pulumi.Output.from_input(serve("m", GPTJ_6B).startup_budget_seconds).apply(seen.append))
    assert seen == [sizing.startup_budget(GPTJ_6B).seconds]
