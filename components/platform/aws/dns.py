"""DNS of the edge on a cluster the stack builds: external-dns keeps Route53 records for every route's host.

Why external-dns (and not Route53 alias records made by Pulumi): the records follow the routes as they are (a new
model's host, a canary's route) without the program knowing the load balancer's address, which the Gateway gets only
after ``up`` has created it; and external-dns owns exactly the records it made (a TXT record per name, with the
stack as owner id), so a record someone else made in the zone is never touched, and with ``policy: sync`` a route
that goes takes its record with it. Its IAM role may change only the names of the stack's base host and below
(Route53's record-name condition), so even a misconfigured external-dns cannot touch the zone's other records. The
hosted zone is looked up, never created: it is the one thing (with the ACME e-mail) a new AWS account needs before
``pulumi up``. external-dns reaches Route53 through IRSA.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.platform.aws import charts
from components.platform.aws.addons import install_chart
from components.platform.aws.iam import irsa_role
from components.platform.aws.nodegroups import POOL_LABEL, SYSTEM_POOL

SERVICE_ACCOUNT = "external-dns"
GATEWAY_SOURCES = ("gateway-httproute", "gateway-grpcroute")
"""On the Gateway API edge external-dns reads the routes' hosts (and the address of the Gateway they attach to)."""
INGRESS_SOURCES = ("ingress",)
"""On the Ingress edge, the Ingresses' hosts."""


@dataclass(frozen=True)
class EdgeDns:
    """The Route53 hosted zone (looked up by name) and what external-dns may write in it."""

    zone: str
    """The hosted zone's name, e.g. ``example.com``."""
    domain: str
    """The stack's base host: external-dns writes records for it and the names under it only."""
    owner: str
    """The TXT owner id (the stack): external-dns changes only records it owns."""
    sources: tuple[str, ...] = GATEWAY_SOURCES


def owned_record_names(domain: str) -> list[str]:
    """The record names external-dns may change for a stack whose hosts are ``domain`` and the names under it, as
    Route53 normalizes them (lowercase, no trailing dot): the hosts themselves and their registry TXT records, which
    external-dns names ``<type>-<host>`` (``a-triton.example.com``, ``cname-t5.triton.example.com``)."""
    base = domain.lower().rstrip(".")
    return [base, f"*.{base}", f"*-{base}"]


def external_dns_policy(zone_arn: str, domain: str) -> str:
    """Change the records of the stack's hosts in one zone (Route53's record-name condition: any other record of the
    zone, its apex included, is refused even if external-dns were misconfigured), read that zone, list zones
    (external-dns finds its zone by listing)."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Action": ["route53:ChangeResourceRecordSets"],
                    "Resource": [zone_arn],
                    "Condition": {
                        "ForAllValues:StringLike": {
                            "route53:ChangeResourceRecordSetsNormalizedRecordNames": owned_record_names(domain)
                        }
                    },
                },
                {"Effect": "Allow", "Action": ["route53:ListResourceRecordSets"], "Resource": [zone_arn]},
                {
                    "Effect": "Allow",
                    "Action": ["route53:ListHostedZones", "route53:ListTagsForResource"],
                    "Resource": ["*"],
                },
            ],
        },
        sort_keys=True,
    )


def external_dns_values(dns: EdgeDns, zone_id: str, role_arn: str, region: str) -> dict[str, Any]:
    """external-dns on the system nodes: Route53, the routes' hosts under ``dns.domain`` in one zone, owned by the
    stack, deleted with their routes (``sync``), reconciled on every route change as well as every minute."""
    return {
        "provider": {"name": "aws"},
        "sources": list(dns.sources),
        "domainFilters": [dns.domain],
        "policy": "sync",
        "registry": "txt",
        "txtOwnerId": dns.owner,
        "interval": "1m",
        "triggerLoopOnEvent": True,
        "extraArgs": [f"--zone-id-filter={zone_id}", "--aws-zone-type=public"],
        "env": [{"name": "AWS_DEFAULT_REGION", "value": region}],
        "serviceAccount": {
            "create": True,
            "name": SERVICE_ACCOUNT,
            "annotations": {"eks.amazonaws.com/role-arn": role_arn},
        },
        "nodeSelector": {POOL_LABEL: SYSTEM_POOL},
    }


def install_external_dns(
    name: str,
    dns: EdgeDns,
    *,
    region: str,
    oidc_provider_arn: pulumi.Input[str],
    oidc_provider_url: pulumi.Input[str],
    aws_provider: aws.Provider,
    k8s_provider: k8s.Provider,
    parent: pulumi.Resource,
    depends_on: Sequence[pulumi.Resource],
) -> k8s.helm.v4.Chart:
    """Look the zone up, give external-dns its IRSA role on that zone, install the pinned chart."""
    zone = aws.route53.get_zone_output(
        name=dns.zone, private_zone=False, opts=pulumi.InvokeOutputOptions(provider=aws_provider, parent=parent)
    )
    pin = charts.EXTERNAL_DNS
    role = irsa_role(
        f"{name}-external-dns",
        oidc_provider_arn=oidc_provider_arn,
        oidc_provider_url=oidc_provider_url,
        namespace=pin.namespace,
        service_account=SERVICE_ACCOUNT,
        inline_policy=zone.arn.apply(lambda arn: external_dns_policy(arn, dns.domain)),
        provider=aws_provider,
        parent=parent,
    )
    values = pulumi.Output.all(zone.zone_id, role.arn).apply(
        lambda v: external_dns_values(dns, str(v[0]), str(v[1]), region)
    )
    chart, _ = install_chart(
        f"{name}-external-dns", pin, values, provider=k8s_provider, parent=parent, depends_on=depends_on
    )
    return chart
