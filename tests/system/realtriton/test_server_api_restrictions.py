"""Triton's APIs no client of the stack calls, restricted by the flags the Triton pod runs with
(``components.serving.server_spec.tritonserver_args``), on the real servers: 2.51 (``.tools/triton``, a current
release) serving the stack's all-MiniLM-L6-v2 repository, and 2.33.0 (NGC 23.04, the FasterTransformer image's
release, where installed: ``.tools/triton-2.33``) on an empty repository.

What is shown: the shared-memory and repository APIs (and statistics, trace, logging) answer "restricted" over gRPC
on both releases and over HTTP on 2.51; a model load is refused on both (no model control); what the gateway and
the probe call (health, metadata, model configuration, inference) still answers, and the probe still judges the
model, over HTTP and gRPC, and through the gateway. On 23.04 the HTTP shared-memory API stays open: that server has
no flag to close it, and only the NetworkPolicy stands in front of it (``tests/system/controlplane/
test_network_policies.py``).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import pytest

from components.gateway.component import GatewayBackend, served_backends
from components.gateway.spec import Backend, gateway_command
from components.serving.server_spec import ADMIN_KEY_ENV, tritonserver_args
from tests.components.fixtures import MINILM_CPU
from tests.system.realtriton.conftest import EMBEDDER, ServeTriton
from tests.tritonft.gateway.server import GatewayProcess
from tests.tritonft.gateway.server import started as running
from tests.tritonft.probe.encoders import MINILM
from tritonft.local_triton import ROOT, LocalTriton, TritonRuntime, free_port
from tritonft.probe import ProbeConfig, run_probe
from tritonft.probe.rendered import target_for_spec

pytestmark = pytest.mark.slow

SET_BY_THE_TEST_SERVER = ("--model-repository=", "--http-port=", "--grpc-port=", "--metrics-port=")
TRITON_2_33 = ROOT / ".tools" / "triton-2.33"
"""``nvidia-pytriton`` 0.2.x, whose ``tritonserver`` is 2.33.0 (NGC 23.04): FasterTransformer's last release."""
POD_UID = str(uuid.uuid4())
"""What the kubelet expands ``$(TRITON_POD_UID)`` to: the pod's UID (the test's own, known to no client)."""


def stack_flags(release: str) -> list[str]:
    """The Triton container's flags for the embedder, as the kubelet hands them to the server."""
    spec = replace(MINILM_CPU, name=EMBEDDER)
    flags = [f for f in tritonserver_args(spec, "/models", release) if not f.startswith(SET_BY_THE_TEST_SERVER)]
    return [f.replace(f"$({ADMIN_KEY_ENV})", POD_UID) for f in flags]


def http(base: str, method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, str]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(f"http://{base}{path}", method=method, data=data)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status), response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def grpc_refusal(address: str, method: str, request: Any) -> str:
    """The gRPC status and message of calling ``method`` (empty when it answered)."""
    import grpc  # type: ignore[import-untyped]
    from tritonclient.grpc import service_pb2_grpc

    with grpc.insecure_channel(address) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        try:
            getattr(stub, method)(request, timeout=10)
        except grpc.RpcError as exc:
            return f"{exc.code().name}: {exc.details()}"
    return ""


def grpc_calls() -> dict[str, Any]:
    from tritonclient.grpc import service_pb2

    return {
        "SystemSharedMemoryRegister": service_pb2.SystemSharedMemoryRegisterRequest(
            name="r", key="/tritonft-attacker", byte_size=64
        ),
        "SystemSharedMemoryStatus": service_pb2.SystemSharedMemoryStatusRequest(),
        "CudaSharedMemoryStatus": service_pb2.CudaSharedMemoryStatusRequest(),
        "RepositoryIndex": service_pb2.RepositoryIndexRequest(),
        "RepositoryModelLoad": service_pb2.RepositoryModelLoadRequest(model_name=EMBEDDER),
        "RepositoryModelUnload": service_pb2.RepositoryModelUnloadRequest(model_name=EMBEDDER),
        "ModelStatistics": service_pb2.ModelStatisticsRequest(),
        "TraceSetting": service_pb2.TraceSettingRequest(),
        "LogSettings": service_pb2.LogSettingsRequest(),
    }


def live(base: str) -> bool:
    try:
        return http(base, "GET", "/v2/health/live")[0] == 200
    except urllib.error.URLError:
        return False


RESTRICTED = re.compile(r"^UNAVAILABLE: This protocol is restricted, expecting header 'triton-grpc-protocol-")


@pytest.fixture(scope="module")
def restricted_triton(
    serve_triton: ServeTriton, newest_runtime: TritonRuntime, embedder_repository: Path
) -> Iterator[LocalTriton]:
    server = serve_triton(embedder_repository, extra_args=stack_flags("24.10"), shared=False, runtime=newest_runtime)
    try:
        yield server
    finally:
        server.stop()


def test_the_flags_restrict_shared_memory_repository_statistics_trace_and_logging_over_grpc_on_2_51(
    restricted_triton: LocalTriton,
) -> None:
    refusals = {m: grpc_refusal(restricted_triton.grpc_url, m, r) for m, r in grpc_calls().items()}
    assert {m: bool(RESTRICTED.match(r)) for m, r in refusals.items()} == dict.fromkeys(refusals, True), refusals


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/v2/systemsharedmemory/region/r/register", {"key": "/tritonft-x", "offset": 0, "byte_size": 64}),
        ("GET", "/v2/systemsharedmemory/status", None),
        ("GET", "/v2/cudasharedmemory/status", None),
        ("POST", "/v2/repository/index", {}),
        ("POST", f"/v2/repository/models/{EMBEDDER}/load", {}),
        ("POST", f"/v2/repository/models/{EMBEDDER}/unload", {}),
        ("GET", "/v2/models/stats", None),
        ("GET", "/v2/trace/setting", None),
        ("POST", "/v2/logging", {"log_file": "/tmp/tritonft-attacker.log"}),
    ],
)
def test_the_same_apis_answer_403_over_http_on_2_51(
    restricted_triton: LocalTriton, method: str, path: str, body: dict[str, Any] | None
) -> None:
    status, text = http(restricted_triton.http_url, method, path, body)
    assert (status, json.loads(text)["error"]) == (403, "This API is restricted, expecting header 'triton-ft-admin'")


def test_what_the_gateway_and_the_probe_call_still_answers_and_the_probe_judges_the_model_over_http_and_grpc(
    restricted_triton: LocalTriton,
) -> None:
    for url in (f"http://{restricted_triton.http_url}", f"grpc://{restricted_triton.grpc_url}"):
        config = ProbeConfig(url, (target_for_spec(MINILM),), deadline_s=120, call_timeout_s=30, latency_requests=3)
        report = run_probe(config)
        assert report.ok, report.failure_message()
        assert [c.check for c in report.checks if c.model == EMBEDDER] == [
            "model_ready",
            "metadata",
            "model_config",
            "inference",
            "latency",
        ]


def test_the_gateway_serves_embeddings_from_the_restricted_server_and_the_probe_judges_them_there(
    restricted_triton: LocalTriton, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    served = served_backends([GatewayBackend(MINILM, cast(Any, None))])
    command = gateway_command([Backend(b.model, restricted_triton.grpc_url, {}) for b in served], deadline_seconds=60)
    gateway = GatewayProcess(restricted_triton.grpc_url, [], tmp_path)
    command[command.index("--port") + 1] = str(gateway.port)
    gateway.command = [sys.executable, *command[1:], "--host", "127.0.0.1"]
    with running(gateway, request):
        config = ProbeConfig(
            f"http://{restricted_triton.http_url}",
            (target_for_spec(MINILM),),
            deadline_s=120,
            call_timeout_s=30,
            latency_requests=3,
            gateway_url=f"{gateway.url}/v1",
        )
        report = run_probe(config)
    assert report.ok, report.failure_message()
    (check,) = [c for c in report.checks if c.check == "gateway"]
    assert check.detail == "POST /v1/embeddings: 6 embeddings of width 384, similarity order right"


@pytest.fixture(scope="module")
def triton_2_33(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """Triton 2.33.0 with the flags the FT image's pods run with, on an empty repository: (HTTP, gRPC) addresses."""
    site = sorted(TRITON_2_33.glob("lib/python3*/site-packages"))
    assert site, f"no Triton 2.33 at {TRITON_2_33} (nvidia-pytriton 0.2.x): run `bash scripts/setup/triton.sh`"
    server = site[0] / "pytriton" / "tritonserver"
    repository = tmp_path_factory.mktemp("empty-repo")
    log = tmp_path_factory.mktemp("triton-2.33-log") / "tritonserver.log"
    http_port, grpc_port, metrics_port = free_port(), free_port(), free_port()
    command = [
        str(server / "bin" / "tritonserver"),
        f"--model-repository={repository}",
        f"--backend-directory={server / 'backends'}",
        "--http-address=127.0.0.1",
        f"--http-port={http_port}",
        "--grpc-address=127.0.0.1",
        f"--grpc-port={grpc_port}",
        f"--metrics-port={metrics_port}",
        *[f for f in stack_flags("23.04") if not f.startswith("--allow-cpu-metrics")],
        "--allow-metrics=false",  # 2.33 has no --metrics-address: no listener beyond the loopback
    ]
    env = {**os.environ, "LD_LIBRARY_PATH": str(site[0] / "nvidia_pytriton.libs")}
    with log.open("wb") as out:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not live(f"127.0.0.1:{http_port}"):
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"Triton 2.33 did not start:\n{log.read_text()[-3000:]}", pytrace=False)
            time.sleep(0.3)
        version = json.loads(http(f"127.0.0.1:{http_port}", "GET", "/v2")[1])["version"]
        assert version == "2.33.0"
        yield f"127.0.0.1:{http_port}", f"127.0.0.1:{grpc_port}"
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_triton_23_04_restricts_the_same_apis_over_grpc(triton_2_33: tuple[str, str]) -> None:
    refusals = {m: grpc_refusal(triton_2_33[1], m, r) for m, r in grpc_calls().items()}
    assert {m: bool(RESTRICTED.match(r)) for m, r in refusals.items()} == dict.fromkeys(refusals, True), refusals


def test_triton_23_04_refuses_every_model_load_over_http(triton_2_33: tuple[str, str]) -> None:
    status, text = http(triton_2_33[0], "POST", f"/v2/repository/models/{EMBEDDER}/load", {})
    assert status == 400
    assert json.loads(text)["error"] == "explicit model load / unload is not allowed if polling is enabled"


def test_triton_23_04_still_serves_shared_memory_over_http_which_only_the_network_policy_closes(
    triton_2_33: tuple[str, str],
) -> None:
    status, text = http(triton_2_33[0], "GET", "/v2/systemsharedmemory/status")
    assert (status, json.loads(text)) == (200, [])
