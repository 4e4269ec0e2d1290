"""``tritonft startup-budget``: where each Triton replica's start-up seconds went, read from a live cluster.

Reads the Deployment's pods, the namespace's events and (unless ``--no-logs``) each server container's log, and
prints one row per pod (:func:`tritonft.rollout.startup.render_table`), or JSON with ``--json``.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from tritonft.errors import UserError
from tritonft.kube import ApiError, Kube
from tritonft.rollout.startup import SERVER_CONTAINER, PodStartup, pod_startup, render_table, triton_load, with_triton

LOG_LIMIT_BYTES = 8 << 20
"""The start of the server's log read for its model loads (they are its first lines; a verbose log grows without
end)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--namespace", required=True, help="the stack's namespace")
    parser.add_argument("--deployment", required=True, help="the Triton Deployment (e.g. prod-t5-3b)")
    parser.add_argument("--kubeconfig", default=None, help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config)")
    parser.add_argument("--context", default=None, help="kubeconfig context (default: its current context)")
    parser.add_argument("--container", default=SERVER_CONTAINER, help="the server container's name")
    parser.add_argument("--no-logs", action="store_true", help="do not read Triton's log (per-model load times)")
    parser.add_argument("--json", action="store_true", help="print JSON (pod -> stages) instead of a table")


def server_log(kube: Kube, namespace: str, pod: str, container: str) -> str | None:
    """The server container's log (None when the node's kubelet cannot give it, e.g. a simulated node)."""
    path = kube.path("v1", "Pod", namespace, pod) + "/log"
    try:
        text = kube.request("GET", path, params={"container": container, "limitBytes": str(LOG_LIMIT_BYTES)})
    except (ApiError, OSError):
        return None
    return text if isinstance(text, str) else None


def deployment_startups(
    kube: Kube, namespace: str, deployment: str, *, container: str = SERVER_CONTAINER, logs: bool = True
) -> list[PodStartup]:
    """The start-up budget of each current pod of ``deployment`` (oldest first)."""
    from tritonft.rollout.watch import selector_of

    try:
        found = kube.get("apps/v1", "Deployment", deployment, namespace)
    except ApiError as exc:
        if exc.status == 404:
            raise UserError(
                f"--deployment {deployment}: no such Deployment in namespace {namespace}; list them with "
                f"`kubectl get deploy -n {namespace}`"
            ) from None
        raise
    pods: list[Any] = [
        p for p in kube.items("v1", "Pod", namespace, selector_of(found)) if not p["metadata"].get("deletionTimestamp")
    ]
    pods.sort(key=lambda p: (p["metadata"]["creationTimestamp"], p["metadata"]["name"]))
    try:
        events = kube.items("v1", "Event", namespace)
    except ApiError:  # an identity that may not list events: the stages still come from the pods
        events = []
    out = []
    for pod in pods:
        startup = pod_startup(pod, events, container=container)
        text = server_log(kube, namespace, pod["metadata"]["name"], container) if logs else None
        out.append(with_triton(startup, triton_load(text)) if text else startup)
    return out


def run(args: argparse.Namespace) -> int:
    from tritonft.kube import from_kubeconfig

    kube = from_kubeconfig(args.kubeconfig, args.context)
    startups = deployment_startups(
        kube, args.namespace, args.deployment, container=args.container, logs=not args.no_logs
    )
    if args.json:
        print(json.dumps({s.pod: s.as_output() for s in startups}, indent=2, sort_keys=True))
    elif not startups:
        print(f"Deployment {args.namespace}/{args.deployment} has no pods")
    else:
        print(render_table(startups))
    return 0
