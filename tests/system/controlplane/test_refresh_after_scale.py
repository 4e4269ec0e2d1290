"""`refresh` of `local` after a scale: the real kube-apiserver bumps the Deployment's generation; the rollout watch's
inputs, so its diff, do not move.

The Triton Deployment of `local`'s plan is applied to the real API server and scaled through the scale subresource
(what an HPA writes). The server bumps ``metadata.generation``. A ``pulumi refresh`` reads that live object into the
Deployment's state; the program is then run under the mock engine with the Deployment's state being that live
object, before and after the scale, and the rollout watch's inputs compared with its provider's own ``diff``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from components.rollout_watch import RolloutWatchProvider
from tests.plans import StackPlans
from tests.system.controlplane.fixtures import Cluster
from tests.system.controlplane.plan import load_plan, retarget, served_deployment
from tests.system.controlplane.server import REPO
from tritonft.synth import run
from tritonft.synth.engine import RecordingMocks
from tritonft.synth.plandiff import load_plan as load_resources

WATCH = "pulumi-python:dynamic/tritonft:RolloutWatch"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"


class LiveDeployments(RecordingMocks):
    """The engine's state after `pulumi refresh`: each Deployment's metadata as the API server holds it."""

    def __init__(self, live: dict[str, dict[str, Any]]) -> None:
        super().__init__()
        self.live = live

    def new_resource(self, args: Any) -> tuple[str | None, dict[Any, Any]]:
        rid, state = super().new_resource(args)
        name = (args.inputs.get("metadata") or {}).get("name")
        if args.typ == DEPLOYMENT and name in self.live:
            state["metadata"] = self.live[name]["metadata"]
            state["status"] = self.live[name].get("status", {})
        return rid, state


def watch_inputs(live: dict[str, dict[str, Any]], out: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Every rollout watch's inputs when the program runs against ``live`` Deployments."""
    monkeypatch.setattr(run, "RecordingMocks", lambda: LiveDeployments(live))
    run.synthesize("local", out=out, project_dir=REPO, extras=())
    return {r["name"]: r["inputs"] for r in load_resources(out) if r["type"] == WATCH}


def test_refresh_after_a_scale_shows_no_diff_on_the_rollout_watch(
    cluster: Cluster, stack_plan: StackPlans, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    objs = retarget(load_plan(stack_plan("local").out / "manifests"), "triton-local", cluster.namespace)
    name = served_deployment(objs, "local-t5-small")  # keyed by its serving version
    (deployment,) = [o for o in objs if o["kind"] == "Deployment" and o["metadata"]["name"] == name]
    cluster.kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": cluster.namespace}})
    before = cluster.kube.apply(deployment)

    path = cluster.kube.path("apps/v1", "Deployment", cluster.namespace, name) + "/scale"
    replicas = int(before["spec"]["replicas"]) + 2
    cluster.kube.request(
        "PATCH", path, body={"spec": {"replicas": replicas}}, content_type="application/merge-patch+json"
    )
    after = cluster.kube.get("apps/v1", "Deployment", name, cluster.namespace)
    assert after["spec"]["replicas"] == replicas
    assert after["metadata"]["generation"] > before["metadata"]["generation"], "the scale bumps the generation"

    old = watch_inputs({name: dict(before)}, tmp_path / "before", monkeypatch)
    new = watch_inputs({name: dict(after)}, tmp_path / "after", monkeypatch)
    assert set(old) == set(new) and "local-t5-small-rollout" in new
    for name in new:
        assert RolloutWatchProvider().diff(name, old[name], new[name]).changes is False, name
    assert old == new
