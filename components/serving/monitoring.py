"""Prometheus scrape config, recording/alerting rules and a Grafana dashboard for one Triton service (pure).

Metric names are the ones the deployed server exports: tritonserver 2.33.0 (NGC Triton 23.04, the FasterTransformer
image's), checked against its real ``/metrics`` (tests/system/realtriton/test_prometheus_signal.py):
``nv_inference_request_success``/``_failure``, ``nv_inference_queue_duration_us``,
``nv_inference_compute_infer_duration_us``, ``nv_gpu_utilization``, ``nv_gpu_memory_used_bytes``/``_total_bytes``.
2.33.0 has no ``nv_inference_pending_request_count`` (it came later): the number of queued requests is derived from
the queue-time counter instead (:func:`queued_requests_expr`, Little's law). The dashboards shipped in Triton's
``deploy/{aws,gcp,oci}`` charts still query removed names (``nv_inference_load_ratio_bucket``), deploy-anchors.md
§1.2.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from components.common.triton import RATIO_RECORD, TTFT_P95_RECORD, WAITING_RECORD
from components.common.workload import SCRAPE_INTERVAL
from components.settings.alerting import alert_for, with_runbooks
from tritonft.spec import ModelSpec

RATIO_LABELS = "namespace, job, pod"
"""Labels the recorded ratio keeps."""


def series_selector(namespace: str, job: str) -> str:
    """PromQL label matcher for this service's series (the ServiceMonitor's ``job`` is the Service name)."""
    return f'namespace="{namespace}",job="{job}"'


def service_monitor_spec(namespace: str, service_labels: dict[str, str]) -> dict[str, Any]:
    """Scrape the Service's ``metrics`` port (8002) every 15 s (the anchors' interval)."""
    return {
        "selector": {"matchLabels": dict(service_labels)},
        "namespaceSelector": {"matchNames": [namespace]},
        "endpoints": [{"port": "metrics", "path": "/metrics", "interval": SCRAPE_INTERVAL}],
    }


def ratio_expr(namespace: str, job: str, ensembles: tuple[str, ...] = ()) -> str:
    """Per-pod queue time per unit of compute time, summed over the pod's models except ``ensembles``.

    Keeps ``namespace`` and ``pod`` (the HPA's Pods metric) and ``job`` (the service: KEDA, alerts, dashboard).
    An ensemble's compute time is its steps' end-to-end time, their queue time included (measured on the real
    Triton, tests/system/realtriton/test_prometheus_signal.py): counted, it caps the ratio below 1 however long the
    queue.
    """
    sel = series_selector(namespace, job) + "".join(f',model!="{name}"' for name in ensembles)
    return (
        f"sum by ({RATIO_LABELS}) (rate(nv_inference_queue_duration_us{{{sel}}}[1m]))\n"
        f"/ clamp_min(sum by ({RATIO_LABELS}) (rate(nv_inference_compute_infer_duration_us{{{sel}}}[1m])), 1)"
    )


def queued_requests_expr(namespace: str, job: str, by: str = "namespace, pod, model") -> str:
    """The mean number of requests waiting in the queue over the last minute, per ``by``.

    Little's law: the queue time all requests spent per second of wall-clock time is the mean queue length, so
    ``rate(nv_inference_queue_duration_us[1m]) / 1e6`` is the pending-request gauge that tritonserver 2.33.0 does not
    export (``nv_inference_pending_request_count`` came after it), averaged over the minute instead of sampled.
    """
    sel = series_selector(namespace, job)
    return f"sum by ({by}) (rate(nv_inference_queue_duration_us{{{sel}}}[1m])) / 1e6"


def failure_ratio_expr(namespace: str, job: str) -> str:
    """Failed requests / all requests, per model, over 5 minutes."""
    sel = series_selector(namespace, job)
    failed = f"sum by (namespace, model) (rate(nv_inference_request_failure{{{sel}}}[5m]))"
    ok = f"sum by (namespace, model) (rate(nv_inference_request_success{{{sel}}}[5m]))"
    return f"{failed}\n/ clamp_min({failed} + {ok}, 1e-9)"


STARTUP_SCHEDULED_RECORD = "triton_ft:pod_startup_scheduled:seconds"
STARTUP_READY_RECORD = "triton_ft:pod_startup_ready:seconds"
"""Each Triton pod's start-up budget as Prometheus sees it (kube-state-metrics, which kube-prometheus-stack runs):
pod created → scheduled, and → Ready; the stages in between are ``tritonft startup-budget``'s."""


def pod_selector(namespace: str, job: str) -> str:
    """The Deployment ``job``'s pods in kube-state-metrics' series (``<deployment>-<replicaset hash>-<suffix>``: a
    Deployment whose name only starts with ``job`` is not matched)."""
    return f'namespace="{namespace}",pod=~"{job}-[a-z0-9]+-[a-z0-9]+"'


def startup_rules(namespace: str, job: str) -> list[dict[str, Any]]:
    """Per pod, seconds from creation to scheduled and to Ready, labelled ``service=job``."""
    sel = pod_selector(namespace, job)
    created = f"max by (namespace, pod) (kube_pod_created{{{sel}}})"
    return [
        {
            "record": record,
            "expr": f"max by (namespace, pod) ({metric}{{{sel}}})\n- {created}",
            "labels": {"service": job},
        }
        for record, metric in (
            (STARTUP_SCHEDULED_RECORD, "kube_pod_status_scheduled_time"),
            (STARTUP_READY_RECORD, "kube_pod_status_ready_time"),
        )
    ]


def prometheus_rule_spec(
    namespace: str,
    job: str,
    ratio_target: float,
    max_pending: int,
    *,
    failure_ratio: float = 0.05,
    ensembles: tuple[str, ...] = (),
    for_: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The ratio recording rule (the autoscaler's input, ``ensembles`` left out of it), the pods' start-up records
    (:func:`startup_rules`) and three alerts.

    * ``TritonInferenceFailures``: more than ``failure_ratio`` of requests fail (5-minute rate), for 10 min;
    * ``TritonQueueSaturated``: the ratio stays above 3 x the autoscaling target for 15 min (the autoscaler cannot
      keep up: max replicas reached or no GPU node available);
    * ``TritonRequestsPiling``: a pod holds more than ``max_pending`` queued requests (mean over a minute,
      :func:`queued_requests_expr`) for 5 min.

    ``for_`` overrides those durations per alert name (:func:`alert_for`).
    """
    sel = series_selector(namespace, job)
    durations = alert_for(for_)
    labels = {"severity": "warning", "service": job}
    spec: dict[str, Any] = {
        "groups": [
            {
                "name": f"{job}.triton-ft.rules",
                "interval": "15s",
                "rules": [{"record": RATIO_RECORD, "expr": ratio_expr(namespace, job, ensembles)}],
            },
            {"name": f"{job}.triton-ft.startup", "interval": "30s", "rules": startup_rules(namespace, job)},
            {
                "name": f"{job}.triton-ft.alerts",
                "rules": [
                    {
                        "alert": "TritonInferenceFailures",
                        "expr": f"({failure_ratio_expr(namespace, job)}) > {failure_ratio:g}",
                        "for": durations["TritonInferenceFailures"],
                        "labels": {**labels, "severity": "critical"},
                        "annotations": {
                            "summary": "Triton model {{ $labels.model }} fails {{ $value | humanizePercentage }} "
                            "of requests",
                            "description": f"More than {failure_ratio:.0%} of inference requests to service {job} "
                            f"failed (5-minute rate) for {durations['TritonInferenceFailures']}.",
                        },
                    },
                    {
                        "alert": "TritonQueueSaturated",
                        "expr": f"avg by (namespace, job) ({RATIO_RECORD}{{{sel}}}) > {3 * ratio_target:g}",
                        "for": durations["TritonQueueSaturated"],
                        "labels": labels,
                        "annotations": {
                            "summary": f'Requests to {job} wait {{{{ $value | printf "%.1f" }}}}x their compute time',
                            "description": "The queue/compute ratio stayed above 3x the autoscaling target for "
                            f"{durations['TritonQueueSaturated']}: the autoscaler is at its maximum or no GPU node is "
                            "available.",
                        },
                    },
                    {
                        "alert": "TritonRequestsPiling",
                        "expr": f"{queued_requests_expr(namespace, job)} > {max_pending}",
                        "for": durations["TritonRequestsPiling"],
                        "labels": labels,
                        "annotations": {
                            "summary": '{{ $labels.pod }} holds {{ $value | printf "%.0f" }} pending requests for '
                            "{{ $labels.model }}",
                            "description": f"More than {max_pending} requests queued in one pod for "
                            f"{durations['TritonRequestsPiling']}.",
                        },
                    },
                ],
            },
        ]
    }
    return with_runbooks(spec)


def _panel(*, panel_id: int, title: str, unit: str, targets: list[tuple[str, str]], x: int, y: int) -> dict[str, Any]:
    return {
        "id": panel_id,
        "type": "timeseries",
        "title": title,
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "gridPos": {"h": 8, "w": 12, "x": x, "y": y},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "targets": [
            {"refId": chr(ord("A") + i), "expr": expr, "legendFormat": legend}
            for i, (expr, legend) in enumerate(targets)
        ],
    }


def dashboard(namespace: str, job: str, title: str) -> dict[str, Any]:
    """A Grafana dashboard for one service: traffic, failures, latency split, autoscaling signal, GPUs."""
    sel = series_selector(namespace, job)
    panels_spec: list[tuple[str, str, list[tuple[str, str]]]] = [
        (
            "Requests per second",
            "reqps",
            [
                (f"sum by (model) (rate(nv_inference_request_success{{{sel}}}[1m]))", "{{model}} ok"),
                (f"sum by (model) (rate(nv_inference_request_failure{{{sel}}}[1m]))", "{{model}} failed"),
            ],
        ),
        (
            "Queue / compute ratio (autoscaling signal)",
            "none",
            [(f"{RATIO_RECORD}{{{sel}}}", "{{pod}}")],
        ),
        (
            "Average queue time per request",
            "µs",
            [
                (
                    f"sum by (model) (rate(nv_inference_queue_duration_us{{{sel}}}[1m]))\n/ clamp_min(sum by (model) "
                    f"(rate(nv_inference_request_success{{{sel}}}[1m])), 1e-9)",
                    "{{model}}",
                )
            ],
        ),
        (
            "Average compute time per request",
            "µs",
            [
                (
                    f"sum by (model) (rate(nv_inference_compute_infer_duration_us{{{sel}}}[1m]))\n/ clamp_min(sum by "
                    f"(model) (rate(nv_inference_request_success{{{sel}}}[1m])), 1e-9)",
                    "{{model}}",
                )
            ],
        ),
        (
            "Pending requests",
            "none",
            [(queued_requests_expr(namespace, job, by="pod"), "{{pod}}")],
        ),
        (
            "Replicas serving",
            "none",
            [(f"count(count by (pod) (nv_inference_request_success{{{sel}}}))", "pods")],
        ),
        (
            "Pod start-up: created → scheduled, → Ready (tritonft startup-budget: every stage)",
            "s",
            [
                (f'{STARTUP_SCHEDULED_RECORD}{{namespace="{namespace}",service="{job}"}}', "{{pod}} scheduled"),
                (f'{STARTUP_READY_RECORD}{{namespace="{namespace}",service="{job}"}}', "{{pod}} ready"),
            ],
        ),
        (
            "GPU utilization",
            "percentunit",
            [(f"nv_gpu_utilization{{{sel}}}", "{{pod}} {{gpu_uuid}}")],
        ),
        (
            "GPU memory used",
            "bytes",
            [
                (f"nv_gpu_memory_used_bytes{{{sel}}}", "{{pod}} {{gpu_uuid}} used"),
                (f"nv_gpu_memory_total_bytes{{{sel}}}", "{{pod}} {{gpu_uuid}} total"),
            ],
        ),
    ]
    panels = [
        _panel(panel_id=i + 1, title=name, unit=unit, targets=targets, x=12 * (i % 2), y=8 * (i // 2))
        for i, (name, unit, targets) in enumerate(panels_spec)
    ]
    return {
        "uid": f"triton-ft-{job}"[:40],
        "title": title,
        "tags": ["triton-ft", "triton"],
        "timezone": "browser",
        "schemaVersion": 39,
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "templating": {
            "list": [
                {
                    "name": "datasource",
                    "type": "datasource",
                    "query": "prometheus",
                    "label": "Data source",
                }
            ]
        },
        "panels": panels,
    }


def dashboard_json(namespace: str, job: str, title: str) -> str:
    """:func:`dashboard` as the JSON text a Grafana sidecar loads from a ConfigMap."""
    return json.dumps(dashboard(namespace, job, title), indent=1, sort_keys=True, ensure_ascii=False)


# --- vLLM models (``family.is_vllm``): the signals vLLM reports through Triton --------------------------------------
#
# Triton's vLLM backend is decoupled: ``execute`` hands each request to vLLM's engine and returns, so Triton's queue
# and compute times, its pending count (always 0) and its success counter say nothing about a request's fate; a
# request vLLM refuses or fails is still a Triton "success" (measured on the real Triton 2.51 with the project's
# backend). The signals are the ones NVIDIA's backend reports with ``REPORT_CUSTOM_METRICS`` (``vllm_backend``
# ``src/utils/metrics.py`` at ``tritonft.engines.vllm.contract.VLLM_BACKEND_COMMIT``, lines 41-82: counters
# ``vllm:prompt_tokens_total``/``vllm:generation_tokens_total`` and the histograms below; no running/waiting gauges at
# that version), labelled ``model`` and ``version``, scraped with the ServiceMonitor's ``namespace``/``job``/``pod``.

VLLM_TTFT = "vllm:time_to_first_token_seconds"
VLLM_ITL = "vllm:time_per_output_token_seconds"
VLLM_E2E = "vllm:e2e_request_latency_seconds"
VLLM_PROMPT_TOKENS = "vllm:prompt_tokens_total"
VLLM_GENERATION_TOKENS = "vllm:generation_tokens_total"
VLLM_WAITING = "vllm:num_requests_waiting"
"""vLLM's scheduler gauge of the requests it queues (added to NVIDIA's backend by the server image:
``images/triton-vllm/scheduler_gauges.py``; ``vllm:num_requests_running`` and ``vllm:kv_cache_usage_perc`` beside
it)."""
VLLM_RUNNING = "vllm:num_requests_running"
VLLM_KV_USAGE = "vllm:kv_cache_usage_perc"
VLLM_METRICS = (
    VLLM_TTFT,
    VLLM_ITL,
    VLLM_E2E,
    VLLM_PROMPT_TOKENS,
    VLLM_GENERATION_TOKENS,
    VLLM_WAITING,
    VLLM_RUNNING,
    VLLM_KV_USAGE,
)
"""Every vLLM family the rules, the autoscaler and the dashboard read."""
VLLM_ALERT_WINDOW = "5m"


def vllm_quantile_expr(
    histogram: str, quantile: float, namespace: str, job: str, *, by: str, window: str = "1m"
) -> str:
    """The ``quantile`` of one of vLLM's histograms over ``window``, per ``by`` (NaN while nothing was observed)."""
    sel = series_selector(namespace, job)
    return f"histogram_quantile({quantile:g}, sum by ({by}, le) (rate({histogram}_bucket{{{sel}}}[{window}])))"


def ttft_p95_expr(namespace: str, job: str) -> str:
    """Each pod's time-to-first-token p95 over the last minute, the autoscaling signal of a vLLM model; 0 for a pod
    that answered nothing in that minute (no latency pressure: the HPA averages it in and scales down), where
    ``histogram_quantile`` alone gives NaN (filtered by ``>= 0``)."""
    sel = series_selector(namespace, job)
    p95 = vllm_quantile_expr(VLLM_TTFT, 0.95, namespace, job, by=RATIO_LABELS)
    idle = f"sum by ({RATIO_LABELS}) (rate({VLLM_TTFT}_count{{{sel}}}[1m])) * 0"
    return f"({p95} >= 0)\nor {idle}"


def waiting_expr(namespace: str, job: str) -> str:
    """Each pod's requests waiting inside vLLM (the gauge as last scraped), the autoscaling signal of a vLLM
    model."""
    sel = series_selector(namespace, job)
    return f"sum by ({RATIO_LABELS}) ({VLLM_WAITING}{{{sel}}})"


def unanswered_ratio_expr(namespace: str, job: str, window: str = VLLM_ALERT_WINDOW) -> str:
    """Per model, the share of the requests Triton handed the vLLM model that the engine never finished: vLLM
    refused or failed them (``Error generating stream``) or the client cancelled them.

    Triton counts every request it hands the decoupled model as a success (``nv_inference_request_success``); vLLM
    counts each request it finishes once (``vllm:e2e_request_latency_seconds_count``). Idle, 0/0 is NaN: no alert.
    A request still running at the window's end counts as unanswered until it finishes (load ramping up within the
    window reads a little high: the alert's ``for:`` outlasts a ramp).
    """
    sel = series_selector(namespace, job)
    by = "namespace, job, model"
    handed = f"sum by ({by}) (rate(nv_inference_request_success{{{sel}}}[{window}]))"
    finished = f"sum by ({by}) (rate({VLLM_E2E}_count{{{sel}}}[{window}]))"
    return f"({handed} - {finished})\n/ {handed}"


def gauges_absent_expr(namespace: str, job: str) -> str:
    """Each pod and model of ``job`` whose vLLM token counter Triton reports without both scheduler gauges (the
    server image's, ``images/triton-vllm/scheduler_gauges.py``): 1 per such pod and model, nothing otherwise."""
    sel = f'namespace="{namespace}",job="{job}"'
    by = "namespace, job, pod, model"
    gauges = " and ".join(
        f"count by ({by}) ({name}{{{sel}}})" for name in ("vllm:num_requests_running", "vllm:num_requests_waiting")
    )
    return f"count by ({by}) (vllm:generation_tokens_total{{{sel}}}) unless ({gauges})"


def vllm_prometheus_rule_spec(
    namespace: str,
    job: str,
    ttft_p95_target_s: float,
    *,
    failure_ratio: float = 0.05,
    for_: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The rules of a service serving a vLLM model: its autoscaling signal (:data:`WAITING_RECORD`, per pod), each
    pod's time-to-first-token p95 (:data:`TTFT_P95_RECORD`, the dashboard's), the pods' start-up records and three
    alerts.

    * ``TritonInferenceFailures``: requests Triton itself refuses (as for every model);
    * ``VllmTimeToFirstTokenHigh``: the service's time-to-first-token p95 (5-minute window, all pods) stays above
      ``ttft_p95_target_s``, the SLO, for 10 min (max replicas reached, no GPU node available, or a queue target
      too loose for the SLO);
    * ``VllmEngineErrors``: more than ``failure_ratio`` of the requests handed to vLLM end unanswered
      (:func:`unanswered_ratio_expr`) for 10 min;
    * ``VllmSchedulerGaugesAbsent``: a pod reports vLLM's token counters but not the scheduler gauges its server
      image adds (:func:`gauges_absent_expr`) for 15 min: its autoscaling signal is missing, its drain waits the
      longest request, and its probes judge on the counters alone, so a dead engine is found later
      (``tritonft.engines.vllm.health``).

    No queue/compute ratio and no pending-request alert: the decoupled model's Triton queue is always empty.
    """
    if ttft_p95_target_s <= 0:
        raise ValueError(f"ttft_p95_target_s must be positive (got {ttft_p95_target_s})")
    durations = alert_for(for_)
    common = prometheus_rule_spec(namespace, job, 1.0, 0, failure_ratio=failure_ratio, for_=for_)
    startup = next(g for g in common["groups"] if g["name"].endswith(".startup"))
    failures = next(r for g in common["groups"] for r in g["rules"] if r.get("alert") == "TritonInferenceFailures")
    labels = {"severity": "warning", "service": job}
    service_p95 = vllm_quantile_expr(VLLM_TTFT, 0.95, namespace, job, by="namespace, job", window=VLLM_ALERT_WINDOW)
    spec: dict[str, Any] = {
        "groups": [
            {
                "name": f"{job}.triton-ft.rules",
                "interval": "15s",
                "rules": [
                    {"record": WAITING_RECORD, "expr": waiting_expr(namespace, job)},
                    {"record": TTFT_P95_RECORD, "expr": ttft_p95_expr(namespace, job)},
                ],
            },
            startup,
            {
                "name": f"{job}.triton-ft.alerts",
                "rules": [
                    failures,
                    {
                        "alert": "VllmTimeToFirstTokenHigh",
                        "expr": f"{service_p95} > {ttft_p95_target_s:g}",
                        "for": durations["VllmTimeToFirstTokenHigh"],
                        "labels": labels,
                        "annotations": {
                            "summary": f"{job}: time to first token p95 is "
                            f'{{{{ $value | printf "%.2f" }}}} s (target {ttft_p95_target_s:g} s)',
                            "description": f"The time-to-first-token p95 of service {job} (5-minute window) stayed "
                            f"above the objective of {ttft_p95_target_s:g} s for "
                            f"{durations['VllmTimeToFirstTokenHigh']}: the autoscaler is at its maximum, no GPU "
                            "node is available, or its queue target (autoscaleTargetWaitingRequests) is too loose "
                            "for the objective.",
                        },
                    },
                    {
                        "alert": "VllmSchedulerGaugesAbsent",
                        "expr": gauges_absent_expr(namespace, job),
                        "for": durations["VllmSchedulerGaugesAbsent"],
                        "labels": labels,
                        "annotations": {
                            "summary": "{{ $labels.pod }} reports no vLLM scheduler gauges for {{ $labels.model }}",
                            "description": f"A pod of service {job} reports vLLM's token counters but not "
                            "vllm:num_requests_running / vllm:num_requests_waiting (the server image's patch, "
                            "images/triton-vllm/scheduler_gauges.py, did not apply or fails) for "
                            f"{durations['VllmSchedulerGaugesAbsent']}: the service cannot autoscale on its queue, "
                            "its pods drain for their longest request, and their probes cannot tell an idle engine "
                            "from a busy one (a dead engine is restarted only once its token counters stood still "
                            "for the first-token deadline).",
                        },
                    },
                    {
                        "alert": "VllmEngineErrors",
                        "expr": f"({unanswered_ratio_expr(namespace, job)}) > {failure_ratio:g}",
                        "for": durations["VllmEngineErrors"],
                        "labels": {**labels, "severity": "critical"},
                        "annotations": {
                            "summary": "vLLM model {{ $labels.model }} leaves {{ $value | humanizePercentage }} "
                            "of requests unanswered",
                            "description": f"More than {failure_ratio:.0%} of the requests Triton handed the vLLM "
                            f"engine of service {job} ended without an answer (refused or failed by vLLM: "
                            "`Error generating stream` in the responses and the server log; or cancelled) for "
                            f"{durations['VllmEngineErrors']}.",
                        },
                    },
                ],
            },
        ]
    }
    return with_runbooks(spec)


def vllm_dashboard(
    namespace: str, job: str, title: str, ttft_p95_target_s: float, waiting_target: float = 2.0
) -> dict[str, Any]:
    """:func:`dashboard` for a vLLM model: Triton's request counts, start-up, replicas and GPUs, with vLLM's
    latencies (time to first token against the target, inter-token, end-to-end), tokens/s, requests inside the
    engine and unanswered requests instead of the queue/compute panels."""
    board = dashboard(namespace, job, title)
    kept = {p["title"]: p for p in board["panels"]}
    sel = series_selector(namespace, job)

    def quantiles(histogram: str) -> list[tuple[str, str]]:
        return [
            (vllm_quantile_expr(histogram, q, namespace, job, by="model"), f"{{{{model}}}} p{round(q * 100)}")
            for q in (0.5, 0.95)
        ]

    new: list[tuple[str, str, list[tuple[str, str]]]] = [
        (
            "Time to first token (SLO: p95 per pod)",
            "s",
            [
                *quantiles(VLLM_TTFT),
                (f"{TTFT_P95_RECORD}{{{sel}}}", "{{pod}} p95"),
                (f"vector({ttft_p95_target_s:g})", "target"),
            ],
        ),
        ("Inter-token latency", "s", quantiles(VLLM_ITL)),
        ("End-to-end request latency", "s", quantiles(VLLM_E2E)),
        (
            "Tokens per second",
            "short",
            [
                (f"sum by (pod) (rate({VLLM_PROMPT_TOKENS}{{{sel}}}[1m]))", "{{pod}} prompt"),
                (f"sum by (pod) (rate({VLLM_GENERATION_TOKENS}{{{sel}}}[1m]))", "{{pod}} generated"),
            ],
        ),
        (
            "Requests in vLLM (autoscaling signal: waiting per pod)",
            "none",
            [
                (f"{WAITING_RECORD}{{{sel}}}", "{{pod}} waiting"),
                (f"sum by (pod) ({VLLM_RUNNING}{{{sel}}})", "{{pod}} running"),
                (f"vector({waiting_target:g})", "target"),
            ],
        ),
        ("KV-cache usage", "percentunit", [(f"max by (pod) ({VLLM_KV_USAGE}{{{sel}}})", "{{pod}}")]),
        (
            "Requests unanswered by vLLM (errors, cancellations)",
            "percentunit",
            [(unanswered_ratio_expr(namespace, job, "1m"), "{{model}}")],
        ),
    ]
    reused = ("Requests per second", "Replicas serving")
    tail = [title for title in kept if title.startswith(("Pod start-up", "GPU "))]
    panels = [kept[name] for name in reused]
    panels += [_panel(panel_id=0, title=name, unit=unit, targets=targets, x=0, y=0) for name, unit, targets in new]
    panels += [kept[name] for name in tail]
    for i, panel in enumerate(panels):
        panel.update(id=i + 1, gridPos={"h": 8, "w": 12, "x": 12 * (i % 2), "y": 8 * (i // 2)})
    board["panels"] = panels
    board["tags"] = [*board["tags"], "vllm"]
    return board


def rule_spec_for(
    spec: ModelSpec,
    namespace: str,
    job: str,
    *,
    ratio_target: float,
    ttft_p95_target_s: float,
    max_pending: int,
    ensembles: tuple[str, ...] = (),
    for_: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The PrometheusRule spec of the service serving ``spec``: vLLM's (:func:`vllm_prometheus_rule_spec`) for a
    vLLM model, else Triton's queue/compute rules (:func:`prometheus_rule_spec`)."""
    if spec.family.is_vllm:
        return vllm_prometheus_rule_spec(namespace, job, ttft_p95_target_s, for_=for_)
    return prometheus_rule_spec(namespace, job, ratio_target, max_pending, ensembles=ensembles, for_=for_)


def dashboard_json_for(
    spec: ModelSpec, namespace: str, job: str, title: str, ttft_p95_target_s: float, *, waiting_target: float = 2.0
) -> str:
    """The dashboard JSON of the service serving ``spec`` (:func:`vllm_dashboard` for a vLLM model)."""
    if not spec.family.is_vllm:
        return dashboard_json(namespace, job, title)
    board = vllm_dashboard(namespace, job, title, ttft_p95_target_s, waiting_target)
    return json.dumps(board, indent=1, sort_keys=True, ensure_ascii=False)
