"""The in-cluster judge of a candidate version (pure): its Job, its pods' labels, its NetworkPolicy.

A candidate version is judged before the user-facing Services switch to it. No Triton of a generator has a route at
the edge (``components.common.edge.exposes_triton``), and no candidate of any model has one: the judge runs inside
the cluster, as a Job of the stack's namespace that runs ``tritonft judge`` (``tritonft.probe.in_cluster``: the
probe, with the settings the in-process probe would get) against the candidate's own Service on its HTTP port.

Who reaches what:

* the candidate's Triton admits the judge's pods of its own model (:func:`judge_selector`, by pod label, never a
  namespace) on 8000 only (``components.serving.server_spec.network_policy_spec``);
* the judge's pods reach cluster DNS and that model's Triton pods on 8000, nothing else (no Hub, no cloud metadata,
  no other model), and nothing reaches them (:func:`judge_network_policy_spec`);
* the judge's pods carry no service-account token and no secret: they need neither (Triton is asked directly, not
  through the edge's keys);
* a vLLM model's judge mounts the version's downloaded checkpoint read-only from the model store
  (:data:`CHECKPOINT_MOUNT`, by ``subPath`` as the gateway mounts it): it renders the reference's chats from the
  version's own ``tokenizer_config.json`` and template files, as the gateway renders a user's chat.

The Job is created and read by ``components.probe.in_cluster.InClusterJudge`` (its verdict: the Job's ``Complete``
or ``Failed``, and its pod's termination message), owned by the candidate's Deployment so that it goes with it.
"""

from __future__ import annotations

import math
from typing import Any

from components.common.layout import labels, selector
from components.common.netpol import dns_egress
from components.common.placement import away_from_gpu_nodes
from components.common.podsec import container_security_context, pod_security_context
from components.common.triton import HTTP_PORT
from components.serving.promotion import VERSION_LABEL
from tritonft.probe.in_cluster import CONFIG_ENV

JUDGE_COMPONENT = "judge"
"""``app.kubernetes.io/component`` of a judge's pods (a Triton pod's is ``triton``: no Service or policy of the
model's Triton selects them)."""
JOB_START_S = 300
"""Beyond the probe's own deadline: the tools image's pull and the pod's start on a node."""
CHECKPOINT_MOUNT = "/checkpoint"
"""Where a vLLM model's judge pod mounts the version's checkpoint directory (read-only)."""
JUDGE_RESOURCES = {"requests": {"cpu": "250m", "memory": "512Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}}


def judge_selector(instance: str) -> dict[str, str]:
    """The labels that select the judge's pods of one model (any version): what the model's Triton admits."""
    return selector(JUDGE_COMPONENT, instance)


def judge_pod_labels(instance: str, model: str, version: str) -> dict[str, str]:
    """A judge pod's labels: the recommended ones with component ``judge``, and the version it judges."""
    return {**labels(JUDGE_COMPONENT, instance, model), VERSION_LABEL: version}


def judge_job_name(candidate_service: str) -> str:
    """``<candidate service>-judge`` (the candidate Service's name is a DNS label of at most 63 characters; a Job's
    name may have 63 too, and its pods' ``job-name`` label the same)."""
    name = f"{candidate_service}-judge"
    if len(name) > 63:
        name = f"{candidate_service[: 63 - len('-judge')]}-judge"
    return name


def judge_job_manifest(
    *,
    name: str,
    namespace: str,
    pod_labels: dict[str, str],
    image: str,
    probe_settings_json: str,
    cpu_node_selector: dict[str, str],
    gpu_node_selector: dict[str, str],
    deadline_s: float,
    checkpoint: tuple[str, str] | None = None,
) -> dict[str, Any]:
    """The judge's Job: one pod, never retried on a verdict (a verdict is not retried into a pass; a disrupted pod is
    run again), on a CPU node, hardened,
    without a service-account token; bounded by the probe's deadline plus :data:`JOB_START_S`. ``checkpoint``: the
    model store's claim and the version's checkpoint ``subPath`` (a vLLM model's ``hf/<model>/<revision>``), mounted
    read-only at :data:`CHECKPOINT_MOUNT`."""
    mounts: list[dict[str, Any]] = [{"name": "tmp", "mountPath": "/tmp"}]
    volumes: list[dict[str, Any]] = [{"name": "tmp", "emptyDir": {"sizeLimit": "256Mi"}}]
    if checkpoint is not None:
        claim, subpath = checkpoint
        mounts.append({"name": "store", "mountPath": CHECKPOINT_MOUNT, "subPath": subpath, "readOnly": True})
        volumes.append({"name": "store", "persistentVolumeClaim": {"claimName": claim, "readOnly": True}})
    container = {
        "name": JUDGE_COMPONENT,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["tritonft", "judge"],
        "env": [{"name": CONFIG_ENV, "value": probe_settings_json}, {"name": "HOME", "value": "/tmp"}],
        "resources": JUDGE_RESOURCES,
        "securityContext": container_security_context(),
        # A crash before the verdict is written still leaves its last log lines as the message.
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "volumeMounts": mounts,
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(pod_labels)},
        "spec": {
            "backoffLimit": 0,
            # An evicted or preempted pod (a node drained by the autoscaler, a serving pod preempting it) is a
            # disruption, not a verdict: it is run again instead of failing the Job (and `up`) for no model reason.
            "podFailurePolicy": {
                "rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]
            },
            "activeDeadlineSeconds": math.ceil(deadline_s) + JOB_START_S,
            "template": {
                "metadata": {
                    "labels": dict(pod_labels),
                    # The node autoscaler never drains a node under a running judge (as under a conversion Job).
                    "annotations": {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"},
                },
                "spec": {
                    "restartPolicy": "Never",
                    "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    "securityContext": pod_security_context(),
                    "nodeSelector": dict(cpu_node_selector),
                    "affinity": away_from_gpu_nodes(gpu_node_selector),
                    "containers": [container],
                    "volumes": volumes,
                },
            },
        },
    }


def judge_network_policy_spec(judge_pods: dict[str, str], triton_pods: dict[str, str]) -> dict[str, Any]:
    """The judge's pods: nothing reaches them; they reach cluster DNS and their model's Triton pods on the HTTP
    port, and nothing else."""
    tcp = "TCP"
    return {
        "podSelector": {"matchLabels": dict(judge_pods)},
        "policyTypes": ["Ingress", "Egress"],
        "ingress": [],
        "egress": [
            dns_egress(),
            {
                "to": [{"podSelector": {"matchLabels": dict(triton_pods)}}],
                "ports": [{"port": HTTP_PORT, "protocol": tcp}],
            },
        ],
    }
