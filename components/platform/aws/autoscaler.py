"""The node autoscaler of ``platform: aws``: cluster-autoscaler on the managed node groups' Auto Scaling groups.

Why cluster-autoscaler and not Karpenter: the stack's GPU capacity is already EKS managed node groups whose
``minSize``/``maxSize`` are ``gpuNodesMin``/``gpuNodesMax``; cluster-autoscaler moves only ``desiredSize`` within
those bounds (so the two keys mean exactly what they say, and the capacity checks in
``components.settings.capacity`` count the same nodes the autoscaler can add), discovers the groups by the tags
EKS puts on their Auto Scaling groups, and learns a group's labels, taints and GPUs from
``eks:DescribeNodegroup`` (scale-up from zero included).
Karpenter (DoEKS's choice) would replace the node groups with NodePools + EC2NodeClasses, an SQS interruption
queue and an IAM policy that may launch any instance; the NVIDIA tutorial on EKS (TUT-LWS) uses
cluster-autoscaler with managed node groups, as here. The IAM policy is the upstream minimum: read-only
``Describe*`` calls, and the two writes (set the desired size, terminate an instance) only on Auto Scaling groups
tagged as this cluster's. The role is reached through IRSA, the mechanism the stack already uses for the EFS
CSI driver (the cluster's OIDC provider exists; Pod Identity would add an EKS add-on for one more role).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.platform.aws import charts
from components.platform.aws.addons import install_chart
from components.platform.aws.iam import irsa_role
from components.platform.aws.nodegroups import POOL_LABEL, SYSTEM_POOL
from components.settings.chart_facts import AUTOSCALER_RELEASES, AutoscalerRelease, autoscaler_release

SERVICE_ACCOUNT = "cluster-autoscaler"


RELEASES: dict[str, AutoscalerRelease] = AUTOSCALER_RELEASES
"""Per Kubernetes minor, cluster-autoscaler's chart and image (read facts: ``components/settings/chart_facts.py``,
where the settings refuse a minor without one when a node group may grow)."""
IMAGE_TAGS = {minor: release.image for minor, release in RELEASES.items()}
SCALE_DOWN_UNNEEDED = "10m"
"""A GPU node idle this long (no Triton pod) is removed; shorter than a model's cold start would thrash."""


def release_for(kubernetes_version: str) -> AutoscalerRelease | None:
    """The cluster-autoscaler release for a Kubernetes ``major.minor``; None when we pin none for it."""
    return autoscaler_release(kubernetes_version)


def image_tag(kubernetes_version: str) -> str | None:
    """The cluster-autoscaler image for a Kubernetes ``major.minor``; None when we pin none for it."""
    release = release_for(kubernetes_version)
    return None if release is None else release.image


def chart_pin(kubernetes_version: str) -> charts.ChartPin:
    """The pinned chart of the cluster's minor (:data:`RELEASES`); raises ``KeyError`` for a minor without one
    (the platform's validation refuses it first)."""
    release = release_for(kubernetes_version)
    if release is None:
        raise KeyError(kubernetes_version)
    return replace(charts.CLUSTER_AUTOSCALER, version=release.chart)


def autoscaler_policy(cluster_name: str, node_group_arns: Sequence[str]) -> str:
    """Least privilege: describe anything, write only to this cluster's tagged groups, read only its node groups."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Sid": "Discover",
                    "Effect": "Allow",
                    "Action": [
                        "autoscaling:DescribeAutoScalingGroups",
                        "autoscaling:DescribeAutoScalingInstances",
                        "autoscaling:DescribeLaunchConfigurations",
                        "autoscaling:DescribeScalingActivities",
                        "autoscaling:DescribeTags",
                        "ec2:DescribeImages",
                        "ec2:DescribeInstanceTypes",
                        "ec2:DescribeLaunchTemplateVersions",
                        "ec2:GetInstanceTypesFromInstanceRequirements",
                    ],
                    "Resource": "*",
                },
                {
                    "Sid": "ScaleOwnGroups",
                    "Effect": "Allow",
                    "Action": ["autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup"],
                    "Resource": "*",
                    "Condition": {
                        "StringEquals": {f"aws:ResourceTag/k8s.io/cluster-autoscaler/{cluster_name}": "owned"}
                    },
                },
                {
                    "Sid": "ReadOwnNodeGroups",
                    "Effect": "Allow",
                    "Action": ["eks:DescribeNodegroup"],
                    "Resource": sorted(node_group_arns),
                },
            ],
        },
        sort_keys=True,
    )


CA_GRACEFUL_TERMINATION_S = 600
"""cluster-autoscaler's own ``max-graceful-termination-sec`` default: how long it lets a pod of a node it drains
terminate before it kills it."""


def autoscaler_values(
    cluster_name: str,
    region: str,
    role_arn: str,
    kubernetes_version: str,
    longest_pod_grace_seconds: int = CA_GRACEFUL_TERMINATION_S,
) -> dict[str, Any]:
    """cluster-autoscaler on the system nodes, scaling the groups EKS tagged as this cluster's.

    * scale-up: a pending pod (a Triton pod short of GPUs) makes it raise the smallest fitting group
      (``least-waste``), at once (``new-pod-scale-up-delay`` 0);
    * scale-down: a GPU node without Triton pods for ``SCALE_DOWN_UNNEEDED`` is drained and removed, never below
      ``gpuNodesMin``; ``skip-nodes-with-local-storage`` is off because Triton pods carry emptyDirs (``/dev/shm``)
      and a node holding them would otherwise never be removed; a drained pod gets its whole grace period
      (``max-graceful-termination-sec``: the stack's longest, ``longest_pod_grace_seconds``, at least the default
      600 s), so a node removed under a Triton pod still streaming a long vLLM answer (prod: ~15 min) does not cut it.
    """
    return {
        "cloudProvider": "aws",
        "awsRegion": region,
        "autoDiscovery": {
            "clusterName": cluster_name,
            "tags": ["k8s.io/cluster-autoscaler/enabled", f"k8s.io/cluster-autoscaler/{cluster_name}"],
        },
        "image": {"tag": image_tag(kubernetes_version)},
        "rbac": {
            "serviceAccount": {
                "create": True,
                "name": SERVICE_ACCOUNT,
                "annotations": {"eks.amazonaws.com/role-arn": role_arn},
            }
        },
        "extraArgs": {
            "expander": "least-waste",
            "balance-similar-node-groups": True,
            "new-pod-scale-up-delay": "0s",
            "max-node-provision-time": "15m",
            "scale-down-enabled": True,
            "scale-down-unneeded-time": SCALE_DOWN_UNNEEDED,
            "scale-down-delay-after-add": SCALE_DOWN_UNNEEDED,
            "scale-down-utilization-threshold": 0.5,
            "skip-nodes-with-local-storage": False,
            "max-graceful-termination-sec": max(CA_GRACEFUL_TERMINATION_S, longest_pod_grace_seconds),
        },
        "nodeSelector": {POOL_LABEL: SYSTEM_POOL},
        "priorityClassName": "system-cluster-critical",
    }


def install_node_autoscaler(
    name: str,
    *,
    cluster_name: str,
    region: str,
    kubernetes_version: str,
    longest_pod_grace_seconds: int,
    node_groups: Sequence[aws.eks.NodeGroup],
    oidc_provider_arn: pulumi.Input[str],
    oidc_provider_url: pulumi.Input[str],
    aws_provider: aws.Provider,
    k8s_provider: k8s.Provider,
    parent: pulumi.Resource,
    depends_on: Sequence[pulumi.Resource],
) -> k8s.helm.v4.Chart:
    """The IRSA role with :func:`autoscaler_policy` and the pinned chart with :func:`autoscaler_values`."""
    pin = chart_pin(kubernetes_version)
    role = irsa_role(
        f"{name}-cluster-autoscaler",
        oidc_provider_arn=oidc_provider_arn,
        oidc_provider_url=oidc_provider_url,
        namespace=pin.namespace,
        service_account=SERVICE_ACCOUNT,
        inline_policy=pulumi.Output.all(*[g.arn for g in node_groups]).apply(
            lambda arns: autoscaler_policy(cluster_name, [str(a) for a in arns])
        ),
        provider=aws_provider,
        parent=parent,
    )
    values = role.arn.apply(
        lambda arn: autoscaler_values(cluster_name, region, arn, kubernetes_version, longest_pod_grace_seconds)
    )
    chart, _ = install_chart(
        f"{name}-cluster-autoscaler",
        pin,
        values,
        provider=k8s_provider,
        parent=parent,
        depends_on=depends_on,
    )
    return chart
