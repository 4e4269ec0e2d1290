"""The NetworkPolicy evaluator (``tests/system/netpol.py``) on the cases the Kubernetes documentation spells out."""

from __future__ import annotations

from typing import Any

import pytest

from tests.system.netpol import Pod, connects, egress_allowed, ingress_allowed, selector_matches

NAMESPACES = {
    "app": {"kubernetes.io/metadata.name": "app", "team": "a"},
    "other": {"kubernetes.io/metadata.name": "other", "team": "b"},
}
DB = Pod("db", "app", {"role": "db"}, {"pg": (5432, "TCP")})
FRONTEND = Pod("frontend", "app", {"role": "frontend"})
STRANGER = Pod("stranger", "app", {"role": "stranger"})
FRONTEND_ELSEWHERE = Pod("frontend-b", "other", {"role": "frontend"})


def policy(spec: dict[str, Any], namespace: str = "app", name: str = "p") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace}, "spec": spec}


def test_a_pod_no_policy_selects_accepts_everything() -> None:
    others = [policy({"podSelector": {"matchLabels": {"role": "frontend"}}, "ingress": []})]
    assert ingress_allowed(others, STRANGER, DB, 5432, NAMESPACES)


def test_a_selected_pod_without_rules_accepts_nothing() -> None:
    deny = [policy({"podSelector": {}, "policyTypes": ["Ingress"]})]
    assert not ingress_allowed(deny, FRONTEND, DB, 5432, NAMESPACES)


def test_a_pod_selector_peer_means_pods_of_the_policys_own_namespace() -> None:
    rules = [
        policy(
            {
                "podSelector": {"matchLabels": {"role": "db"}},
                "ingress": [{"from": [{"podSelector": {"matchLabels": {"role": "frontend"}}}]}],
            }
        )
    ]
    assert ingress_allowed(rules, FRONTEND, DB, 5432, NAMESPACES)
    assert not ingress_allowed(rules, FRONTEND_ELSEWHERE, DB, 5432, NAMESPACES)
    assert not ingress_allowed(rules, STRANGER, DB, 5432, NAMESPACES)


def test_namespace_and_pod_selector_in_one_peer_both_hold_in_two_peers_either_does() -> None:
    both = {"namespaceSelector": {"matchLabels": {"team": "b"}}, "podSelector": {"matchLabels": {"role": "frontend"}}}
    one_peer = [policy({"podSelector": {}, "ingress": [{"from": [both]}]})]
    two_peers = [
        policy(
            {
                "podSelector": {},
                "ingress": [
                    {"from": [{"namespaceSelector": both["namespaceSelector"]}, {"podSelector": both["podSelector"]}]}
                ],
            }
        )
    ]
    assert ingress_allowed(one_peer, FRONTEND_ELSEWHERE, DB, 5432, NAMESPACES)
    assert not ingress_allowed(one_peer, FRONTEND, DB, 5432, NAMESPACES)
    assert ingress_allowed(two_peers, FRONTEND, DB, 5432, NAMESPACES)
    assert ingress_allowed(two_peers, Pod("x", "other", {}), DB, 5432, NAMESPACES)


def test_ports_match_by_number_range_or_the_destinations_port_name_and_tcp_by_default() -> None:
    def on(ports: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [policy({"podSelector": {}, "ingress": [{"ports": ports}]})]

    assert ingress_allowed(on([{"port": 5432}]), FRONTEND, DB, 5432, NAMESPACES)
    assert not ingress_allowed(on([{"port": 5432}]), FRONTEND, DB, 5433, NAMESPACES)
    assert not ingress_allowed(on([{"port": 5432, "protocol": "UDP"}]), FRONTEND, DB, 5432, NAMESPACES)
    assert ingress_allowed(on([{"port": 5000, "endPort": 6000}]), FRONTEND, DB, 5432, NAMESPACES)
    assert ingress_allowed(on([{"port": "pg"}]), FRONTEND, DB, 5432, NAMESPACES)
    assert not ingress_allowed(on([{"port": "pg"}]), FRONTEND, DB, 8080, NAMESPACES)


def test_policies_add_up_any_rule_of_any_selecting_policy_admits() -> None:
    rules = [
        policy({"podSelector": {}, "ingress": []}, name="deny"),
        policy(
            {"podSelector": {"matchLabels": {"role": "db"}}, "ingress": [{"from": [{"podSelector": {}}]}]},
            name="allow",
        ),
    ]
    assert ingress_allowed(rules, STRANGER, DB, 5432, NAMESPACES)
    assert not ingress_allowed(rules, DB, FRONTEND, 80, NAMESPACES)


def test_a_connection_needs_the_sources_egress_and_the_destinations_ingress() -> None:
    egress_only_dns = [
        policy({"podSelector": {"matchLabels": {"role": "frontend"}}, "policyTypes": ["Egress"], "egress": []})
    ]
    assert not egress_allowed(egress_only_dns, FRONTEND, DB, 5432, NAMESPACES)
    assert not connects(egress_only_dns, FRONTEND, DB, 5432, NAMESPACES)
    assert connects(egress_only_dns, STRANGER, DB, 5432, NAMESPACES)


def test_policy_types_default_to_ingress_plus_egress_when_there_are_egress_rules() -> None:
    with_egress = [policy({"podSelector": {}, "egress": [{"ports": [{"port": 53, "protocol": "UDP"}]}]})]
    assert not ingress_allowed(with_egress, FRONTEND, DB, 5432, NAMESPACES)
    assert not egress_allowed(with_egress, FRONTEND, DB, 5432, NAMESPACES)


@pytest.mark.parametrize(
    ("expression", "labels", "matches"),
    [
        ({"key": "role", "operator": "In", "values": ["db", "cache"]}, {"role": "db"}, True),
        ({"key": "role", "operator": "In", "values": ["cache"]}, {"role": "db"}, False),
        ({"key": "role", "operator": "NotIn", "values": ["db"]}, {}, True),
        ({"key": "role", "operator": "Exists"}, {"role": "x"}, True),
        ({"key": "role", "operator": "DoesNotExist"}, {"role": "x"}, False),
    ],
)
def test_match_expressions(expression: dict[str, Any], labels: dict[str, str], matches: bool) -> None:
    assert selector_matches({"matchExpressions": [expression]}, labels) is matches


def test_an_ip_block_peer_is_refused_rather_than_guessed() -> None:
    rules = [policy({"podSelector": {}, "ingress": [{"from": [{"ipBlock": {"cidr": "10.0.0.0/8"}}]}]})]
    with pytest.raises(ValueError, match="ipBlock peers are not evaluated"):
        ingress_allowed(rules, FRONTEND, DB, 5432, NAMESPACES)
