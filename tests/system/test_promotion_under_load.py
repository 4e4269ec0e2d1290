"""Judged promotion under a steady client load, the real control plane and real Tritons together.

``local``'s plans (minilm at its revision, then at another) are applied to the real API server by the CLI's rules
(``tests/system/controlplane/pulumi_engine.py``). kwok's pods have addresses but no server, so each version's pods
stand for a real ``tritonserver`` on this machine: the stable version's serves the real all-MiniLM-L6-v2, a wrong
candidate's a random-weight BERT under minilm's name, a right candidate's the real model again (its own process).
The judge is the real in-cluster judge provider, with the inputs the program gives it: its Job made and completed on
this API server, its verdict the Job's container's command run here, asking the candidate's server
(``tests/system/judge_command.py``).

A loopback client sends one inference at a time, a new connection each, to the user-facing Service through
``ServiceProxy``: kube-proxy's part (a connection goes to one ready endpoint of the Service, round robin), read from
the real EndpointSlices; the endpoint's pod stands for its version's server. What each server answered is counted
by the server itself (``nv_inference_request_success``).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import re
import socket
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

import components.probe.in_cluster as judge_module
from components.probe import ProbeFailedError
from components.probe.in_cluster import InClusterJudgeProvider, JudgeOutcome
from components.serving.promotion import VERSION_LABEL
from components.settings.stack_file import settings_from_stack_file
from tests.system.controlplane.fixtures import Cluster
from tests.system.controlplane.plan import cpu_node_shape, gpu_node_shape
from tests.system.controlplane.prod import copy_project
from tests.system.controlplane.pulumi_engine import Engine, Resource, named, program, rollout_watch
from tests.system.controlplane.server import ControlPlane
from tests.system.judge_command import run_judge_container
from tests.system.realtriton.conftest import (  # noqa: F401  (fixtures)
    EMBEDDER,
    ServeTriton,
    encoder_repository,
    encoder_triton,
    newest_runtime,
    serve_triton,
    triton_runtime,
)
from tests.system.realtriton.test_judge import wrong_candidate  # noqa: F401  (fixture)
from tests.tritonft.encoder.conftest import encoder_checkpoint, encoder_converted, minilm_dir  # noqa: F401
from tritonft.kube import Kube
from tritonft.local_triton import LocalTriton, TritonRuntime
from tritonft.synth.run import synthesize

pytestmark = pytest.mark.slow

STACK = "local"
PLAN_NAMESPACE = "triton-local"
INSTANCE = "local-minilm"
REVISION = "1110a243fdf4706b3f48f1d95db1a4f5529b4d41"
NEW_REVISION = "fedcba9876543210" * 2 + "fedcba98"
WATCH = "pulumi-python:dynamic/tritonft:RolloutWatch"
JUDGE = "pulumi-python:dynamic/tritonft:InClusterJudge"
PAUSE_S = 0.05
"""Between two client requests: a steady, bounded load (one request in flight)."""


@dataclass(frozen=True)
class Plans:
    stable: list[Resource]
    changed: list[Resource]


def version_of(resources: list[Resource]) -> str:
    (deployment,) = named(resources, "Deployment", INSTANCE)
    return str(deployment.inputs["metadata"]["labels"][VERSION_LABEL])


@pytest.fixture(scope="module")
def plans(tmp_path_factory: pytest.TempPathFactory) -> Plans:
    tmp = tmp_path_factory.mktemp("promotion-load")
    project = copy_project(tmp)
    synthesize(STACK, out=tmp / "stable", project_dir=project, extras=())
    stack = project / f"stacks/Pulumi.{STACK}.yaml"
    text = stack.read_text()
    assert text.count(f"revision: {REVISION}") == 1
    stack.write_text(text.replace(f"revision: {REVISION}", f"revision: {NEW_REVISION}"))
    synthesize(STACK, out=tmp / "changed", project_dir=project, extras=())
    return Plans(program(tmp / "stable"), program(tmp / "changed"))


@pytest.fixture(scope="module")
def right_candidate(
    serve_triton: ServeTriton,  # noqa: F811
    newest_runtime: TritonRuntime,  # noqa: F811
    encoder_repository: Path,  # noqa: F811
) -> LocalTriton:
    """The real all-MiniLM-L6-v2 again, in a server of its own (a new revision that answers right)."""
    return serve_triton(encoder_repository, runtime=newest_runtime, shared=False)


def successes(server: LocalTriton) -> int:
    with urllib.request.urlopen(server.metrics_url, timeout=10) as answer:
        text = answer.read().decode()
    found = re.search(rf'^nv_inference_request_success{{model="{EMBEDDER}",version="1"}} (\d+)', text, flags=re.M)
    return int(found.group(1)) if found else 0


class ServiceProxy:
    """kube-proxy's part for one Service, on loopback: each new connection goes to one of the Service's ready
    endpoints (round robin), as its EndpointSlices say now; a pod's address stands for its version's server."""

    def __init__(self, kube: Kube, namespace: str, service: str, servers: dict[str, LocalTriton]) -> None:
        self.kube, self.namespace, self.service, self.servers = kube, namespace, service, servers
        self.endpoints: list[str] = []
        """The versions of the ready endpoints, one entry per pod."""
        self.routed: Counter[str] = Counter()
        self._versions: dict[str, str] = {}
        self._turn = itertools.count()
        self._stop = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._threads = [threading.Thread(target=self._watch, daemon=True), threading.Thread(target=self._accept)]

    def _version(self, pod: str) -> str:
        if pod not in self._versions:
            labels = self.kube.get("v1", "Pod", pod, self.namespace)["metadata"]["labels"]
            self._versions[pod] = labels[VERSION_LABEL]
        return self._versions[pod]

    def _watch(self) -> None:
        while not self._stop.is_set():
            slices = self.kube.items(
                "discovery.k8s.io/v1", "EndpointSlice", self.namespace, f"kubernetes.io/service-name={self.service}"
            )
            pods = sorted(
                e["targetRef"]["name"]
                for s in slices
                for e in s.get("endpoints") or []
                if (e.get("conditions") or {}).get("ready") and e.get("targetRef")
            )
            self.endpoints = [self._version(p) for p in pods]
            time.sleep(0.05)

    def _accept(self) -> None:
        self._listener.settimeout(0.2)
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            endpoints = list(self.endpoints)
            if not endpoints:
                conn.close()  # no endpoint: the connection is refused, as kube-proxy's reject rule does
                continue
            version = endpoints[next(self._turn) % len(endpoints)]
            self.routed[version] += 1
            host, port = self.servers[version].http_url.rsplit(":", 1)
            upstream = socket.create_connection((host, int(port)))
            for a, b in ((conn, upstream), (upstream, conn)):
                threading.Thread(target=_pipe, args=(a, b), daemon=True).start()

    def __enter__(self) -> ServiceProxy:
        for t in self._threads:
            t.start()
        deadline = time.monotonic() + 10
        while not self.endpoints and time.monotonic() < deadline:
            time.sleep(0.05)
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        for t in self._threads:
            t.join()
        self._listener.close()


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)


class Client:
    """One inference at a time to the Service's HTTP port, a new connection each; counts what succeeded."""

    def __init__(self, port: int) -> None:
        self.url = f"http://127.0.0.1:{port}/v2/models/{EMBEDDER}/infer"
        self.ok = 0
        self.failed: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        body = json.dumps(
            {"inputs": [{"name": "text_input", "shape": [1, 1], "datatype": "BYTES", "data": ["A man is eating."]}]}
        ).encode()
        while not self._stop.is_set():
            request = urllib.request.Request(self.url, body, {"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(request, timeout=30) as answer:
                    outputs = json.loads(answer.read())["outputs"]
                    assert "embedding" in {o["name"] for o in outputs}, outputs
                    self.ok += 1
            except Exception as exc:  # every failure is counted, whatever it is
                self.failed.append(repr(exc))
            time.sleep(PAUSE_S)

    def __enter__(self) -> Client:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


@dataclass
class Stage:
    engine: Engine
    servers: dict[str, LocalTriton]
    """Version -> the real server its pods stand for."""
    cluster: Cluster


@pytest.fixture
def stage(control_plane: ControlPlane, cluster: Cluster, plans: Plans) -> Stage:
    settings = settings_from_stack_file(Path(__file__).resolve().parents[2], STACK)
    ns = cluster.namespace
    cluster.add_nodes(
        [gpu_node_shape(settings, f"{ns}-gpu-{i}") for i in range(2)]
        + [cpu_node_shape(settings, f"{ns}-cpu-{i}") for i in range(2)]
    )
    cluster.kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    servers: dict[str, LocalTriton] = {}

    kubeconfig = str(control_plane.workdir / "kubeconfig")

    def judge(res: Resource, _old: Resource | None) -> None:
        props = {**res.inputs, "namespace": ns, "kubeconfig": kubeconfig, "context": None, "poll_s": 0.2}
        if not res.name.startswith(f"{INSTANCE}-judge-"):
            InClusterJudgeProvider().create(props)  # t5-small, qwen: no real server here; their Jobs still run
            return
        version = res.name.rsplit("-", 1)[1]
        server = servers[version]
        real = judge_module._outcome

        def container(kube: Any, namespace: str, name: str, deadline_s: float, poll_s: float) -> JudgeOutcome:
            ran = real(kube, namespace, name, deadline_s, poll_s)  # the Job made, scheduled and completed here
            assert ran.passed, ran.message
            with tempfile.TemporaryDirectory() as tmp:  # what its container answers, asking the version's server
                return run_judge_container(res.inputs["job"], f"http://{server.http_url}", Path(tmp))

        with mock.patch.object(judge_module, "_outcome", container):
            InClusterJudgeProvider().create(props)

    return Stage(
        Engine(
            cluster.kube,
            ns,
            PLAN_NAMESPACE,
            {WATCH: rollout_watch(ns, kubeconfig), JUDGE: judge},
        ),
        servers,
        cluster,
    )


@pytest.fixture
def serving(stage: Stage, plans: Plans, encoder_triton: LocalTriton) -> Iterator[ServiceProxy]:  # noqa: F811
    """The stable version up (judged on the real MiniLM), the Service's proxy running."""
    stage.servers[version_of(plans.stable)] = encoder_triton
    stage.engine.up(plans.stable)
    with ServiceProxy(stage.cluster.kube, stage.cluster.namespace, INSTANCE, stage.servers) as proxy:
        assert proxy.endpoints, "the stable version's pods are the Service's endpoints"
        yield proxy


def test_a_wrong_candidate_gets_no_client_request_and_its_rollback_fails_none(
    stage: Stage,
    plans: Plans,
    serving: ServiceProxy,
    encoder_triton: LocalTriton,  # noqa: F811
    wrong_candidate: LocalTriton,  # noqa: F811
) -> None:
    stable, candidate = version_of(plans.stable), version_of(plans.changed)
    stage.servers[candidate] = wrong_candidate
    stable_before = successes(encoder_triton)

    with Client(serving.port) as client:
        time.sleep(1.0)
        with pytest.raises(ProbeFailedError, match=rf"inference\[{EMBEDDER}\]"):
            stage.engine.up(plans.changed)
        stage.engine.up(plans.stable)  # the rollback: the revision set back
        time.sleep(1.0)

    assert client.failed == [], client.failed[:3]
    assert client.ok > 10
    assert set(serving.routed) == {stable}, "no client connection went to the candidate"
    assert successes(encoder_triton) - stable_before == client.ok, "the stable server answered every request"


def test_a_right_candidate_is_promoted_with_no_failed_request(
    stage: Stage,
    plans: Plans,
    serving: ServiceProxy,
    encoder_triton: LocalTriton,  # noqa: F811
    right_candidate: LocalTriton,
) -> None:
    stable, candidate = version_of(plans.stable), version_of(plans.changed)
    stage.servers[candidate] = right_candidate
    stable_before, candidate_before = successes(encoder_triton), successes(right_candidate)

    with Client(serving.port) as client:
        time.sleep(1.0)
        stage.engine.up(plans.changed)
        deadline = time.monotonic() + 10
        while serving.routed[candidate] < 10 and time.monotonic() < deadline:
            time.sleep(0.1)

    assert client.failed == [], client.failed[:3]
    assert serving.routed[stable] > 0 and serving.routed[candidate] >= 10
    served_by_stable = successes(encoder_triton) - stable_before
    served_by_candidate = successes(right_candidate) - candidate_before
    assert served_by_stable == serving.routed[stable]
    assert served_by_candidate >= serving.routed[candidate], "the candidate answered its judge and the clients"
    assert served_by_stable + serving.routed[candidate] == client.ok
