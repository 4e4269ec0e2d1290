"""The checks of ``tritonft preflight --stack NAME`` against a cluster (its front, which reads the stack, is
:mod:`stackcli.preflight`: what a stack needs is decided by ``components``, which the runtime never imports).

Checks: the API answers; GPU nodes with allocatable ``nvidia.com/gpu``; GPU nodes whose labels and taints match
the stack's selector and tolerations; for each GPU model a usable node with enough free GPUs for one pod; for each
``device: cpu`` model a schedulable non-GPU node matching ``cpuNodeSelector`` with the CPU and memory of one
replica unrequested; the storage class (and that it can be ReadWriteMany); the ingress class; the CRDs the stack's
features need; each model's ``hfTokenSecret`` (in the stack's namespace, with the key its download Job mounts); and
a server-side dry-run of every object of the plan (``tritonft synth``'s manifests) against the API server.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from tritonft.kube import ApiError, Kube
from tritonft.preflight import checks
from tritonft.preflight.checks import Check, Needs


def dry_run(kube: Kube, objs: list[dict[str, Any]], namespaces: set[str], crds_present: set[str]) -> Check:
    """Server-side dry-run of every object; objects of a namespace ``up`` would create are checked in ``default``,
    custom resources whose CRD the stack installs are counted as skipped."""

    failures: list[str] = []
    checked = skipped = 0
    for original in objs:
        obj = dict(original, metadata=dict(original["metadata"]))
        meta = obj["metadata"]
        group = obj["apiVersion"].split("/")[0] if "/" in obj["apiVersion"] else ""
        if "." in group and not group.endswith(".k8s.io") and not _crd_known(group, obj["kind"], crds_present):
            skipped += 1
            continue
        if meta.get("namespace") and meta["namespace"] not in namespaces:
            meta["namespace"] = "default"
        try:
            kube.apply(obj, dry_run=True)
            checked += 1
        except ApiError as exc:
            failures.append(f"{obj['kind']}/{meta['name']}: {exc.message}")
    if failures:
        more = f" (+{len(failures) - 3} more)" if len(failures) > 3 else ""
        return Check("dry-run", False, "; ".join(failures[:3]) + more)
    note = f", {skipped} custom resource(s) whose CRD the stack installs skipped" if skipped else ""
    return Check("dry-run", True, f"{checked} object(s) of the plan accepted by the API server{note}")


def _crd_known(group: str, kind: str, crds_present: set[str]) -> bool:
    return any(name.endswith(f".{group}") and name.split(".")[0].startswith(kind.lower()) for name in crds_present)


def preflight(needs: Needs, kube: Kube, plan: list[dict[str, Any]] | None) -> list[Check]:
    """Every check of what ``needs`` asks of the cluster, in order; the API check stops the rest when the server does
    not answer."""

    try:
        version = kube.request("GET", "/version")
    except (ApiError, OSError) as exc:
        return [Check("api", False, f"{kube.server} does not answer: {exc}")]
    results = [Check("api", True, f"{kube.server} (Kubernetes {version.get('gitVersion', '?')})")]
    nodes = kube.items("v1", "Node")
    pods = kube.items("v1", "Pod")
    results.append(checks.gpu_nodes(nodes, needs))
    results.append(checks.selector_and_taints(nodes, needs))
    results += checks.model_shapes_fit(nodes, pods, needs)
    results += checks.cpu_models_fit(nodes, pods, needs)
    results.append(checks.storage(kube.items("storage.k8s.io/v1", "StorageClass"), needs))
    results.append(checks.ingress(kube.items("networking.k8s.io/v1", "IngressClass"), needs))
    present = {c["metadata"]["name"] for c in kube.items("apiextensions.k8s.io/v1", "CustomResourceDefinition")}
    results.append(checks.crds(present, needs))
    gateways = (
        kube.items("gateway.networking.k8s.io/v1", "Gateway")
        if "gateways.gateway.networking.k8s.io" in present
        else None
    )
    results.append(checks.gateway(gateways, needs))
    services = {s["metadata"]["name"]: s for s in kube.items("apiregistration.k8s.io/v1", "APIService")}
    results.append(checks.metrics_apis(services, needs))
    for wanted in needs.token_secrets:
        results.append(checks.token_secret(wanted, needs.namespace, _secret(kube, wanted.secret, needs.namespace)))
    if plan is not None:
        namespaces = {n["metadata"]["name"] for n in kube.items("v1", "Namespace")}
        results.append(dry_run(kube, plan, namespaces, present))
    return results


def _secret(kube: Kube, name: str, namespace: str) -> dict[str, Any] | None:
    """The Secret, or None when the API server has none of that name in ``namespace`` (or no such namespace)."""
    try:
        found: dict[str, Any] = kube.get("v1", "Secret", name, namespace)
    except ApiError as exc:
        if exc.status == 404:
            return None
        raise
    return found


def load_plan(project_dir: Path, stack: str, assume_secrets: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    import yaml

    from tritonft.synth.run import synthesize

    with tempfile.TemporaryDirectory(prefix="tritonft-preflight-") as tmp:
        synthesize(stack, out=Path(tmp) / "plan", project_dir=project_dir, assume_secrets=assume_secrets)
        docs: list[dict[str, Any]] = []
        for path in sorted((Path(tmp) / "plan" / "manifests").rglob("*.yaml")):
            docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    order = {"Namespace": 0, "CustomResourceDefinition": 1}
    return sorted(docs, key=lambda d: order.get(d["kind"], 2))
