"""The real control plane's start time, prod's time from apply to every Triton pod scheduled, and the fail-fast
wait's time to its verdict.

Usage: .venv/bin/python benchmarks/control_plane_bench.py [RUNS]

Per run: start etcd + kube-apiserver + kube-controller-manager + kube-scheduler + kwok (timed until the API is ready
and the controllers created the default ServiceAccount); in one namespace create prod's nodes (3 x 4-GPU + 2 CPU),
apply prod's synthesised plan (conversion Jobs completed by kwok first) and time from the first Deployment applied
to every Triton pod bound to a node; in a second namespace, with a single GPU node, time from the Deployments
applied to the RolloutWatch's failure (default 60 s grace, 5 s polls; nothing can add a node). Prints medians. The
binaries' build is timed separately: ``scripts/setup/control_plane.sh`` prints "control_plane: built in N s" when it
builds, and this script times its cache hit.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from components.settings.stack_file import settings_from_stack_file
from tests.system.controlplane.plan import (
    AFTER_JOBS,
    apply_plan,
    by_kind,
    cpu_node_shape,
    create_nodes,
    gpu_node_shape,
    load_plan,
    retarget,
)
from tests.system.controlplane.server import ControlPlane, control_plane_bin
from tritonft.kube import Kube, wait_for
from tritonft.rollout.verdict import NodeGrowth
from tritonft.rollout.watch import RolloutFailedError, WatchConfig, watch_rollout
from tritonft.synth.run import synthesize

REPO = Path(__file__).resolve().parents[1]


def scheduled(kube: Kube, namespace: str, expected: int) -> bool:
    pods = kube.items("v1", "Pod", namespace, "app.kubernetes.io/component=triton")
    return len(pods) == expected and all(p["spec"].get("nodeName") for p in pods)


def deploy_until_deployments(kube: Kube, objs: list[dict[str, Any]], namespace: str, gpu_nodes: int) -> list[Any]:
    """Nodes and every object before the Deployments (Jobs completed); returns what is left to apply."""
    settings = settings_from_stack_file(REPO, "prod")
    ours = retarget(objs, settings.namespace, namespace)
    create_nodes(
        kube,
        [gpu_node_shape(settings, f"{namespace}-gpu-{i}") for i in range(gpu_nodes)]
        + [cpu_node_shape(settings, f"{namespace}-cpu-{i}") for i in range(2)],
    )
    apply_plan(kube, [o for o in ours if o["kind"] not in AFTER_JOBS], pv_prefix=namespace)
    return by_kind(ours, AFTER_JOBS)


def one_run(bin_dir: Path, objs: list[dict[str, Any]], work: Path) -> tuple[float, float, float]:
    settings = settings_from_stack_file(REPO, "prod")
    plane = ControlPlane(workdir=work, bin_dir=bin_dir)
    try:
        plane.start()
        kube = plane.kube
        nodes = settings.cluster.aws.gpu_nodes_min if settings.cluster.aws else 1
        rest = deploy_until_deployments(kube, objs, "fits", nodes)
        t0 = time.monotonic()
        for obj in rest:
            kube.apply(obj)
        expected = settings.serving.replicas_min * len(settings.models)
        wait_for("every Triton pod scheduled", lambda: scheduled(kube, "fits", expected), 120, 0.05)
        schedule_s = time.monotonic() - t0
        for node in kube.items("v1", "Node"):  # the second case's cluster has only its own nodes
            kube.delete("v1", "Node", node["metadata"]["name"])

        rest = deploy_until_deployments(kube, objs, "short", 1)
        t0 = time.monotonic()
        for obj in rest:
            kube.apply(obj)
        config = WatchConfig("short", "prod-t5-3b", NodeGrowth(autoscaler=False), deadline_s=900)
        try:
            watch_rollout(kube, config)
        except RolloutFailedError:
            fail_s = time.monotonic() - t0
        else:
            raise RuntimeError("prod-t5-3b rolled out on one GPU node")
        return plane.started_s, schedule_s, fail_s
    finally:
        plane.stop()


def setup_cache_hit_s() -> float:
    t0 = time.monotonic()
    subprocess.run(["bash", str(REPO / "scripts/setup/control_plane.sh")], check=True, capture_output=True)
    return time.monotonic() - t0


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    bin_dir = control_plane_bin()
    hits = [setup_cache_hit_s() for _ in range(runs)]
    with tempfile.TemporaryDirectory() as tmp:
        synthesize("prod", out=Path(tmp) / "plan", project_dir=REPO)
        objs = load_plan(Path(tmp) / "plan" / "manifests")
        results = [one_run(bin_dir, objs, Path(tempfile.mkdtemp(dir=tmp))) for _ in range(runs)]
    starts, schedules, fails = zip(*results, strict=True)
    print(f"runs: {runs}, load average at the end: {os.getloadavg()[0]:.2f}")
    print(f"scripts/setup/control_plane.sh, binaries cached: median {statistics.median(hits):.2f} s")
    print(f"control plane start (API ready + default ServiceAccount): median {statistics.median(starts):.1f} s")
    print(f"prod apply -> every Triton pod scheduled: median {statistics.median(schedules):.2f} s")
    print(
        f"prod on one GPU node, apply -> RolloutWatch fails with the scheduler's reason: "
        f"median {statistics.median(fails):.1f} s"
    )


if __name__ == "__main__":
    main()
