"""ServiceMonitor, PrometheusRule and the Grafana dashboard: current Triton metric names, CRD ordering."""

from __future__ import annotations

import json
import re

from components.common.triton import RATIO_RECORD
from components.models.conversion import ModelConversion, ModelConversionArgs
from components.models.store import ModelStore, ModelStoreArgs
from components.serving.monitoring import STARTUP_READY_RECORD, STARTUP_SCHEDULED_RECORD
from components.serving.service import TritonService, TritonServiceArgs
from tests.components.fixtures import (
    CONVERTER,
    NAMESPACE,
    SERVER_IMAGE,
    T5_SMALL,
    TOOLS_IMAGE,
    make_target,
    secure_ingress,
    serve,
)
from tritonft.synth.engine import RecordingMocks, Registered, run_program

SERVICE_MONITOR = "kubernetes:monitoring.coreos.com/v1:ServiceMonitor"
PROMETHEUS_RULE = "kubernetes:monitoring.coreos.com/v1:PrometheusRule"
CURRENT_METRICS = {
    "nv_inference_request_success",
    "nv_inference_request_failure",
    "nv_inference_queue_duration_us",
    "nv_inference_compute_infer_duration_us",
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
    (service,) = [s for s in mocks.of_type("kubernetes:core/v1:Service") if s.inputs["metadata"]["name"] == "m"]
    assert sm.inputs["spec"]["endpoints"][0]["port"] == "metrics"
    assert sm.inputs["spec"]["selector"]["matchLabels"].items() <= service.inputs["metadata"]["labels"].items()
    assert sm.inputs["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    assert sm.inputs["metadata"]["labels"]["release"] == "kube-prometheus-stack"


def test_the_ratio_is_recorded_per_pod_from_queue_and_compute_time(mocks):
    groups = _rules(mocks).inputs["spec"]["groups"]
    (record,) = [r for g in groups for r in g["rules"] if r.get("record") == RATIO_RECORD]
    expr = record["expr"]
    assert "sum by (namespace, job, pod) (rate(nv_inference_queue_duration_us" in expr
    assert "clamp_min(sum by (namespace, job, pod) (rate(nv_inference_compute_infer_duration_us" in expr
    assert f'namespace="{NAMESPACE}",job="m"' in expr
    assert 'model!="t5-small"' in expr, "the ensemble (its compute time holds its steps' queue time) is left out"


def test_failure_rate_and_queue_alerts_exist(mocks):
    groups = _rules(mocks).inputs["spec"]["groups"]
    alerts = {r["alert"]: r for g in groups for r in g["rules"] if "alert" in r}
    assert set(alerts) == {"TritonInferenceFailures", "TritonQueueSaturated", "TritonRequestsPiling"}
    assert "nv_inference_request_failure" in alerts["TritonInferenceFailures"]["expr"]
    assert "rate(nv_inference_queue_duration_us{" in alerts["TritonRequestsPiling"]["expr"]
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


def test_every_consumer_selects_labels_the_recorded_ratio_keeps(mocks):
    """KEDA, the alerts and the dashboard filter the ratio by namespace and job: the rule must keep both."""
    run_program(
        lambda: serve("m", T5_SMALL, autoscaler="keda", min_replicas=0, ingress=secure_ingress("m.example.com"))
    )
    (rule,) = mocks.of_type(PROMETHEUS_RULE)
    (obj,) = mocks.of_type("kubernetes:keda.sh/v1alpha1:ScaledObject")
    grouping = re.search(r"sum by \(([^)]*)\)", _record_expr(rule))
    assert grouping is not None
    kept = set(grouping.group(1).replace(" ", "").split(","))
    (dashboard,) = [c for c in mocks.of_type("kubernetes:core/v1:ConfigMap") if c.name == "m-dashboard"]
    board = json.loads(next(iter(dashboard.inputs["data"].values())))
    queries = [t["metadata"]["query"] for t in obj.inputs["spec"]["triggers"]]
    queries += [r["expr"] for g in rule.inputs["spec"]["groups"] for r in g["rules"]]
    queries += [t["expr"] for p in board["panels"] for t in p["targets"]]
    consumers = [q for q in queries if RATIO_RECORD in q]
    assert len(consumers) >= 3
    for query in consumers:
        used = set(re.findall(rf"{re.escape(RATIO_RECORD)}{{([^}}]*)}}", query)[0].split(","))
        assert {u.split("=")[0] for u in used} <= kept, query


def _record_expr(rule: Registered) -> str:
    (expr,) = [r["expr"] for g in rule.inputs["spec"]["groups"] for r in g["rules"] if r.get("record") == RATIO_RECORD]
    return str(expr)


def test_the_dashboard_can_go_where_the_grafana_sidecar_looks(mocks):
    def build() -> None:
        target = make_target()
        store = ModelStore("s", ModelStoreArgs(target=target, models=(T5_SMALL,)))
        conversion = ModelConversion(
            "m",
            ModelConversionArgs(
                target=target, store=store, model=T5_SMALL, tools_image=TOOLS_IMAGE, converter_version=CONVERTER
            ),
        )
        TritonService(
            "m",
            TritonServiceArgs(
                target=target, conversion=conversion, store=store, image=SERVER_IMAGE, dashboard_namespace="monitoring"
            ),
        )

    run_program(build)
    (cm,) = [c for c in mocks.of_type("kubernetes:core/v1:ConfigMap") if c.name == "m-dashboard"]
    assert cm.inputs["metadata"]["namespace"] == "monitoring"


def test_the_dashboard_shows_the_start_up_records_of_this_services_pods(mocks):
    rule = _rules(mocks)
    records = {r["record"]: r for g in rule.inputs["spec"]["groups"] for r in g["rules"] if "record" in r}
    (cm,) = [c for c in mocks.of_type("kubernetes:core/v1:ConfigMap") if c.name == "m-dashboard"]
    board = json.loads(next(iter(cm.inputs["data"].values())))
    (panel,) = [p for p in board["panels"] if p["title"].startswith("Pod start-up")]
    exprs = [t["expr"] for t in panel["targets"]]
    for record in (STARTUP_SCHEDULED_RECORD, STARTUP_READY_RECORD):
        assert records[record]["labels"] == {"service": "m"}
        assert 'pod=~"m-[a-z0-9]+-[a-z0-9]+"' in records[record]["expr"], "only Deployment m's pods"
        assert any(e.startswith(record + "{") and 'service="m"' in e for e in exprs), record
    assert panel["fieldConfig"]["defaults"]["unit"] == "s"
