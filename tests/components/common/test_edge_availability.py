"""The stack's edge proxies survive a drain or a zone's loss: the ``EnvoyProxy`` the stack makes asks Envoy Gateway
for a PodDisruptionBudget and a spread over nodes and zones of its two replicas, selecting that Gateway's proxies."""

from __future__ import annotations

from components.common.edge_availability import proxy_availability, with_proxy_availability
from tests.components.common.test_edge import GATEWAY, _edge_objects, _of_kind
from tritonft.synth.engine import RecordingMocks


def test_the_proxies_keep_one_replica_through_a_drain_and_spread_over_nodes_and_zones(mocks: RecordingMocks) -> None:
    _edge_objects(mocks)
    (proxy,) = _of_kind(mocks, "EnvoyProxy").values()
    kube = proxy.inputs["spec"]["provider"]["kubernetes"]
    assert kube["envoyPDB"] == {"minAvailable": 1}
    assert kube["envoyDeployment"]["replicas"] == 2, "the replicas the budget keeps one of"
    spread = kube["envoyDeployment"]["pod"]["topologySpreadConstraints"]
    assert [(c["topologyKey"], c["maxSkew"]) for c in spread] == [
        ("kubernetes.io/hostname", 1),
        ("topology.kubernetes.io/zone", 1),
    ]
    namespace = proxy.inputs["metadata"]["namespace"]
    for constraint in spread:
        # The labels Envoy Gateway puts on the proxy pods of one Gateway (its translator's OwningGateway* labels).
        assert constraint["labelSelector"] == {
            "matchLabels": {
                "gateway.envoyproxy.io/owning-gateway-name": GATEWAY.name,
                "gateway.envoyproxy.io/owning-gateway-namespace": namespace,
            }
        }
        assert constraint["whenUnsatisfiable"] == "ScheduleAnyway", "a cluster short of zones still runs both"


def test_merging_keeps_the_deployments_other_fields() -> None:
    spec = {"provider": {"type": "Kubernetes", "kubernetes": {"envoyDeployment": {"replicas": 2}, "envoyService": {}}}}
    merged = with_proxy_availability(spec, "gw", "ns")
    kube = merged["provider"]["kubernetes"]
    assert kube["envoyDeployment"]["replicas"] == 2 and kube["envoyService"] == {}
    assert kube["envoyDeployment"]["pod"] == proxy_availability("gw", "ns")["envoyDeployment"]["pod"]
    assert spec["provider"]["kubernetes"] == {"envoyDeployment": {"replicas": 2}, "envoyService": {}}, "not mutated"
