"""What the stages know of a running Triton server: its ports (served by the serving stage, called by the gateway)
and the custom metric it is autoscaled on (recorded by the serving stage's rules, served to the HPA by the
prometheus-adapter the platform installs)."""

from __future__ import annotations

from typing import Any

HTTP_PORT = 8000
GRPC_PORT = 8001
METRICS_PORT = 8002

RATIO_RECORD = "triton:queue_compute:ratio"
"""Recording rule name (the NVIDIA tutorial's)."""
RATIO_METRIC = "triton_queue_compute_ratio"
"""The same series as the custom-metrics API serves it to the HPA (no colons in API paths)."""


def adapter_rule() -> dict[str, Any]:
    """The prometheus-adapter ``rules.custom`` entry that serves :data:`RATIO_RECORD` as :data:`RATIO_METRIC`.

    It belongs in the adapter's Helm values (the adapter reads its own ConfigMap); the service exports it so the
    stack can pass it to the adapter chart.
    """
    return {
        "seriesQuery": f'{RATIO_RECORD}{{namespace!="",pod!=""}}',
        "resources": {"overrides": {"namespace": {"resource": "namespace"}, "pod": {"resource": "pod"}}},
        "name": {"matches": f"^{RATIO_RECORD}$", "as": RATIO_METRIC},
        "metricsQuery": "avg(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)",
    }


TTFT_P95_RECORD = "triton_ft:vllm_time_to_first_token_seconds:p95"
"""Recording rule name of each pod's time-to-first-token p95 over the last minute
(from ``vllm:time_to_first_token_seconds``, the histogram Triton's vLLM backend reports with
``REPORT_CUSTOM_METRICS``), 0 for an idle pod."""

WAITING_RECORD = "triton_ft:vllm_requests_waiting:pod"
"""Recording rule name of a vLLM model's autoscaling signal: each pod's requests waiting inside vLLM
(``vllm:num_requests_waiting``, the scheduler gauge the server image adds to NVIDIA's backend)."""
WAITING_METRIC = "triton_ft_vllm_requests_waiting"
"""The same series as the custom-metrics API serves it to a vLLM model's HPA."""


def waiting_adapter_rule() -> dict[str, Any]:
    """The prometheus-adapter ``rules.custom`` entry that serves :data:`WAITING_RECORD` as :data:`WAITING_METRIC`
    (the HPA of a vLLM model; a stack without one has no such series and the rule serves nothing)."""
    return {
        "seriesQuery": f'{WAITING_RECORD}{{namespace!="",pod!=""}}',
        "resources": {"overrides": {"namespace": {"resource": "namespace"}, "pod": {"resource": "pod"}}},
        "name": {"matches": f"^{WAITING_RECORD}$", "as": WAITING_METRIC},
        "metricsQuery": "max(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)",
    }
