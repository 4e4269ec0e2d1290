"""What the canary phase reads, from a real ``tritonserver`` (2.51) run with a canary stack's flags and scraped by a
real Prometheus: Triton's latency summary exists under the name the gate's p95 query asks for, and the gate's own
queries give the candidate's requests, failures and p95 from the server's own counters."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from components.serving.canary import P95_QUANTILE, SUMMARY_METRIC
from components.serving.promotion_gate import measure, prometheus_query
from components.serving.server_spec import ADMIN_KEY_ENV, LATENCY_SUMMARY_FLAG, tritonserver_args
from tests.components.fixtures import MINILM_CPU
from tests.system.realtriton.conftest import EMBEDDER, ServeTriton
from tests.system.realtriton.prometheus import LocalPrometheus
from tests.system.realtriton.test_cpu_server_flags import SET_BY_THE_TEST_SERVER
from tritonft.local_triton import TritonRuntime

pytestmark = pytest.mark.slow

NAMESPACE = "triton-local"
JOB = "local-minilm-abcd1234"
"""The candidate Service the ServiceMonitor scrapes the candidate's pods through."""
ANSWERED = 40
REFUSED = 3


def wait_until(check: Callable[[], bool], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "Prometheus did not scrape the server in time"
        time.sleep(0.5)


def _infer(base: str, input_name: str) -> int:
    body = json.dumps(
        {"inputs": [{"name": input_name, "shape": [1, 1], "datatype": "BYTES", "data": ["A man is eating."]}]}
    ).encode()
    request = urllib.request.Request(f"{base}/v2/models/{EMBEDDER}/infer", body, {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_a_canary_replicas_triton_exports_the_p95_and_counts_the_gate_reads(
    serve_triton: ServeTriton, newest_runtime: TritonRuntime, embedder_repository: Path, tmp_path: Path
) -> None:
    spec = replace(MINILM_CPU, name=EMBEDDER)
    flags = [
        f.replace(f"$({ADMIN_KEY_ENV})", "the-pods-uid")
        for f in tritonserver_args(spec, "/models", latency_summaries=True)
        if not f.startswith(SET_BY_THE_TEST_SERVER)
    ]
    assert LATENCY_SUMMARY_FLAG in flags
    server = serve_triton(embedder_repository, extra_args=flags, shared=False, runtime=newest_runtime)
    prometheus = LocalPrometheus(
        tmp_path,
        rule_files=[],
        targets=[(server.metrics_url.split("/")[2], "/metrics", {"namespace": NAMESPACE, "job": JOB})],
    )
    try:
        prometheus.start()
        query = prometheus_query(prometheus.url)
        wait_until(lambda: query(f'count(nv_inference_request_success{{job="{JOB}"}})') is not None)
        time.sleep(2.0)  # a scrape or two of the idle counters: the phase's window starts before the traffic

        base = f"http://{server.http_url}"
        assert [_infer(base, "text_input") for _ in range(ANSWERED)] == [200] * ANSWERED
        refused = [_infer(base, "no_such_input") for _ in range(REFUSED)]
        assert all(code == 400 for code in refused), refused
        with urllib.request.urlopen(server.metrics_url, timeout=10) as answer:
            metrics = answer.read().decode()
        assert f'{SUMMARY_METRIC}{{model="{EMBEDDER}",version="1",quantile="{P95_QUANTILE}"}}' in metrics

        time.sleep(3.0)  # the last counts scraped
        sample = measure(query, NAMESPACE, JOB, EMBEDDER, 60)
        assert sample.p95_ms is not None and sample.p95_ms > 0
        assert sample.requests == pytest.approx(ANSWERED, rel=0.25)
        assert sample.failures == 0, "a request Triton refuses before inference (no such input) is not a failure"
    finally:
        prometheus.stop()
        server.stop()
