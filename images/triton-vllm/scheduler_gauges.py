"""vLLM's scheduler gauges for Triton's vLLM backend: running and waiting requests and KV-cache usage.

NVIDIA's backend (``vllm_backend`` ``src/utils/metrics.py``, ``VllmStatLogger.record``) reports counters and
histograms only: it ignores the ``scheduler_stats`` vLLM hands every stat logger after each engine step, so the queue
inside vLLM is not visible to Prometheus, the autoscaler or an endpoint picker. :func:`patch` wraps a stat-logger
class so each step's ``SchedulerStats`` also sets three gauges, by vLLM's own names and words (vLLM 0.27.1
``v1/metrics/loggers.py:494-566``), labelled as the logger's other metrics are (``model``, ``version``).

Installed by ``images/triton-vllm/Dockerfile`` next to NVIDIA's backend (``/opt/tritonserver/backends/vllm``), which
then applies it to its ``VllmStatLogger``; the project's own backend (``tritonft/engines/vllm/triton_model.py``, which
serves the tests here) applies the same function to its stat logger. Standard library and Triton's
``triton_python_backend_utils`` only (the stub's modules).
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any

GAUGES = (
    ("vllm:num_requests_running", "num_running_reqs", "Number of requests in model execution batches."),
    ("vllm:num_requests_waiting", "num_waiting_reqs", "Number of requests waiting to be processed."),
    ("vllm:kv_cache_usage_perc", "kv_cache_usage", "KV-cache usage. 1 means 100 percent usage."),
)
"""Each gauge, the ``SchedulerStats`` field that sets it (``v1/metrics/stats.py``) and vLLM's description."""
PATCHED = "_tritonft_scheduler_gauges"


class SchedulerGauges:
    """The three gauge families and their metrics for one ``labels`` set (families are kept: Triton refuses to set
    a metric whose family was deleted)."""

    def __init__(self, labels: dict[str, str]) -> None:
        import triton_python_backend_utils as pb_utils  # the stub's module (untyped: mypy's overrides)

        self.families = {
            name: pb_utils.MetricFamily(name=name, description=description, kind=pb_utils.MetricFamily.GAUGE)
            for name, _, description in GAUGES
        }
        self.metrics = {name: family.Metric(labels=dict(labels)) for name, family in self.families.items()}

    def record(self, scheduler_stats: Any) -> None:
        """One engine step's ``SchedulerStats`` into the gauges."""
        for name, field, _ in GAUGES:
            self.metrics[name].set(float(getattr(scheduler_stats, field)))


def patch(stat_logger: type) -> type:
    """``stat_logger`` (constructed as ``cls(labels, ...)``, recording as ``record(scheduler_stats, iteration_stats,
    ...)``, NVIDIA's ``VllmStatLogger`` signature) also sets the scheduler gauges; idempotent. A failing gauge is
    swallowed: a metric never fails the engine's step."""
    if getattr(stat_logger, PATCHED, False):
        return stat_logger
    init, record = getattr(stat_logger, "__init__"), getattr(stat_logger, "record")  # noqa: B009 (any stat logger)

    @functools.wraps(init)
    def init_with_gauges(self: Any, labels: dict[str, str], *args: Any, **kwargs: Any) -> None:
        init(self, labels, *args, **kwargs)
        self._scheduler_gauges = SchedulerGauges(labels)

    @functools.wraps(record)
    def record_with_gauges(self: Any, scheduler_stats: Any, *args: Any, **kwargs: Any) -> Any:
        if scheduler_stats is not None:
            with contextlib.suppress(Exception):  # a gauge never fails the engine's step
                self._scheduler_gauges.record(scheduler_stats)
        return record(self, scheduler_stats, *args, **kwargs)

    stat_logger.__init__ = init_with_gauges  # type: ignore[misc]
    stat_logger.record = record_with_gauges  # type: ignore[attr-defined]
    setattr(stat_logger, PATCHED, True)
    return stat_logger
