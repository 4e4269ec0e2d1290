"""Container logs shipped off the nodes to CloudWatch Logs (AWS's aws-for-fluent-bit chart, a DaemonSet on every
node): the stack's namespace (Triton, the gateway's access log, the conversion Jobs) and the edge's (Envoy's access
log, one line per request naming the authenticated client), which otherwise die with their node.

Fluent Bit writes with an IRSA role allowed to write only into the stack's own log group, created here with the
control plane logs' retention (so the group never holds logs longer than the stack's other logs, and the group is the
stack's to delete: ``autoCreateGroup`` off)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.platform.aws import charts
from components.platform.aws.addons import install_chart
from components.platform.aws.iam import irsa_role

SERVICE_ACCOUNT = "aws-for-fluent-bit"


def container_log_group(cluster_name: str) -> str:
    """The stack's container log group, beside EKS's own ``/aws/eks/<cluster>/cluster``."""
    return f"/aws/eks/{cluster_name}/containers"


def shipped_paths(namespaces: Sequence[str]) -> str:
    """Fluent Bit's tail paths: the kubelet's log files of the pods of ``namespaces`` only
    (``/var/log/containers/<pod>_<namespace>_<container>-<id>.log``)."""
    return ",".join(f"/var/log/containers/*_{ns}_*.log" for ns in namespaces)


def fluent_bit_policy(log_group_arn: str) -> str:
    """Write into the one log group: create its streams and put events, nothing else of CloudWatch Logs."""
    group = log_group_arn.removesuffix(":*")
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Action": ["logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
                    "Resource": [group, f"{group}:*"],
                }
            ],
        },
        sort_keys=True,
    )


def fluent_bit_values(region: str, log_group: str, role_arn: str, namespaces: Sequence[str]) -> dict[str, Any]:
    """aws-for-fluent-bit on every node (GPU nodes' taint tolerated), to CloudWatch Logs only, a stream per
    container (``<namespace>.<pod>.<container>``)."""
    return {
        "input": {"path": shipped_paths(namespaces)},
        "cloudWatchLogs": {
            "enabled": True,
            "region": region,
            "logGroupName": log_group,
            "logStreamTemplate": "$kubernetes['namespace_name'].$kubernetes['pod_name'].$kubernetes['container_name']",
            "autoCreateGroup": False,
        },
        "firehose": {"enabled": False},
        "kinesis": {"enabled": False},
        "elasticsearch": {"enabled": False},
        "serviceAccount": {
            "create": True,
            "name": SERVICE_ACCOUNT,
            "annotations": {"eks.amazonaws.com/role-arn": role_arn},
        },
        "tolerations": [{"operator": "Exists"}],
        "priorityClassName": "system-node-critical",
    }


def install_log_shipping(
    name: str,
    *,
    cluster_name: str,
    region: str,
    retention_days: int,
    namespaces: Sequence[str],
    oidc_provider_arn: pulumi.Input[str],
    oidc_provider_url: pulumi.Input[str],
    aws_provider: aws.Provider,
    k8s_provider: k8s.Provider,
    parent: pulumi.Resource,
    depends_on: Sequence[pulumi.Resource],
) -> k8s.helm.v4.Chart:
    """The log group, Fluent Bit's IRSA role on it, the pinned chart."""
    pin = charts.AWS_FOR_FLUENT_BIT
    group = aws.cloudwatch.LogGroup(
        f"{name}-container-logs",
        name=container_log_group(cluster_name),
        retention_in_days=retention_days,
        opts=pulumi.ResourceOptions(parent=parent, provider=aws_provider),
    )
    role = irsa_role(
        f"{name}-fluent-bit",
        oidc_provider_arn=oidc_provider_arn,
        oidc_provider_url=oidc_provider_url,
        namespace=pin.namespace,
        service_account=SERVICE_ACCOUNT,
        inline_policy=group.arn.apply(fluent_bit_policy),
        provider=aws_provider,
        parent=parent,
    )
    values = role.arn.apply(lambda arn: fluent_bit_values(region, container_log_group(cluster_name), arn, namespaces))
    chart, _ = install_chart(
        f"{name}-aws-for-fluent-bit", pin, values, provider=k8s_provider, parent=parent, depends_on=depends_on
    )
    return chart
