"""Hand-built Kubernetes resources in Pulumi wire format (camelCase), compliant unless told otherwise.

Shared by the pure-check tests (project venv) and the CrossGuard policy tests (.tools/policy venv): standard
library only.
"""

from __future__ import annotations

import copy
import hashlib
from typing import Any

DIGEST = hashlib.sha256(b"tritonserver:23.04-ft").hexdigest()
PINNED_IMAGE = f"nvcr.io/nvidia/tritonserver:23.04-py3@sha256:{DIGEST}"
GPU = "nvidia.com/gpu"
Typed = tuple[str, dict[str, Any]]
"""A resource as the engine sees it: (type token, wire-format props)."""
GPU_TOLERATION: dict[str, str] = {"key": GPU, "operator": "Exists", "effect": "NoSchedule"}

WORKLOAD_KINDS: dict[str, str] = {
    "Deployment": "kubernetes:apps/v1:Deployment",
    "StatefulSet": "kubernetes:apps/v1:StatefulSet",
    "DaemonSet": "kubernetes:apps/v1:DaemonSet",
    "Job": "kubernetes:batch/v1:Job",
    "CronJob": "kubernetes:batch/v1:CronJob",
    "Pod": "kubernetes:core/v1:Pod",
}


def container(
    name: str = "triton",
    image: str = PINNED_IMAGE,
    *,
    gpus: int = 0,
    env: list[dict[str, Any]] | None = None,
    resources: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A container with cpu/memory requests and limits (and ``gpus`` GPUs as limit and request)."""
    if resources is None:
        resources = {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"cpu": "2", "memory": "4Gi"}}
        if gpus:
            resources["requests"][GPU] = str(gpus)
            resources["limits"][GPU] = str(gpus)
    body: dict[str, Any] = {"name": name, "image": image, "resources": resources}
    if env is not None:
        body["env"] = env
    return body


def pod_spec(
    *containers: dict[str, Any],
    init: list[dict[str, Any]] | None = None,
    tolerations: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A pod spec; GPU pods get the GPU toleration unless ``tolerations`` is given."""
    main = list(containers) or [container()]
    spec: dict[str, Any] = {"containers": main}
    if init:
        spec["initContainers"] = init
    wants_gpu = any(GPU in c.get("resources", {}).get("limits", {}) for c in [*main, *(init or [])])
    if tolerations is not None:
        spec["tolerations"] = tolerations
    elif wants_gpu:
        spec["tolerations"] = [dict(GPU_TOLERATION)]
    return spec


def workload(kind: str, spec: dict[str, Any], name: str = "triton", namespace: str = "triton") -> Typed:
    """``(type token, props)`` of a workload of ``kind`` running ``spec``."""
    metadata = {"name": name, "namespace": namespace}
    template = {"metadata": {"labels": {"app": name}}, "spec": spec}
    if kind == "Pod":
        props: dict[str, Any] = {"metadata": metadata, "spec": spec}
    elif kind == "CronJob":
        props = {
            "metadata": metadata,
            "spec": {"schedule": "0 3 * * *", "jobTemplate": {"spec": {"template": template}}},
        }
    elif kind == "Job":
        props = {"metadata": metadata, "spec": {"backoffLimit": 2, "template": template}}
    else:
        props = {"metadata": metadata, "spec": {"selector": {"matchLabels": {"app": name}}, "template": template}}
    return WORKLOAD_KINDS[kind], props


def manifest(typ: str, props: dict[str, Any]) -> dict[str, Any]:
    """The manifest ``kubectl`` would apply for ``(typ, props)``."""
    _, group_version, kind = typ.split(":")
    api_version = group_version.removeprefix("core/")
    return {"apiVersion": api_version, "kind": kind, **copy.deepcopy(props)}


def ingress(hosts: list[str], tls_hosts: list[str] | None) -> Typed:
    spec: dict[str, Any] = {
        "ingressClassName": "nginx",
        "rules": [
            {
                "host": host,
                "http": {
                    "paths": [
                        {
                            "path": "/",
                            "pathType": "Prefix",
                            "backend": {"service": {"name": "triton", "port": {"number": 8000}}},
                        }
                    ]
                },
            }
            for host in hosts
        ],
    }
    if tls_hosts is not None:
        spec["tls"] = [{"hosts": tls_hosts, "secretName": "triton-tls"}]
    return "kubernetes:networking.k8s.io/v1:Ingress", {
        "metadata": {"name": "triton", "namespace": "triton"},
        "spec": spec,
    }


def http_route(labels: dict[str, str]) -> Typed:
    """An HTTPRoute sending ``/v1`` of a host to the gateway's Service."""
    return "kubernetes:gateway.networking.k8s.io/v1:HTTPRoute", {
        "metadata": {"name": "api", "namespace": "triton", "labels": dict(labels)},
        "spec": {
            "parentRefs": [{"name": "edge"}],
            "hostnames": ["triton.example.com"],
            "rules": [
                {
                    "matches": [{"path": {"type": "PathPrefix", "value": "/v1"}}],
                    "backendRefs": [{"name": "gateway", "port": 8080}],
                }
            ],
        },
    }


def security_policy(**spec: Any) -> Typed:
    """An Envoy Gateway SecurityPolicy with ``spec``."""
    return "kubernetes:gateway.envoyproxy.io/v1alpha1:SecurityPolicy", {
        "metadata": {"name": "policy", "namespace": "triton"},
        "spec": dict(spec),
    }


def hpa(version: str = "v2", behavior: dict[str, Any] | None = None) -> Typed:
    spec: dict[str, Any] = {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "triton"},
        "minReplicas": 1,
        "maxReplicas": 4,
    }
    if behavior is not None:
        spec["behavior"] = behavior
    typ = f"kubernetes:autoscaling/{version}:HorizontalPodAutoscaler"
    return typ, {"metadata": {"name": "triton", "namespace": "triton"}, "spec": spec}


SCALE_DOWN_SLOWLY: dict[str, Any] = {"scaleDown": {"stabilizationWindowSeconds": 600}}


def pvc(name: str = "model-store") -> Typed:
    return "kubernetes:core/v1:PersistentVolumeClaim", {
        "metadata": {"name": name, "namespace": "triton"},
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "storageClassName": "efs-sc",
            "resources": {"requests": {"storage": "100Gi"}},
        },
    }


def efs() -> Typed:
    return "aws:efs/fileSystem:FileSystem", {"encrypted": True, "performanceMode": "generalPurpose"}


def secret_env(name: str = "HF_TOKEN") -> dict[str, Any]:
    return {"name": name, "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token"}}}
