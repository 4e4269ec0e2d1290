"""The timeline of a stack's conversion Jobs on a fresh test control plane, as the judged promotion's tests apply them.

Usage: .venv/bin/python benchmarks/plan_jobs_timeline.py [STACK]   (default: local)

Synthesizes the stack, starts the control plane (``tests/system/controlplane/server.py``), creates the stack's nodes
and applies the plan with the tests' Pulumi engine (``tests/system/controlplane/pulumi_engine.py``: Jobs awaited,
the model store's claim bound as a provisioner binds it); a second client polls the Jobs and their pods every 20 ms.
Prints each change (scheduled, phase, conditions, finalizers) with its second, each Job's apply-to-complete time,
and the namespace's scheduling events. Found with it: the first Job's pod waited ~14 s for its claim when the volume
named the claim without its UID (bound at the volume controller's 15 s resync); bound by UID, every Job takes ~1.3 s,
most of it the Job controller's 1 s batching of pod updates.
"""

from __future__ import annotations

import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from components.settings.stack_file import settings_from_stack_file
from tests.system.controlplane.plan import cpu_node_shape, create_nodes, gpu_node_shape
from tests.system.controlplane.pulumi_engine import Engine, Resource, program
from tests.system.controlplane.server import ControlPlane, control_plane_bin
from tritonft.kube import Kube
from tritonft.synth.run import synthesize

REPO = Path(__file__).resolve().parents[1]
NAMESPACE = "timeline"
DYNAMIC = ("pulumi-python:dynamic/tritonft:RolloutWatch", "pulumi-python:dynamic/tritonft:IntegrationProbe")

Event = tuple[float, str, object]


def pod_state(pod: dict[str, Any]) -> object:
    status = pod.get("status") or {}
    true = sorted(c["type"] for c in status.get("conditions") or [] if c["status"] == "True")
    finalizers = tuple(pod["metadata"].get("finalizers") or ())
    return bool(pod["spec"].get("nodeName")), status.get("phase"), tuple(true), finalizers


def job_state(job: dict[str, Any]) -> object:
    status = job.get("status") or {}
    true = tuple(c["type"] for c in status.get("conditions") or [] if c["status"] == "True")
    return status.get("active"), status.get("succeeded"), true


def watch(kube: Kube, events: list[Event], stop: threading.Event) -> None:
    seen: dict[str, object] = {}
    while not stop.is_set():
        now = time.monotonic()
        found = [(p["metadata"]["name"], pod_state(p)) for p in kube.items("v1", "Pod", NAMESPACE, "job-name")]
        found += [(f"Job {j['metadata']['name']}", job_state(j)) for j in kube.items("batch/v1", "Job", NAMESPACE)]
        for name, state in found:
            if seen.get(name) != state:
                seen[name] = state
                events.append((now, name, state))
        time.sleep(0.02)


def main(stack: str) -> None:
    work = Path(tempfile.mkdtemp(prefix="plan-jobs-"))
    synthesize(stack, out=work / "plan", project_dir=REPO, extras=())
    resources = program(work / "plan")
    plane = ControlPlane(workdir=work, bin_dir=control_plane_bin())
    plane.start()
    try:
        settings = settings_from_stack_file(REPO, stack)
        create_nodes(
            plane.kube,
            [gpu_node_shape(settings, f"gpu-{i}") for i in range(3)]
            + [cpu_node_shape(settings, f"cpu-{i}") for i in range(2)],
        )
        plane.kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})

        def nothing(_res: Resource, _old: Resource | None) -> None:
            pass

        engine = Engine(plane.kube, NAMESPACE, f"triton-{stack}", dict.fromkeys(DYNAMIC, nothing))
        events: list[Event] = []
        stop = threading.Event()
        poller = threading.Thread(target=watch, args=(Kube(plane.kube.server, token=plane.kube.token), events, stop))
        poller.start()
        applied = engine._apply

        def timed(res: Resource, old: Resource | None) -> None:
            if res.inputs.get("kind") != "Job":
                applied(res, old)
                return
            start = time.monotonic()
            events.append((start, f"apply Job {res.inputs['metadata']['name']}", ""))
            applied(res, old)
            events.append((time.monotonic(), "complete", f"{time.monotonic() - start:.2f} s"))

        engine._apply = timed  # type: ignore[method-assign]
        engine.up(resources)
        stop.set()
        poller.join()
        first = min(t for t, _, _ in events)
        for t, name, state in sorted(events, key=lambda e: e[0]):
            print(f"{t - first:7.2f}  {name[:60]:60}  {state}")
        for event in plane.kube.items("v1", "Event", NAMESPACE):
            if event["involvedObject"]["kind"] == "Pod" and "Schedul" in str(event.get("reason")):
                print(f"event {event['reason']}: {event['involvedObject']['name']}: {event.get('message', '')[:160]}")
    finally:
        plane.stop()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "local")
