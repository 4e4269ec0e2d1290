"""The gateway's Prometheus series, in a registry of its own (``GET /metrics``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Histogram

_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


@dataclass
class GatewayMetrics:
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        self.requests = Counter(
            "tritonft_gateway_requests",
            "HTTP requests answered, by route, model and status code",
            ["route", "model", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "tritonft_gateway_request_seconds",
            "Time from request to the last byte of the answer, by route",
            ["route"],
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self.triton_latency = Histogram(
            "tritonft_gateway_triton_seconds",
            "Time spent waiting for Triton per inference, by model",
            ["model"],
            buckets=_BUCKETS,
            registry=self.registry,
        )
