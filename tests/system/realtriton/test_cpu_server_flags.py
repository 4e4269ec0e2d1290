"""The flags a ``device: cpu`` replica's Triton runs with (``components.serving.server_spec``), on a real
``tritonserver`` on this GPU-less machine: it starts, loads the model's repository, and exports CPU metrics, no GPU
ones."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from dataclasses import replace
from pathlib import Path

from components.serving.server_spec import ADMIN_KEY_ENV, tritonserver_args
from tests.components.fixtures import MINILM_CPU
from tests.system.realtriton.conftest import EMBEDDER, ServeTriton
from tritonft.local_triton import TritonRuntime

SET_BY_THE_TEST_SERVER = ("--model-repository=", "--http-port=", "--grpc-port=", "--metrics-port=")
"""Flags the local server sets itself (its own repository and free loopback ports)."""


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_a_cpu_replicas_tritonserver_flags_start_triton_without_a_gpu_with_cpu_metrics(
    serve_triton: ServeTriton, newest_runtime: TritonRuntime, embedder_repository: Path
) -> None:
    spec = replace(MINILM_CPU, name=EMBEDDER)
    flags = [f for f in tritonserver_args(spec, "/models") if not f.startswith(SET_BY_THE_TEST_SERVER)]
    assert "--allow-cpu-metrics=true" in flags and "--model-control-mode=none" in flags
    flags = [f.replace(f"$({ADMIN_KEY_ENV})", "the-pods-uid") for f in flags]  # as the kubelet expands it
    server = serve_triton(embedder_repository, extra_args=flags, shared=False, runtime=newest_runtime)  # an encoder
    try:
        base = f"http://{server.http_url}/v2/models"
        assert _status(f"{base}/{EMBEDDER}/ready") == 200
        deadline = time.monotonic() + 20
        metrics = ""
        while "nv_cpu_utilization" not in metrics and time.monotonic() < deadline:
            time.sleep(0.5)
            with urllib.request.urlopen(server.metrics_url, timeout=10) as response:
                metrics = response.read().decode()
        assert "nv_cpu_utilization" in metrics and "nv_cpu_memory_used_bytes" in metrics
        assert "nv_gpu_" not in metrics
    finally:
        server.stop()
