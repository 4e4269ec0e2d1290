"""How the stack's edge proxies survive a node drain or a zone's loss: a PodDisruptionBudget and a spread over nodes
and zones for the ``EnvoyProxy``'s two replicas (Envoy Gateway makes both for the proxies' Deployment from these
fields of the ``EnvoyProxy``).

Without them both replicas may land on one node (a drain, a managed node group's AMI roll, or that node's loss takes
the whole edge down at once) and a drain may evict both together. Envoy Gateway labels each proxy pod with the
Gateway it serves (``gateway.envoyproxy.io/owning-gateway-name``/``-namespace``): the spread counts those pods only.
"""

from __future__ import annotations

from typing import Any

OWNING_GATEWAY_NAME = "gateway.envoyproxy.io/owning-gateway-name"
OWNING_GATEWAY_NAMESPACE = "gateway.envoyproxy.io/owning-gateway-namespace"
SPREAD_KEYS = ("kubernetes.io/hostname", "topology.kubernetes.io/zone")


def proxy_pod_selector(gateway: str, namespace: str) -> dict[str, str]:
    """The labels Envoy Gateway puts on the proxy pods of one Gateway."""
    return {OWNING_GATEWAY_NAME: gateway, OWNING_GATEWAY_NAMESPACE: namespace}


def proxy_availability(gateway: str, namespace: str) -> dict[str, Any]:
    """The ``provider.kubernetes`` fields that keep one proxy serving: a PDB of ``minAvailable: 1`` (a drain evicts
    one at a time, waiting for its replacement) and a spread over nodes and zones (``ScheduleAnyway``: a cluster
    short of nodes or zones still runs both replicas, preferring distinct ones)."""
    selector = {"matchLabels": proxy_pod_selector(gateway, namespace)}
    return {
        "envoyPDB": {"minAvailable": 1},
        "envoyDeployment": {
            "pod": {
                "topologySpreadConstraints": [
                    {"maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": selector}
                    for key in SPREAD_KEYS
                ]
            }
        },
    }


def with_proxy_availability(spec: dict[str, Any], gateway: str, namespace: str) -> dict[str, Any]:
    """An ``EnvoyProxy`` spec with :func:`proxy_availability` merged into its ``provider.kubernetes`` (the
    deployment's other fields, its replicas, kept)."""
    kube = dict(spec["provider"]["kubernetes"])
    extra = proxy_availability(gateway, namespace)
    kube["envoyPDB"] = extra["envoyPDB"]
    kube["envoyDeployment"] = dict(kube.get("envoyDeployment", {})) | extra["envoyDeployment"]
    return spec | {"provider": spec["provider"] | {"kubernetes": kube}}
