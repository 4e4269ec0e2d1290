"""The gateway pod's drain: out of the edge's endpoints, then its longest request, before uvicorn is stopped."""

from __future__ import annotations

from typing import Any

from components.common.workload import ENDPOINTS_LAG_S
from components.gateway.spec import GatewayPod, gateway_pod_spec


def pod(deadline_seconds: int) -> dict[str, Any]:
    gateway = GatewayPod("tools@sha256:" + "0" * 64, "specs", "500m", "512Mi", deadline_seconds, {})
    return gateway_pod_spec((), gateway, {"app": "gw"})


def test_the_grace_period_is_longer_than_the_gateways_deadline() -> None:
    assert pod(90)["terminationGracePeriodSeconds"] > 90


def test_the_pre_stop_hook_outlasts_the_edge_dropping_the_pod_and_the_deadline() -> None:
    (container,) = pod(90)["containers"]
    command = container["lifecycle"]["preStop"]["exec"]["command"]
    assert command[0] == "sleep" and int(command[1]) >= ENDPOINTS_LAG_S + 90
