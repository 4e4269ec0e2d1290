"""IAM for the platform: the node role and IRSA roles (pods that call AWS get their own narrow role)."""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pulumi_aws as aws

NODE_POLICIES = (
    "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
    "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly",
)
"""Managed policies every EKS worker needs: join the cluster, pull from ECR. Pod networking's policy
(:data:`CNI_POLICY`, any network interface in the account) is not here: the VPC CNI's ``aws-node`` gets it through
its own IRSA role; SSM (:data:`SSM_POLICY`, ``ssm:GetParameter*`` on ``*``) only when ``nodeSsmAccess`` asks."""
CNI_POLICY = "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy"
SSM_POLICY = "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore"


def node_policies(ssm_access: bool) -> tuple[str, ...]:
    """The node role's managed policies: :data:`NODE_POLICIES`, plus SSM's when break-glass access is wanted."""
    return NODE_POLICIES + ((SSM_POLICY,) if ssm_access else ())


def ec2_trust_policy() -> str:
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}
            ],
        }
    )


def irsa_trust_policy(oidc_provider_arn: str, oidc_provider_url: str, namespace: str, service_account: str) -> str:
    """Trust policy letting exactly one Kubernetes service account assume the role through the cluster's OIDC."""
    issuer = oidc_provider_url.removeprefix("https://")
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Federated": oidc_provider_arn},
                    "Action": "sts:AssumeRoleWithWebIdentity",
                    "Condition": {
                        "StringEquals": {
                            f"{issuer}:sub": f"system:serviceaccount:{namespace}:{service_account}",
                            f"{issuer}:aud": "sts.amazonaws.com",
                        }
                    },
                }
            ],
        }
    )


def node_role(name: str, provider: aws.Provider, parent: pulumi.Resource, *, ssm_access: bool = False) -> aws.iam.Role:
    """The role EC2 worker nodes run with (managed node groups get their access entry from EKS automatically)."""
    role = aws.iam.Role(
        f"{name}-node-role",
        assume_role_policy=ec2_trust_policy(),
        description="EKS worker nodes of triton-ft",
        opts=pulumi.ResourceOptions(parent=parent, provider=provider),
    )
    for i, arn in enumerate(node_policies(ssm_access)):
        aws.iam.RolePolicyAttachment(
            f"{name}-node-policy-{i}",
            role=role.name,
            policy_arn=arn,
            opts=pulumi.ResourceOptions(parent=role, provider=provider),
        )
    return role


def irsa_role(
    name: str,
    *,
    oidc_provider_arn: pulumi.Input[str],
    oidc_provider_url: pulumi.Input[str],
    namespace: str,
    service_account: str,
    policy_arns: tuple[str, ...] = (),
    inline_policy: pulumi.Input[str] | None = None,
    provider: aws.Provider,
    parent: pulumi.Resource,
) -> aws.iam.Role:
    """An IAM role for one service account (IRSA): resource ``<name>-irsa`` with the managed ``policy_arns``
    attached (``<name>-irsa-policy-<i>``) and, when given, the JSON ``inline_policy`` as its own policy
    (``<name>-policy``, under the role). Every pod that calls AWS gets one: the cluster autoscaler and external-dns
    (their narrow inline policies), the VPC CNI's ``aws-node``, the EBS and EFS CSI drivers (AWS's managed ones)."""
    trust: pulumi.Output[Any] = pulumi.Output.all(oidc_provider_arn, oidc_provider_url).apply(
        lambda a: irsa_trust_policy(str(a[0]), str(a[1]), namespace, service_account)
    )
    role = aws.iam.Role(
        f"{name}-irsa",
        assume_role_policy=trust,
        description=f"IRSA for {namespace}/{service_account}",
        opts=pulumi.ResourceOptions(parent=parent, provider=provider),
    )
    for i, arn in enumerate(policy_arns):
        aws.iam.RolePolicyAttachment(
            f"{name}-irsa-policy-{i}",
            role=role.name,
            policy_arn=arn,
            opts=pulumi.ResourceOptions(parent=role, provider=provider),
        )
    if inline_policy is not None:
        aws.iam.RolePolicy(
            f"{name}-policy",
            role=role.name,
            policy=inline_policy,
            opts=pulumi.ResourceOptions(parent=role, provider=provider),
        )
    return role
