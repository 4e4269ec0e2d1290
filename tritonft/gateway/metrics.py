"""The gateway's Prometheus series, in a registry of its own (``GET /metrics``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram

_ROWS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64)
_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


@dataclass(eq=False)
class GatewayMetrics:
    models: tuple[str, ...] = ()
    """The served models: each gets its :attr:`demand` series at 0 from the start."""
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)
    # Labelled children by label values: ``labels()`` validates and locks on every call.
    _children: dict[tuple[str, ...], Any] = field(default_factory=dict, init=False, repr=False)

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
        # A series that first appears at 1 has no increase for rate(): the first request for a model asleep would
        # not count as demand. So every served model's series exists, at 0, before any request.
        self.demand = Counter(
            "tritonft_gateway_model_requests",
            "Requests naming each served model, whatever they were answered (the demand that wakes a model scaled "
            "to zero)",
            ["model"],
            registry=self.registry,
        )
        self._demand = {model: self.demand.labels(model) for model in self.models}
        self.triton_latency = Histogram(
            "tritonft_gateway_triton_seconds",
            "Time spent waiting for Triton per inference (a streaming model's: the whole stream), by model",
            ["model"],
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self.first_response = Histogram(
            "tritonft_gateway_triton_first_response_seconds",
            "Time from a streaming (decoupled) model's call to its first response (time to first token), by model",
            ["model"],
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self.call_rows = Histogram(
            "tritonft_gateway_triton_call_rows",
            "ModelInfer calls to Triton (count) and the prompts (rows) each carried, by model; more rows than calls "
            "means concurrent requests were merged",
            ["model"],
            buckets=_ROWS,
            registry=self.registry,
        )

    def _child(self, metric: Any, *values: str) -> Any:
        key = (metric._name, *values)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*values)
        return child

    def answered(self, route: str, model: str, status: int, seconds: float) -> None:
        self._child(self.requests, route, model, str(status)).inc()
        if model in self._demand:
            self._demand[model].inc()
        self._child(self.latency, route).observe(seconds)

    def triton_waited(self, model: str, seconds: float) -> None:
        self._child(self.triton_latency, model).observe(seconds)

    def triton_first_response(self, model: str, seconds: float) -> None:
        self._child(self.first_response, model).observe(seconds)

    def triton_called(self, model: str, rows: int) -> None:
        self._child(self.call_rows, model).observe(rows)
