"""The platform's signals around the models, and the alerts that page on them (pure, no Pulumi).

What kube-prometheus-stack's Prometheus scrapes besides Triton and the gateway, and what it alerts on:

* **Envoy** (Envoy Gateway's proxies, the edge): a PodMonitor on the proxies' ``metrics`` port (19001,
  ``/stats/prometheus``: the port, path and labels Envoy Gateway gives every proxy Deployment, its
  ``internal/infrastructure/kubernetes/proxy/testdata/deployments/default.yaml``). Series used: the connection
  managers' ``envoy_http_downstream_rq_total`` and ``envoy_http_downstream_rq_xx`` (Envoy Gateway's own stats and
  readiness listeners, prefixes ``eg-*``, left out); the API-key filter's ``unauthorized`` counter (its stats sit
  under the connection manager's prefix: ``envoy_http_api_key_auth_unauthorized``); the local rate limiter's
  ``rate_limited`` counter under Envoy Gateway's stat prefix ``http_local_rate_limiter``.
* **cert-manager**: its chart's own ServiceMonitor (``certmanager_certificate_expiration_timestamp_seconds``,
  ``certmanager_certificate_ready_status``).
* **Each public host from outside the pods**: prometheus-blackbox-exporter probes every host the stack publishes
  through DNS, the load balancer, Envoy and TLS, expecting the edge's refusal of a request without a key (401): an
  edge that answers 200 without a key fails the probe too (authentication lost).
* **Jobs and serving Deployments** of the stack's namespace: kube-state-metrics (``kube_job_failed``,
  ``kube_deployment_spec_replicas``, ``kube_deployment_status_replicas_available``).
* **GPUs**: NVIDIA's dcgm-exporter on the GPU nodes (``DCGM_FI_DEV_XID_ERRORS``: the last Xid the driver reported
  for the GPU, 0 when none).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from components.common.workload import SCRAPE_INTERVAL
from components.settings.alerting import with_runbooks

ENVOY_PROXY_LABELS = {
    "app.kubernetes.io/component": "proxy",
    "app.kubernetes.io/managed-by": "envoy-gateway",
    "app.kubernetes.io/name": "envoy",
}
"""The labels Envoy Gateway puts on every proxy pod it runs."""
ENVOY_METRICS_PORT = "metrics"
ENVOY_METRICS_PATH = "/stats/prometheus"
ENVOY_OWN_LISTENERS = "eg-.*"
"""Envoy Gateway's stats and readiness listeners' connection-manager prefixes: not client traffic."""

EDGE_ERROR_RATIO = 0.05
"""Share of the edge's answers that are 5xx (or 429) before it alerts."""
EDGE_UNAUTHORIZED_RATIO = 0.25
"""Share of the edge's requests refused for a missing or unknown key before it alerts."""
EDGE_MIN_RATE = 0.1
"""Requests per second below which the edge's ratios are not judged (a handful of requests is no signal)."""
CERT_WARN_DAYS = 21
"""cert-manager renews 30 days before expiry (a 90-day ACME certificate at 2/3 of its life): 21 days left means
renewals have failed for 9 days."""
CERT_PAGE_DAYS = 7
SERVING_UNAVAILABLE_FOR = "15m"
"""How long a serving Deployment that wants replicas may have none available (a wake from zero or a first start
longer than this fires too)."""


@dataclass(frozen=True)
class EdgeProbe:
    """One public host as a client reaches it: ``https://<host><path>``, answered with ``status``."""

    host: str
    path: str
    status: int = 401
    """The answer that proves the edge works: 401 where requests need an API key (the probe holds none)."""

    @property
    def url(self) -> str:
        return f"https://{self.host}{self.path}"


BLACKBOX_LABEL = "edge_host"
"""The label the blackbox probes' series carry: the probed host."""


def blackbox_module(status: int) -> str:
    return f"edge_{status}"


def blackbox_exporter_values(probes: Sequence[EdgeProbe], node_selector: dict[str, str]) -> dict[str, Any]:
    """prometheus-blackbox-exporter with one HTTPS module per expected status and a ServiceMonitor per host (every
    minute): TLS required, no redirect followed (an HTTP listener's redirect is not an answer), IPv4."""
    statuses = sorted({p.status for p in probes})
    return {
        "nodeSelector": dict(node_selector),
        "config": {
            "modules": {
                blackbox_module(status): {
                    "prober": "http",
                    "timeout": "10s",
                    "http": {
                        "method": "GET",
                        "valid_status_codes": [status],
                        "valid_http_versions": ["HTTP/1.1", "HTTP/2.0"],
                        "fail_if_not_ssl": True,
                        "follow_redirects": False,
                        "preferred_ip_protocol": "ip4",
                    },
                }
                for status in statuses
            }
        },
        "serviceMonitor": {
            "enabled": True,
            "defaults": {"interval": "60s", "scrapeTimeout": "15s"},
            "targets": [
                {
                    "name": p.host,
                    "url": p.url,
                    "module": blackbox_module(p.status),
                    "additionalRelabeling": [{"targetLabel": BLACKBOX_LABEL, "replacement": p.host}],
                }
                for p in probes
            ],
        },
    }


def envoy_pod_monitor_spec(namespace: str) -> dict[str, Any]:
    """Scrape every Envoy Gateway proxy in ``namespace`` (its stats port) every 15 s."""
    return {
        "selector": {"matchLabels": dict(ENVOY_PROXY_LABELS)},
        "namespaceSelector": {"matchNames": [namespace]},
        "podMetricsEndpoints": [{"port": ENVOY_METRICS_PORT, "path": ENVOY_METRICS_PATH, "interval": SCRAPE_INTERVAL}],
    }


def _edge_rate(metric: str, extra: str = "") -> str:
    sel = f'envoy_http_conn_manager_prefix!~"{ENVOY_OWN_LISTENERS}"{extra}'
    return f"sum(rate({metric}{{{sel}}}[5m]))"


def edge_requests_expr() -> str:
    """The edge's client requests per second (5-minute rate, all proxies and listeners)."""
    return _edge_rate("envoy_http_downstream_rq_total")


def edge_share_expr(part: str) -> str:
    """``part`` (requests per second) as a share of the edge's requests, where it had at least
    :data:`EDGE_MIN_RATE` of them."""
    total = edge_requests_expr()
    return f"({part} / {total}) and ({total} > {EDGE_MIN_RATE:g})"


def _alert(name: str, expr: str, for_: str, severity: str, *, summary: str, description: str) -> dict[str, Any]:
    return {
        "alert": name,
        "expr": expr,
        "for": for_,
        "labels": {"severity": severity, "service": "platform"},
        "annotations": {"summary": summary, "description": description},
    }


def workload_alerts(namespace: str) -> list[dict[str, Any]]:
    """The stack's Jobs (download, conversion, probe) that failed, and serving Deployments left with no replica."""
    wants = f'kube_deployment_spec_replicas{{namespace="{namespace}"}} > 0'
    none = f'kube_deployment_status_replicas_available{{namespace="{namespace}"}} == 0'
    return [
        _alert(
            "TritonFtJobFailed",
            f'kube_job_failed{{namespace="{namespace}",condition="true"}} > 0',
            "1m",
            "warning",
            summary="Job {{ $labels.job_name }} in {{ $labels.namespace }} failed",
            description=(
                "A Job of the stack (a model's download or conversion, a probe or judge) ran out of retries: the model "
                "it prepares is not served in its new version; its pods' logs say why."
            ),
        ),
        _alert(
            "TritonFtServingUnavailable",
            f"({wants}) and on (namespace, deployment) ({none})",
            SERVING_UNAVAILABLE_FOR,
            "critical",
            summary="{{ $labels.deployment }} has no replica available",
            description=f"Deployment {{{{ $labels.deployment }}}} wants replicas but none has been available for "
            f"{SERVING_UNAVAILABLE_FOR}: nothing answers its requests, so no request reaches it and its "
            "failure-ratio alerts have nothing to judge.",
        ),
    ]


def certificate_alerts() -> list[dict[str, Any]]:
    """cert-manager's certificates: renewal failing (warning), expiry close (page), not ready (warning)."""
    left = "certmanager_certificate_expiration_timestamp_seconds - time()"
    summary = "Certificate {{ $labels.namespace }}/{{ $labels.name }} expires in {{ $value | humanizeDuration }}"
    return [
        _alert(
            "EdgeCertificateExpiringSoon",
            f"{left} < {CERT_WARN_DAYS} * 86400",
            "1h",
            "warning",
            summary=summary,
            description=(
                f"Less than {CERT_WARN_DAYS} days left: cert-manager renews 30 days before expiry, so renewal has been "
                "failing for days (the Certificate's and its CertificateRequest's events say why)."
            ),
        ),
        _alert(
            "EdgeCertificateExpiryImminent",
            f"{left} < {CERT_PAGE_DAYS} * 86400",
            "10m",
            "critical",
            summary=summary,
            description=f"Less than {CERT_PAGE_DAYS} days before TLS fails for every client of this host.",
        ),
        _alert(
            "EdgeCertificateNotReady",
            'max by (namespace, name) (certmanager_certificate_ready_status{condition="False"}) == 1',
            "1h",
            "warning",
            summary="Certificate {{ $labels.namespace }}/{{ $labels.name }} is not ready",
            description="cert-manager could not issue or renew this certificate for an hour.",
        ),
    ]


def edge_alerts() -> list[dict[str, Any]]:
    """The edge's answers as clients get them: 5xx (page), keys refused (warning), rate limited (warning)."""
    server = _edge_rate("envoy_http_downstream_rq_xx", ',envoy_response_code_class="5"')
    unauthorized = _edge_rate("envoy_http_api_key_auth_unauthorized")
    limited = "sum(rate(envoy_http_local_rate_limiter_http_local_rate_limit_rate_limited[5m]))"
    return [
        _alert(
            "EdgeServerErrors",
            f"({edge_share_expr(server)}) > {EDGE_ERROR_RATIO:g}",
            "5m",
            "critical",
            summary="The edge answers {{ $value | humanizePercentage }} of requests with a server error",
            description=(
                f"More than {EDGE_ERROR_RATIO:.0%} of the requests through Envoy were answered 5xx (5-minute rate) "
                "for 5m: backends unreachable or failing behind the edge, including requests that never reach Triton."
            ),
        ),
        _alert(
            "EdgeUnauthorizedRequests",
            f"({edge_share_expr(unauthorized)}) > {EDGE_UNAUTHORIZED_RATIO:g}",
            "15m",
            "warning",
            summary="The edge refuses {{ $value | humanizePercentage }} of requests for a missing or unknown API key",
            description=(
                f"More than {EDGE_UNAUTHORIZED_RATIO:.0%} of the requests through Envoy carried no valid API key for "
                "15m: a client with a rotated or revoked key, or someone guessing keys."
            ),
        ),
        _alert(
            "EdgeRateLimited",
            f"({edge_share_expr(limited)}) > {EDGE_ERROR_RATIO:g}",
            "15m",
            "warning",
            summary="The edge rate-limits {{ $value | humanizePercentage }} of requests",
            description=(
                f"More than {EDGE_ERROR_RATIO:.0%} of the requests through Envoy were refused with 429 by the "
                "per-client rate limit for 15m: a client above `rateLimitPerMinute`."
            ),
        ),
    ]


def blackbox_alerts() -> list[dict[str, Any]]:
    """A public host that does not answer as a client expects, from outside the pods."""
    return [
        _alert(
            "EdgeHostUnreachable",
            f'max by ({BLACKBOX_LABEL}) (probe_success{{{BLACKBOX_LABEL}!=""}}) == 0',
            "5m",
            "critical",
            summary="{{ $labels.edge_host }} does not answer as a client expects",
            description=(
                "The blackbox probe of this host (DNS, load balancer, Envoy, TLS, and the API key's refusal without a "
                "key) failed for 5m: clients cannot reach the service, or it answers without asking for a key."
            ),
        ),
    ]


def gpu_alerts() -> list[dict[str, Any]]:
    """A GPU whose driver reported an Xid error."""
    return [
        _alert(
            "GpuXidErrors",
            "max by (Hostname, gpu, UUID) (DCGM_FI_DEV_XID_ERRORS) > 0",
            "1m",
            "critical",
            summary="GPU {{ $labels.gpu }} on {{ $labels.Hostname }} reported Xid {{ $value }}",
            description=(
                "The NVIDIA driver reported an Xid error on this GPU (the value is the Xid: 48 double-bit ECC, 79 "
                "fallen off the bus, 13/31/43 an application fault ...): the pods on it may answer wrongly or not at "
                "all until the node is replaced."
            ),
        ),
    ]


def platform_rule_spec(
    namespace: str, *, cert_manager: bool, envoy: bool, blackbox: bool, gpus: bool
) -> dict[str, Any]:
    """The platform's PrometheusRule spec: the workloads' group always, the others where their signal is scraped."""
    groups: list[tuple[str, list[dict[str, Any]]]] = [("workloads", workload_alerts(namespace))]
    if cert_manager:
        groups.append(("certificates", certificate_alerts()))
    if envoy:
        groups.append(("edge", edge_alerts()))
    if blackbox:
        groups.append(("blackbox", blackbox_alerts()))
    if gpus:
        groups.append(("gpus", gpu_alerts()))
    return with_runbooks({"groups": [{"name": f"triton-ft.platform.{g}", "rules": rules} for g, rules in groups]})
