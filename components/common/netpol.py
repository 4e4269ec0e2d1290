"""Pieces every NetworkPolicy of the stack shares."""

from __future__ import annotations

from typing import Any

CLUSTER_DNS_PORT = 53


def dns_egress() -> dict[str, Any]:
    """The egress rule to the cluster's DNS (kube-system's ``k8s-app: kube-dns`` pods, CoreDNS on EKS), UDP and TCP:
    a pod whose policy lists its egress resolves names only through it."""
    return {
        "to": [
            {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
                "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
            }
        ],
        "ports": [
            {"port": CLUSTER_DNS_PORT, "protocol": "UDP"},
            {"port": CLUSTER_DNS_PORT, "protocol": "TCP"},
        ],
    }
