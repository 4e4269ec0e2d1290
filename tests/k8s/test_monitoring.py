"""ServiceMonitor, PrometheusRule and the Grafana dashboard: current Triton metric names, CRD ordering."""

from __future__ import annotations

import json

from components.autoscaling import RATIO_RECORD
from tests.k8s.fixtures import NAMESPACE, T5_SMALL, serve
from tritonft.synth.engine import RecordingMocks, Registered, run_program

SERVICE_MONITOR = "kubernetes:monitoring.coreos.com/v1:ServiceMonitor"
PROMETHEUS_RULE = "kubernetes:monitoring.coreos.com/v1:PrometheusRule"
CURRENT_METRICS = {
    "nv_inference_request_success",
    "nv_inference_request_failure",
    "nv_inference_queue_duration_us",
    "nv_inference_compute_infer_duration_us",
    "nv_inference_pending_request_count",
    "nv_gpu_utilization",
    "nv_gpu_memory_used_bytes",
}
STALE_METRICS = ("nv_inference_load_ratio", "nv_inference_compute_duration_us")


def _rules(mocks: RecordingMocks) -> Registered:
    run_program(lambda: serve("m", T5_SMALL))
    (rule,) = mocks.of_type(PROMETHEUS_RULE)
    return rule


def test_custom_resources_come_after_the_crd_installers(mocks):
    run_program(lambda: serve("m", T5_SMALL))
    (chart,) = mocks.of_type("kubernetes:helm.sh/v4:Chart")
    for typ in (SERVICE_MONITOR, PROMETHEUS_RULE):
        (cr,) = mocks.of_type(typ)
        assert chart.urn in cr.depends_on, typ


def test_no_custom_resources_when_monitoring_is_off(mocks):
    run_program(lambda: serve("m", T5_SMALL, autoscaler="none", monitoring=False))
    assert mocks.of_type(SERVICE_MONITOR) == [] and mocks.of_type(PROMETHEUS_RULE) == []
    assert not [c for c in mocks.of_type("kubernetes:core/v1:ConfigMap") if c.name.endswith("dashboard")]


def test_the_service_monitor_scrapes_the_metrics_port_of_this_service(mocks):
    run_program(lambda: serve("m", T5_SMALL))
    (sm,) = mocks.of_type(SERVICE_MONITOR)
    (service,) = mocks.of_type("kubernetes:core/v1:Service")
    assert sm.inputs["spec"]["endpoints"][0]["port"] == "metrics"
    assert sm.inputs["spec"]["selector"]["matchLabels"].items() <= service.inputs["metadata"]["labels"].items()
    assert sm.inputs["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    assert sm.inputs["metadata"]["labels"]["release"] == "kube-prometheus-stack"


def test_the_ratio_is_recorded_per_pod_from_queue_and_compute_time(mocks):
    groups = _rules(mocks).inputs["spec"]["groups"]
    (record,) = [r for g in groups for r in g["rules"] if r.get("record") == RATIO_RECORD]
    expr = record["expr"]
    assert "sum by (namespace, pod) (rate(nv_inference_queue_duration_us" in expr
    assert "clamp_min(sum by (namespace, pod) (rate(nv_inference_compute_infer_duration_us" in expr
    assert f'namespace="{NAMESPACE}",job="m"' in expr


def test_failure_rate_and_queue_alerts_exist(mocks):
    groups = _rules(mocks).inputs["spec"]["groups"]
    alerts = {r["alert"]: r for g in groups for r in g["rules"] if "alert" in r}
    assert set(alerts) == {"TritonInferenceFailures", "TritonQueueSaturated", "TritonRequestsPiling"}
    assert "nv_inference_request_failure" in alerts["TritonInferenceFailures"]["expr"]
    assert "nv_inference_pending_request_count" in alerts["TritonRequestsPiling"]["expr"]
    assert all(a["for"] and a["labels"]["severity"] for a in alerts.values())


def test_the_dashboard_uses_the_current_triton_metric_names(mocks):
    run_program(lambda: serve("m", T5_SMALL))
    (cm,) = [c for c in mocks.of_type("kubernetes:core/v1:ConfigMap") if c.name == "m-dashboard"]
    assert cm.inputs["metadata"]["labels"]["grafana_dashboard"] == "1"
    (text,) = cm.inputs["data"].values()
    board = json.loads(text)
    exprs = " ".join(t["expr"] for p in board["panels"] for t in p["targets"])
    for metric in CURRENT_METRICS:
        assert metric in exprs, metric
    for stale in STALE_METRICS:
        assert stale not in exprs
    assert len({p["id"] for p in board["panels"]}) == len(board["panels"])
