"""Ingress resources shared by the Triton services and the gateway: the basic-auth Secret (same auth everywhere)."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.common.ingress import BASIC_AUTH_KEY, IngressArgs
from components.common.layout import object_meta


def basic_auth_secret(
    name: str,
    *,
    base: str,
    namespace: Any,
    labels: dict[str, str],
    ingress: IngressArgs,
    opts: pulumi.ResourceOptions,
) -> str | None:
    """The basic-auth Secret an Ingress names: the existing one, or ``<base>-basic-auth`` created here from the
    htpasswd lines (a Pulumi secret); None without basic auth."""
    if ingress.basic_auth_htpasswd is None:
        return ingress.basic_auth_secret
    secret = f"{base}-basic-auth"
    k8s.core.v1.Secret(
        f"{name}-basic-auth",
        metadata=object_meta(secret, namespace, labels),
        type="Opaque",
        string_data={BASIC_AUTH_KEY: pulumi.Output.secret(ingress.basic_auth_htpasswd)},
        opts=opts,
    )
    return secret
