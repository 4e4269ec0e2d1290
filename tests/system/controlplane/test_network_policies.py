"""Who reaches prod's Triton pods: the NetworkPolicies the stack writes, applied to the real kube-apiserver, read
back as it stores them, and evaluated against the real pods it admitted (``tests/system/netpol.py``).

This control plane has no CNI, so nothing enforces a policy here (on EKS the VPC CNI's network policy agent does:
issue 38); what is shown is that the API server accepts the objects and what they mean by the Kubernetes
NetworkPolicy specification: a pod that is not the gateway cannot open a connection to Triton on any port, the
gateway reaches Triton's gRPC port and nothing else of it, Prometheus only the metrics port, and the edge's
ingress controller (the source of the integration probe's requests, which ``pulumi up`` sends from the operator's
machine through the ingress) only the ports of the Triton routes the plan still has.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from components.common.triton import GRPC_PORT, HTTP_PORT, METRICS_PORT
from components.gateway.spec import GATEWAY_PORT
from tests.system.controlplane.plan import Plan
from tests.system.controlplane.security import Deployed, deployed_prod
from tests.system.controlplane.server import ControlPlane
from tests.system.netpol import Pod, connects, policy_types, selector_matches

TRITON_PORTS = (HTTP_PORT, GRPC_PORT, METRICS_PORT)


@pytest.fixture(scope="module")
def deployed(control_plane: ControlPlane, prod_plan: Plan) -> Iterator[Deployed]:
    with deployed_prod(control_plane, prod_plan) as made:
        yield made


def _reaches(d: Deployed, source: Pod, port: int) -> list[str]:
    """The Triton pods ``source`` may open a connection to on ``port``."""
    return [t.name for t in d.triton if connects(d.policies, source, t, port, d.namespaces)]


def _peer(namespace: str, labels: dict[str, str] | None = None) -> Pod:
    return Pod(f"a-pod-of-{namespace}", namespace, labels or {"app": "anything"})


def test_the_api_server_accepts_and_stores_every_network_policy_of_the_plan(deployed: Deployed) -> None:
    planned = sorted(o["metadata"]["name"] for o in deployed.plan_objects if o["kind"] == "NetworkPolicy")
    assert planned, "the plan writes NetworkPolicies"
    assert {f"NetworkPolicy/{n}" for n in planned} <= set(deployed.applied)
    assert sorted(p["metadata"]["name"] for p in deployed.policies) == planned


def test_every_triton_pod_is_isolated_in_both_directions_by_a_stored_policy(deployed: Deployed) -> None:
    for pod in deployed.triton:
        selecting = [p for p in deployed.policies if selector_matches(p["spec"]["podSelector"], pod.labels)]
        assert selecting, f"no policy selects {pod.name}"
        assert {t for p in selecting for t in policy_types(p)} == {"Ingress", "Egress"}


@pytest.mark.parametrize("port", TRITON_PORTS)
def test_a_pod_of_the_stacks_namespace_that_is_not_the_gateway_reaches_no_triton_pod(
    deployed: Deployed, port: int
) -> None:
    assert _reaches(deployed, deployed.intruder, port) == []


@pytest.mark.parametrize("port", TRITON_PORTS)
def test_a_pod_of_another_namespace_reaches_no_triton_pod(deployed: Deployed, port: int) -> None:
    assert _reaches(deployed, deployed.outsider, port) == []


def test_the_gateway_reaches_every_triton_pod_on_grpc_and_on_nothing_else(deployed: Deployed) -> None:
    assert deployed.gateway
    everyone = sorted(t.name for t in deployed.triton)
    for gateway in deployed.gateway:
        assert sorted(_reaches(deployed, gateway, GRPC_PORT)) == everyone
        assert _reaches(deployed, gateway, HTTP_PORT) == []
        assert _reaches(deployed, gateway, METRICS_PORT) == []


def test_one_triton_pod_cannot_call_another(deployed: Deployed) -> None:
    for source in deployed.triton:
        for port in TRITON_PORTS:
            assert _reaches(deployed, source, port) == []


def test_prometheus_reaches_the_metrics_port_only(deployed: Deployed) -> None:
    prometheus = _peer("monitoring", {"app.kubernetes.io/name": "prometheus"})
    everyone = sorted(t.name for t in deployed.triton)
    assert sorted(_reaches(deployed, prometheus, METRICS_PORT)) == everyone
    assert _reaches(deployed, prometheus, GRPC_PORT) == _reaches(deployed, prometheus, HTTP_PORT) == []


def _triton_services_routed_by_ingresses(d: Deployed) -> set[str]:
    """The Services the edge routes to: an Ingress's backends, or a Gateway API route's ``backendRefs``."""
    ingress = {
        path["backend"]["service"]["name"]
        for o in d.plan_objects
        if o["kind"] == "Ingress"
        for rule in o["spec"].get("rules", [])
        for path in rule.get("http", {}).get("paths", [])
    }
    routes = {
        ref["name"]
        for o in d.plan_objects
        if o["kind"] in ("HTTPRoute", "GRPCRoute")
        for rule in o["spec"].get("rules", [])
        for ref in rule.get("backendRefs", [])
    }
    return ingress | routes


def test_the_ingress_controller_reaches_triton_only_where_the_plan_routes_the_edge_to_it(deployed: Deployed) -> None:
    """The integration probe's source in the cluster (it runs in ``pulumi up`` and calls each model through the
    edge): allowed on HTTP and gRPC exactly to the Triton services an Ingress routes to, never on metrics."""
    routed = _triton_services_routed_by_ingresses(deployed)
    edge_namespaces = {
        peer["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"]
        for p in deployed.policies
        for rule in p["spec"].get("ingress", [])
        for peer in rule.get("from", [])
        if "namespaceSelector" in peer and "podSelector" not in peer
    } - {"monitoring"}
    assert bool(edge_namespaces) == bool(routed), "the edge is admitted exactly when it has routes to Triton"
    instances = {t.labels["app.kubernetes.io/instance"] for t in deployed.triton}
    for namespace in edge_namespaces:
        controller = _peer(namespace, {"app.kubernetes.io/name": "ingress-nginx"})
        for port in (HTTP_PORT, GRPC_PORT):
            reached = {
                t.labels["app.kubernetes.io/instance"]
                for t in deployed.triton
                if t.name in _reaches(deployed, controller, port)
            }
            assert reached == instances & routed
        assert _reaches(deployed, controller, METRICS_PORT) == []


def test_the_gateway_is_reached_by_the_edge_and_prometheus_and_not_by_an_intruder(deployed: Deployed) -> None:
    for gateway in deployed.gateway:
        assert not connects(deployed.policies, deployed.intruder, gateway, GATEWAY_PORT, deployed.namespaces)
        assert not connects(deployed.policies, deployed.outsider, gateway, GATEWAY_PORT, deployed.namespaces)
        assert connects(deployed.policies, _peer("monitoring"), gateway, GATEWAY_PORT, deployed.namespaces)
