"""Control plane start time and prod's time from apply to every Triton pod scheduled, on the real scheduler.

Usage: .venv/bin/python benchmarks/control_plane_bench.py [RUNS]
Per run: start etcd + kube-apiserver + kube-controller-manager + kube-scheduler + kwok (timed until the API is
ready and the controllers created the default ServiceAccount), create prod's nodes (3 x 4-GPU + 2 CPU), apply
prod's synthesised plan (conversion Jobs completed by kwok first), and time from the first Deployment applied to
every Triton pod bound to a node. Prints the medians. The binaries' one-time build time is printed by
``scripts/setup/control_plane.sh`` ("control_plane: built in N s").
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from components.settings.stack_file import settings_from_stack_file
from tests.controlplane.plan import (
    AFTER_JOBS,
    apply_plan,
    by_kind,
    cpu_node_shape,
    create_nodes,
    gpu_node_shape,
    load_plan,
    retarget,
)
from tests.controlplane.server import ControlPlane, control_plane_bin
from tritonft.kube import Kube, wait_for
from tritonft.synth.run import synthesize

REPO = Path(__file__).resolve().parents[1]


def scheduled(kube: Kube, namespace: str, expected: int) -> bool:
    pods = kube.items("v1", "Pod", namespace, "app.kubernetes.io/component=triton")
    return len(pods) == expected and all(p["spec"].get("nodeName") for p in pods)


def one_run(bin_dir: Path, objs: list[dict[str, Any]], work: Path) -> tuple[float, float]:
    settings = settings_from_stack_file(REPO, "prod")
    plane = ControlPlane(workdir=work, bin_dir=bin_dir)
    try:
        plane.start()
        kube = plane.kube
        nodes = settings.cluster.aws.gpu_nodes_min if settings.cluster.aws else 1
        create_nodes(
            kube,
            [gpu_node_shape(settings, f"gpu-{i}") for i in range(nodes)]
            + [cpu_node_shape(settings, f"cpu-{i}") for i in range(2)],
        )
        before = [o for o in objs if o["kind"] not in AFTER_JOBS]
        apply_plan(kube, before, pv_prefix="bench")
        t0 = time.monotonic()
        for obj in by_kind(objs, AFTER_JOBS):
            kube.apply(obj)
        expected = settings.serving.replicas_min * len(settings.models)
        wait_for("every Triton pod scheduled", lambda: scheduled(kube, settings.namespace, expected), 120, 0.05)
        return plane.started_s, time.monotonic() - t0
    finally:
        plane.stop()


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    bin_dir = control_plane_bin()
    with tempfile.TemporaryDirectory() as tmp:
        synthesize("prod", out=Path(tmp) / "plan", project_dir=REPO)
        settings = settings_from_stack_file(REPO, "prod")
        objs = retarget(load_plan(Path(tmp) / "plan" / "manifests"), settings.namespace, settings.namespace)
        results = [one_run(bin_dir, objs, Path(tempfile.mkdtemp(dir=tmp))) for _ in range(runs)]
    starts, schedules = zip(*results, strict=True)
    print(f"runs: {runs}")
    print(f"control plane start (API ready + default ServiceAccount): median {statistics.median(starts):.1f} s")
    print(f"prod apply -> every Triton pod scheduled: median {statistics.median(schedules):.1f} s")


if __name__ == "__main__":
    main()
