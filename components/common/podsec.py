"""Hardened pod and container security settings shared by every workload (pure, no Pulumi).

Non-root with a high UID (checkov CKV_K8S_40; also keeps files on the shared store owned by one user across the
conversion Jobs and the servers), no privilege escalation, every capability dropped, the runtime's default seccomp
profile and a read-only root filesystem (writable paths are explicit emptyDirs).
"""

from __future__ import annotations

from typing import Any, Literal

RUN_AS_USER = 10001
"""UID/GID of every triton-ft container; the store's files are written and read by this user."""

PodSecurityLevel = Literal["privileged", "baseline", "restricted"]
"""A Pod Security Standards level, as the Pod Security Admission labels name it."""
WORKLOAD_POD_SECURITY: PodSecurityLevel = "restricted"
"""Enforced on the stack's own namespace: every pod the stack runs there (Triton, its GEMM tuning, the gateway, the
conversion Jobs) meets it with the contexts below."""


def namespace_labels(enforce: PodSecurityLevel = WORKLOAD_POD_SECURITY) -> dict[str, str]:
    """Pod Security Admission labels of a namespace the stack creates: enforce ``enforce``, warn and audit at
    ``restricted`` (so a chart's pods that need more than ``restricted`` are named in warnings and the audit log)."""
    return {
        "app.kubernetes.io/managed-by": "triton-ft",
        "pod-security.kubernetes.io/enforce": enforce,
        "pod-security.kubernetes.io/warn": "restricted",
        "pod-security.kubernetes.io/audit": "restricted",
    }


def pod_security_context() -> dict[str, Any]:
    """Pod-level: non-root, fixed UID/GID, ``fsGroup`` so the store volume is group-writable, RuntimeDefault seccomp."""
    return {
        "runAsNonRoot": True,
        "runAsUser": RUN_AS_USER,
        "runAsGroup": RUN_AS_USER,
        "fsGroup": RUN_AS_USER,
        "fsGroupChangePolicy": "OnRootMismatch",
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def container_security_context() -> dict[str, Any]:
    """Container-level: no escalation, no capabilities, read-only root filesystem."""
    return {
        "runAsNonRoot": True,
        "runAsUser": RUN_AS_USER,
        "runAsGroup": RUN_AS_USER,
        "allowPrivilegeEscalation": False,
        "privileged": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }
