"""A synthesized plan (``resources.json``) applied to the real API server by the rules the real Pulumi CLI follows
for ``up`` and ``destroy``, with a state carried from one ``up`` to the next.

The CLI's rules reproduced here (Pulumi's engine: the step generator and the deployment executor):

* **Order.** A resource's step runs only after the steps of every resource it depends on: its ``dependsOn``
  (explicit, and the resources whose outputs its inputs use, which ``tritonft synth`` records there too) and its
  parent. Pulumi runs independent steps in parallel; any serial order consistent with the dependencies is one of
  its schedules, and the one used here is the plan's registration order sorted topologically.
* **Same / update / replace / create.** A resource whose URN is in the state is compared with the providers' own
  rules (``tritonft diff``'s: ``tritonft.synth.plandiff.classify``): unchanged, it is left alone; changed in a field
  that forces a replacement (a Kubernetes object's ``metadata.name``, a Job's template, ...) it is **replaced**:
  the new object created first and the old one deleted at the end of a successful ``up`` (delete first when the
  name stays the same, as the Kubernetes provider does, or with ``deleteBeforeReplace``); otherwise updated in
  place (a Kubernetes object re-applied: a Service's selector is an update). A URN not in the state is created.
* **Pending deletes.** A replaced resource whose ``up`` failed before its deletion stays in the state marked for
  deletion, and the next ``up`` deletes it **first**, before any other step.
* **A failed step ends the ``up``.** Steps already done stay done and are recorded; nothing after it runs; **no
  deletion happens**.
* **Deletes last.** Only when every create and update succeeded are the state's resources that the program no
  longer declares deleted, dependents first (reverse dependency order of the state).
* **An interrupted ``up``** (``stop_after``) stops between two steps: what was done is recorded (the CLI writes the
  state after each step), nothing is deleted. An ``up`` killed *inside* a create can leave an object the state does
  not know (Pulumi's "pending operations"): not reproduced here.
* **``destroy``** deletes every resource in the state, dependents first.
* The Kubernetes provider deletes an object with foreground propagation (its pods go first) and waits for it to be
  gone; it applies a Deployment without awaiting
  it (``pulumi.com/skipAwait``, as the plan says), and awaits a Job's completion.

Dynamic resources run their provider's create/update through hooks the test gives (``dynamic``): the rollout
watch's real provider against this API server, the probe's judgement as the test decides.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from components.rollout_watch import RolloutWatchProvider
from tests.system.controlplane.plan import bind_store, install_crds, job_complete, retarget
from tritonft.kube import ApiError, Kube, wait_for
from tritonft.synth.plandiff import RULES, Action, _dynamic_rules, classify
from tritonft.synth.plandiff import load_plan as load_resources

K8S = "kubernetes:"
SKIPPED_K8S = ("kubernetes:helm.sh/", "kubernetes:core/v1:Namespace")
"""Kubernetes resources this engine does not apply: charts (the add-ons are not part of these tests) and the
namespace (the test's own, so that what a ``destroy`` leaves in it can be seen)."""

Dynamic = Callable[["Resource", "Resource | None"], None]
"""A dynamic resource's create (old None) or update: raises to fail the step."""


class InterruptedUpError(Exception):
    """The ``up`` was stopped between two steps (``stop_after``)."""


@dataclass(frozen=True)
class Resource:
    urn: str
    type: str
    name: str
    parent: str
    depends_on: tuple[str, ...]
    inputs: Mapping[str, Any]
    raw: Mapping[str, Any]

    @classmethod
    def of(cls, raw: Mapping[str, Any]) -> Resource:
        return cls(
            urn=str(raw["urn"]),
            type=str(raw["type"]),
            name=str(raw["name"]),
            parent=str(raw.get("parent") or ""),
            depends_on=tuple(raw.get("options", {}).get("dependsOn") or ()),
            inputs=raw.get("inputs") or {},
            raw=raw,
        )

    @property
    def applied(self) -> bool:
        """A Kubernetes object this engine creates on the API server."""
        return self.type.startswith(K8S) and not self.type.startswith(SKIPPED_K8S) and "kind" in self.inputs


def program(plan_dir: Path) -> list[Resource]:
    """The plan's resources in an order Pulumi may run their steps in (dependencies first)."""
    resources = [Resource.of(r) for r in load_resources(plan_dir)]
    return topological(resources)


def topological(resources: Sequence[Resource]) -> list[Resource]:
    by_urn = {r.urn: r for r in resources}
    done: set[str] = set()
    order: list[Resource] = []

    def visit(res: Resource, path: tuple[str, ...]) -> None:
        if res.urn in done:
            return
        if res.urn in path:
            raise ValueError(f"dependency cycle through {res.name}")
        for dep in (*res.depends_on, res.parent):
            if dep in by_urn:
                visit(by_urn[dep], (*path, res.urn))
        done.add(res.urn)
        order.append(res)

    for res in resources:
        visit(res, ())
    return order


@dataclass
class Engine:
    """One stack's state on one namespace of the real API server."""

    kube: Kube
    namespace: str
    plan_namespace: str
    dynamic: Mapping[str, Dynamic]
    """Dynamic resource type (``pulumi-python:dynamic/tritonft:RolloutWatch``) -> its create/update."""
    state: dict[str, Resource] = field(default_factory=dict)
    """URN -> the resource as last created or updated, in the order the steps ran."""
    log: list[str] = field(default_factory=list)
    """Every step taken: ``create <name>``, ``update <name>``, ``replace <name>``, ``delete <name>``."""
    pending_deletes: list[Resource] = field(default_factory=list)
    """Replaced resources not deleted yet (deleted at the end of a successful ``up``, or first in the next one)."""

    def manifest(self, res: Resource) -> dict[str, Any]:
        (obj,) = retarget([dict(res.inputs)], self.plan_namespace, self.namespace)
        return obj

    def up(self, resources: Sequence[Resource], *, stop_after: Callable[[str], bool] | None = None) -> None:
        """``pulumi up``: creates and updates in dependency order, then the deletes; raises on the first failure."""
        install_crds(
            self.kube,
            (r.inputs["kind"] for r in resources if r.applied),
            (str(r.inputs["apiVersion"]).split("/")[0] for r in resources if r.applied),
        )
        while self.pending_deletes:
            self._delete(self.pending_deletes.pop(0))
        rules = {**RULES, **_dynamic_rules()}
        for res in resources:
            old = self.state.get(res.urn)
            action = "create" if old is None else str(classify(old.raw, res.raw, rules).action)
            if action == Action.SAME:
                self.state[res.urn] = res
                continue
            if action == Action.REPLACE and old is not None:
                renamed = not (old.applied and res.applied) or (
                    self.manifest(old)["metadata"]["name"] != self.manifest(res)["metadata"]["name"]
                )
                if renamed and not (res.raw.get("options") or {}).get("deleteBeforeReplace"):
                    self.pending_deletes.append(old)  # create before delete: the old one goes at the end
                else:
                    self._delete(old)
                self._apply(res, None)
            else:
                self._apply(res, old)
            self.state[res.urn] = res
            self.log.append(f"{action} {res.name}")
            if stop_after is not None and stop_after(f"{action} {res.name}"):
                raise InterruptedUpError(f"up stopped after: {action} {res.name}")
        while self.pending_deletes:
            self._delete(self.pending_deletes.pop(0))
        declared = {r.urn for r in resources}
        for urn in reversed(list(self.state)):
            if urn not in declared:
                self._delete(self.state.pop(urn))

    def destroy(self) -> None:
        """``pulumi destroy``: every resource of the state (and those pending deletion), dependents first."""
        while self.pending_deletes:
            self._delete(self.pending_deletes.pop(0))
        for urn in reversed(list(self.state)):
            self._delete(self.state.pop(urn))

    def _apply(self, res: Resource, old: Resource | None) -> None:
        if res.type in self.dynamic:
            self.dynamic[res.type](res, old)
            return
        if not res.applied:
            return  # components, charts, random values, images: nothing on this API server
        obj = self.manifest(res)
        try:
            self.kube.apply(obj)
        except ApiError as exc:
            raise ApiError(exc.status, f"{obj['kind']}/{obj['metadata']['name']}: {exc.message}") from None
        kind, meta = obj["kind"], obj["metadata"]
        if kind == "PersistentVolumeClaim":
            bind_store(self.kube, [obj], pv_prefix=self.namespace)
        if kind == "Job":
            wait_for(
                f"Job {meta['name']} to complete",
                functools.partial(job_complete, self.kube, meta["namespace"], meta["name"]),
                90,
            )

    def _delete(self, res: Resource) -> None:
        self.log.append(f"delete {res.name}")
        if not res.applied:
            return
        obj = self.manifest(res)
        api_version, kind, meta = obj["apiVersion"], obj["kind"], obj["metadata"]
        namespace = meta.get("namespace")
        try:
            self.kube.request(
                "DELETE",
                self.kube.path(api_version, kind, namespace, meta["name"]),
                params={"propagationPolicy": "Foreground"},
            )
        except ApiError as exc:
            if exc.status != 404:
                raise
        wait_for(
            f"{kind} {meta['name']} to be gone",
            lambda: not exists(self.kube, api_version, kind, meta["name"], namespace),
            90,
        )


def exists(kube: Kube, api_version: str, kind: str, name: str, namespace: str | None) -> bool:
    try:
        kube.get(api_version, kind, name, namespace)
    except ApiError as exc:
        if exc.status == 404:
            return False
        raise
    return True


def named(resources: Iterable[Resource], kind: str, instance: str) -> list[Resource]:
    """The plan's Kubernetes objects of ``kind`` labelled ``app.kubernetes.io/instance: <instance>``."""
    return [
        r
        for r in resources
        if r.applied
        and r.inputs["kind"] == kind
        and (r.inputs["metadata"].get("labels") or {}).get("app.kubernetes.io/instance") == instance
    ]


def rollout_watch(namespace: str, kubeconfig: str) -> Dynamic:
    """The RolloutWatch step as the real provider runs it, on the test's namespace of this API server: a 5 s grace
    and a 0.2 s poll (a rollout here takes a fraction of a second; the decisions are the program's)."""

    def watch(res: Resource, old: Resource | None) -> None:
        props = {
            **res.inputs,
            "namespace": namespace,
            "kubeconfig": kubeconfig,
            "context": None,
            "grace_s": 5.0,
            "poll_s": 0.2,
        }
        if old is None:
            RolloutWatchProvider().create(dict(props))
        else:
            RolloutWatchProvider().update(res.urn, dict(old.inputs), dict(props))

    return watch
