"""Who reaches a Triton pod, by its NetworkPolicy (``components.serving.server_spec.network_policy_spec``) evaluated
with the NetworkPolicy evaluator (``tests/system/netpol.py``): peers are pods chosen by their labels, never a whole
namespace (issue 51). The plan's policies on the real API server: tests/system/controlplane/test_network_policies.py."""

from __future__ import annotations

from typing import Any

import pytest

from components.common.triton import GRPC_PORT, HTTP_PORT, METRICS_PORT
from components.common.workload import ENVOY_PROXY_PODS, PROMETHEUS_PODS
from components.serving.server_spec import network_policy_spec
from tests.system.netpol import Pod, connects

TRITON = {"app.kubernetes.io/component": "triton", "app.kubernetes.io/instance": "t5"}
GATEWAY = {"app.kubernetes.io/component": "gateway", "app.kubernetes.io/instance": "gw"}
NAMESPACES = {n: {"kubernetes.io/metadata.name": n} for n in ("triton", "monitoring", "envoy-gateway-system")}
TRITON_POD = Pod("t5-0", "triton", TRITON)
PORTS = (HTTP_PORT, GRPC_PORT, METRICS_PORT)


def _reaches(policy: dict[str, Any], source: Pod, port: int) -> bool:
    return connects(
        [{"metadata": {"name": "t5", "namespace": "triton"}, "spec": policy}], source, TRITON_POD, port, NAMESPACES
    )


def _unexposed() -> dict[str, Any]:
    return network_policy_spec(TRITON, (), "monitoring", gateway_pods=GATEWAY)


def test_an_unexposed_models_triton_is_reached_by_the_gateways_pods_on_grpc_only() -> None:
    gateway = Pod("gw-0", "triton", GATEWAY)
    assert [p for p in PORTS if _reaches(_unexposed(), gateway, p)] == [GRPC_PORT]


@pytest.mark.parametrize(
    "source",
    [
        Pod("envoy-0", "envoy-gateway-system", ENVOY_PROXY_PODS),
        Pod("grafana-0", "monitoring", {"app.kubernetes.io/name": "grafana"}),
        Pod("alertmanager-0", "monitoring", {"app.kubernetes.io/name": "alertmanager"}),
        Pod("intruder", "triton", {"app": "intruder"}),
    ],
    ids=lambda p: p.name,
)
def test_no_other_pod_reaches_an_unexposed_models_triton_on_any_port(source: Pod) -> None:
    assert [p for p in PORTS if _reaches(_unexposed(), source, p)] == []


def test_prometheus_pods_reach_the_metrics_port_and_nothing_else() -> None:
    prometheus = Pod("prometheus-0", "monitoring", PROMETHEUS_PODS)
    assert [p for p in PORTS if _reaches(_unexposed(), prometheus, p)] == [METRICS_PORT]


def test_an_exposed_encoder_admits_the_edges_proxy_pods_not_the_rest_of_their_namespace() -> None:
    policy = network_policy_spec(
        TRITON, (), "monitoring", gateway_pods=GATEWAY, edge_pods=(("envoy-gateway-system", ENVOY_PROXY_PODS),)
    )
    proxy = Pod("envoy-0", "envoy-gateway-system", ENVOY_PROXY_PODS)
    controller = Pod("envoy-gateway-0", "envoy-gateway-system", {"control-plane": "envoy-gateway"})
    assert [p for p in PORTS if _reaches(policy, proxy, p)] == [HTTP_PORT, GRPC_PORT]
    assert [p for p in PORTS if _reaches(policy, controller, p)] == []
