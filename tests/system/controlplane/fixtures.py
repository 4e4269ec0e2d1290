"""One real control plane per session; per test a namespace and its own simulated nodes, removed afterwards.

On a failure the control-plane log lines that name the test's namespace are printed into the test's report.
The fixtures are registered once, by ``tests/system/conftest.py``, for every system test: the control-plane tests
and the cross-stage tests beside them share the one control plane (a module that imported the fixture would get
a second one of its own, started for it and running until the session ends).
"""

from __future__ import annotations

import itertools
import re
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from components.settings.stack_file import settings_from_stack_file
from tests.failure_logs import attach_on_failure
from tests.plans import StackPlans, deploy_secrets
from tests.system.controlplane.plan import (
    ADMISSION_KINDS,
    NodeShape,
    Plan,
    apply_plan,
    create_nodes,
    load_plan,
    retarget,
)
from tests.system.controlplane.server import REPO, ControlPlane, control_plane_bin
from tritonft.kube import Kube

_counter = itertools.count(1)
LOG_TAIL = 60


def control_plane_sections(item: pytest.Item) -> list[tuple[str, str]]:
    """Each control-plane log's lines for the test (see :func:`log_section`), when it used the control plane."""
    plane = getattr(item, "_control_plane", None)
    if not isinstance(plane, ControlPlane):
        return []
    namespace = getattr(item, "_cluster_namespace", None)
    return [
        log_section(name, path.read_text(errors="replace").splitlines() if path.exists() else [], namespace)
        for name, path in plane.logs().items()
    ]


pytest_runtest_makereport = attach_on_failure(control_plane_sections)


def log_section(name: str, lines: list[str], namespace: str | None) -> tuple[str, str]:
    """The lines of a control-plane log that name the test's namespace (the plane is shared by every test, whose
    others' lines would bury the failure), or the log's tail when none does."""
    mine = [line for line in lines if namespace and namespace in line][-LOG_TAIL:]
    if mine:
        return f"{name} log (last {len(mine)} lines naming {namespace})", "\n".join(mine)
    return f"{name} log (last {LOG_TAIL} lines)", "\n".join(lines[-LOG_TAIL:])


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    plane = ControlPlane(workdir=tmp_path_factory.mktemp("control-plane"), bin_dir=control_plane_bin())
    try:
        plane.start()
        yield plane
    finally:
        plane.stop()


@pytest.fixture(scope="session")
def prod_plan(stack_plan: StackPlans) -> Plan:
    """prod's plan as ``tritonft synth`` writes it (once per session)."""
    return Plan(settings_from_stack_file(REPO, "prod", deploy_secrets("prod")), stack_plan("prod").out / "manifests")


@dataclass
class Cluster:
    """The test's slice of the control plane: its namespace, its nodes, its volumes."""

    kube: Kube
    namespace: str
    nodes: list[str] = field(default_factory=list)
    cluster_scoped: list[tuple[str, str, str]] = field(default_factory=list)
    """(apiVersion, kind, name) of cluster-scoped objects the test made under fixed names, removed afterwards."""

    def apply_cluster_scoped(self, obj: dict[str, Any]) -> None:
        self.cluster_scoped.append((obj["apiVersion"], obj["kind"], obj["metadata"]["name"]))
        self.kube.apply(obj)

    def add_nodes(self, shapes: Sequence[NodeShape]) -> None:
        self.nodes += [s.name for s in shapes]
        create_nodes(self.kube, shapes)

    def apply(self, manifests: Path, plan_namespace: str) -> tuple[list[dict[str, Any]], list[str]]:
        objs = retarget(load_plan(manifests), plan_namespace, self.namespace)
        return objs, apply_plan(self.kube, objs, pv_prefix=self.namespace)

    def pods(self, selector: str = "") -> list[Any]:
        return self.kube.items("v1", "Pod", self.namespace, selector)


@pytest.fixture
def cluster(request: pytest.FixtureRequest, control_plane: ControlPlane) -> Iterator[Cluster]:
    request.node._control_plane = control_plane
    kube = control_plane.kube
    label = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower())[:40].strip("-")
    made = Cluster(kube, f"t{next(_counter)}-{label}")
    request.node._cluster_namespace = made.namespace
    try:
        yield made
    finally:
        kube.delete("v1", "Namespace", made.namespace)
        remove_pods(kube, made.namespace)
        for node in made.nodes:
            kube.delete("v1", "Node", node)
        for api_version, kind, name in made.cluster_scoped:
            kube.delete(api_version, kind, name)
        for kind in ADMISSION_KINDS:  # a plan's, renamed for the test by plan.retarget
            for made_policy in kube.items("admissionregistration.k8s.io/v1", kind):
                if made_policy["metadata"]["name"].startswith(f"{made.namespace}-"):
                    kube.delete("admissionregistration.k8s.io/v1", kind, made_policy["metadata"]["name"])
        for pv in kube.items("v1", "PersistentVolume"):
            if pv["metadata"]["name"].startswith(made.namespace):
                kube.delete("v1", "PersistentVolume", pv["metadata"]["name"])
        for sc in kube.items("storage.k8s.io/v1", "StorageClass"):
            if sc["metadata"]["name"].startswith(made.namespace):
                kube.delete("storage.k8s.io/v1", "StorageClass", sc["metadata"]["name"])


def remove_pods(kube: Kube, namespace: str, timeout_s: float = 30.0) -> None:
    """Delete the terminating namespace's pods now. The namespace controller takes its time (seconds under load),
    and a pod of this test still Pending then would be bound by the scheduler to the next test's fresh nodes,
    using their GPUs. The namespace is already Terminating, so its controllers cannot create new pods."""
    deadline = time.monotonic() + timeout_s
    while pods := kube.items("v1", "Pod", namespace):
        for pod in pods:
            kube.delete("v1", "Pod", pod["metadata"]["name"], namespace)
        if time.monotonic() > deadline:
            raise AssertionError(f"pods of namespace {namespace} still exist after {timeout_s:.0f} s")
        time.sleep(0.2)
