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


def test_no_pod_but_the_gateways_and_prometheus_on_metrics_reaches_an_ft_models_triton(deployed: Deployed) -> None:
    """Issue 51's must-show: Triton 23.04 is reached by the gateway's pods (gRPC), Prometheus's (metrics) and its own
    judge's (HTTP, the next test) only: not the edge's proxies, not Grafana or another pod of monitoring, not another
    pod of the namespace, not another model's judge."""
    ft_selectors = [
        o["spec"]["selector"]["matchLabels"]
        for o in deployed.plan_objects
        if o["kind"] == "Deployment"
        and o["spec"]["template"]["metadata"]["labels"].get("app.kubernetes.io/component") == "triton"
        and "/server-" not in o["spec"]["template"]["spec"]["containers"][0]["image"]
    ]
    ft = [t for t in deployed.triton if any(selector_matches({"matchLabels": s}, t.labels) for s in ft_selectors)]
    assert ft
    strangers = [
        _peer(
            "envoy-gateway-system",
            {"app.kubernetes.io/component": "proxy", "app.kubernetes.io/managed-by": "envoy-gateway"},
        ),
        _peer("monitoring", {"app.kubernetes.io/name": "grafana"}),
        _peer("monitoring", {"app.kubernetes.io/name": "alertmanager"}),
        deployed.intruder,
        deployed.outsider,
    ]
    prometheus = _peer("monitoring", {"app.kubernetes.io/name": "prometheus"})
    for pod in ft:
        instance = pod.labels["app.kubernetes.io/instance"]
        others_judges = [j for j in deployed.judges if j.labels["app.kubernetes.io/instance"] != instance]
        assert others_judges
        for source in [*strangers, *others_judges]:
            assert [p for p in TRITON_PORTS if connects(deployed.policies, source, pod, p, deployed.namespaces)] == []
        assert [p for p in TRITON_PORTS if connects(deployed.policies, prometheus, pod, p, deployed.namespaces)] == [
            METRICS_PORT
        ]
        assert any(
            [p for p in TRITON_PORTS if connects(deployed.policies, g, pod, p, deployed.namespaces)] == [GRPC_PORT]
            for g in deployed.gateway
        )


def test_the_edges_proxies_reach_triton_only_where_the_plan_routes_the_edge_to_it(deployed: Deployed) -> None:
    """The edge's proxy pods (by their labels, not their namespace) reach HTTP and gRPC exactly of the Triton
    services a route sends them to (an encoder's), never metrics."""
    routed = _triton_services_routed_by_ingresses(deployed)
    proxy = _peer(
        "envoy-gateway-system",
        {"app.kubernetes.io/component": "proxy", "app.kubernetes.io/managed-by": "envoy-gateway"},
    )
    instances = {t.labels["app.kubernetes.io/instance"] for t in deployed.triton}
    for port in (HTTP_PORT, GRPC_PORT):
        reached = {
            t.labels["app.kubernetes.io/instance"] for t in deployed.triton if t.name in _reaches(deployed, proxy, port)
        }
        assert reached == instances & routed
    assert _reaches(deployed, proxy, METRICS_PORT) == []
    other = _peer("envoy-gateway-system", {"control-plane": "envoy-gateway"})
    assert all(_reaches(deployed, other, p) == [] for p in TRITON_PORTS)


def test_the_gateway_is_reached_by_the_edges_proxies_and_prometheus_and_by_nothing_else(deployed: Deployed) -> None:
    proxy = _peer(
        "envoy-gateway-system",
        {"app.kubernetes.io/component": "proxy", "app.kubernetes.io/managed-by": "envoy-gateway"},
    )
    prometheus = _peer("monitoring", {"app.kubernetes.io/name": "prometheus"})
    for gateway in deployed.gateway:
        for stranger in (
            deployed.intruder,
            deployed.outsider,
            _peer("monitoring", {"app.kubernetes.io/name": "grafana"}),
        ):
            assert not connects(deployed.policies, stranger, gateway, GATEWAY_PORT, deployed.namespaces)
        assert connects(deployed.policies, proxy, gateway, GATEWAY_PORT, deployed.namespaces)
        assert connects(deployed.policies, prometheus, gateway, GATEWAY_PORT, deployed.namespaces)


def test_each_judges_pod_reaches_its_own_models_triton_on_http_only(deployed: Deployed) -> None:
    """Issue 51: a candidate is judged from inside the cluster by a Job whose pods the candidate's NetworkPolicy admits
    by label: on the HTTP port the judge asks, of its own model's Triton only (an FT model's included)."""
    instance = "app.kubernetes.io/instance"
    judged = sorted(j.labels[instance] for j in deployed.judges)
    assert judged == sorted({t.labels[instance] for t in deployed.triton}), "one judge per model"
    for judge in deployed.judges:
        own = judge.labels["app.kubernetes.io/instance"]
        for pod in deployed.triton:
            reached = [p for p in TRITON_PORTS if connects(deployed.policies, judge, pod, p, deployed.namespaces)]
            expected = [HTTP_PORT] if pod.labels["app.kubernetes.io/instance"] == own else []
            assert reached == expected, (judge.name, pod.name, reached)
        assert not any(
            connects(deployed.policies, judge, g, GATEWAY_PORT, deployed.namespaces) for g in deployed.gateway
        )


def test_a_pod_labelled_as_a_judge_of_the_stack_in_another_namespace_reaches_no_triton_pod(deployed: Deployed) -> None:
    (judge, *_) = deployed.judges
    elsewhere = _peer("default", dict(judge.labels))
    assert all(_reaches(deployed, elsewhere, p) == [] for p in TRITON_PORTS)
