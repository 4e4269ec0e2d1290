"""What a set of Kubernetes NetworkPolicies lets through, evaluated per the ``networking.k8s.io/v1`` specification.

The control plane the system tests run has no CNI, so nothing enforces a NetworkPolicy there: the API server
accepts and stores them, and this module says what an enforcing network plugin must do with the stored objects
(Kubernetes documentation, "Network Policies", and the API reference of ``NetworkPolicySpec``):

* a pod no policy selects (``podSelector`` in the policy's namespace, ``policyTypes`` including the direction) is
  not isolated in that direction: everything is allowed;
* an isolated pod admits a connection when *some* rule of *some* policy selecting it allows it (policies add up);
* a rule with no ``from``/``to`` matches every peer, with no ``ports`` every port; a peer with only
  ``podSelector`` means pods of the policy's own namespace, only ``namespaceSelector`` every pod of the matching
  namespaces, both in one peer the matching pods *in* the matching namespaces;
* an empty selector ``{}`` matches everything; ``matchLabels`` and ``matchExpressions`` (In, NotIn, Exists,
  DoesNotExist) must all hold;
* a port is a number (with ``endPort`` a range) or a name, resolved against the destination pod's container
  ports; the protocol defaults to TCP;
* ``policyTypes`` unset means Ingress, plus Egress when the policy has ``egress`` rules;
* a connection happens only when the source's egress *and* the destination's ingress allow it.

``ipBlock`` peers are not evaluated (pods here have no addresses): a policy using one is refused, so a verdict is
never given on a rule this module does not model.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

Direction = Literal["Ingress", "Egress"]


@dataclass(frozen=True)
class Pod:
    """A pod as a NetworkPolicy sees it: its namespace, its labels and its named container ports."""

    name: str
    namespace: str
    labels: Mapping[str, str]
    ports: Mapping[str, tuple[int, str]] = field(default_factory=dict)
    """Container port name -> (number, protocol)."""

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> Pod:
        """From a Pod as the API server returns it."""
        meta = obj["metadata"]
        return cls(meta["name"], meta["namespace"], dict(meta.get("labels") or {}), _named_ports(obj["spec"]))

    @classmethod
    def from_template(cls, name: str, namespace: str, template: Mapping[str, Any]) -> Pod:
        """From a Deployment's pod template (what its pods will carry)."""
        return cls(name, namespace, dict(template["metadata"].get("labels") or {}), _named_ports(template["spec"]))


def _named_ports(spec: Mapping[str, Any]) -> dict[str, tuple[int, str]]:
    return {
        p["name"]: (int(p["containerPort"]), p.get("protocol", "TCP"))
        for c in spec.get("containers", [])
        for p in c.get("ports") or []
        if p.get("name")
    }


def selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """A ``LabelSelector`` against ``labels`` (``{}`` matches everything)."""
    if selector is None:
        return True
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expr in selector.get("matchExpressions") or []:
        key, operator, values = expr["key"], expr["operator"], expr.get("values") or []
        present = key in labels
        ok = {
            "In": present and labels.get(key) in values,
            "NotIn": not present or labels.get(key) not in values,
            "Exists": present,
            "DoesNotExist": not present,
        }.get(operator)
        if ok is None:
            raise ValueError(f"unknown label selector operator {operator!r}")
        if not ok:
            return False
    return True


def policy_types(policy: Mapping[str, Any]) -> list[str]:
    spec = policy["spec"]
    if spec.get("policyTypes"):
        return list(spec["policyTypes"])
    return ["Ingress", *(["Egress"] if spec.get("egress") else [])]


def _selecting(policies: Iterable[Mapping[str, Any]], pod: Pod, direction: Direction) -> list[Mapping[str, Any]]:
    return [
        p
        for p in policies
        if p["metadata"]["namespace"] == pod.namespace
        and direction in policy_types(p)
        and selector_matches(p["spec"].get("podSelector") or {}, pod.labels)
    ]


def peer_matches(
    peer: Mapping[str, Any], policy_namespace: str, pod: Pod, namespaces: Mapping[str, Mapping[str, str]]
) -> bool:
    """One ``NetworkPolicyPeer`` against ``pod`` (``namespaces``: each namespace's labels)."""
    if "ipBlock" in peer:
        raise ValueError(f"ipBlock peers are not evaluated here: {peer}")
    if "namespaceSelector" in peer:
        if pod.namespace not in namespaces:
            raise ValueError(f"no labels known for namespace {pod.namespace!r}")
        if not selector_matches(peer["namespaceSelector"], namespaces[pod.namespace]):
            return False
    elif pod.namespace != policy_namespace:
        return False
    return selector_matches(peer.get("podSelector") or {}, pod.labels)


def port_matches(rule_ports: Sequence[Mapping[str, Any]] | None, port: int, protocol: str, destination: Pod) -> bool:
    """A rule's ``ports`` against a connection to ``destination`` on ``port``/``protocol``."""
    if not rule_ports:
        return True
    for entry in rule_ports:
        if entry.get("protocol", "TCP") != protocol:
            continue
        wanted = entry.get("port")
        if wanted is None:
            return True
        if isinstance(wanted, str):
            named = destination.ports.get(wanted)
            if named is not None and named == (port, protocol):
                return True
            continue
        if int(wanted) <= port <= int(entry.get("endPort", wanted)):
            return True
    return False


def _allowed(
    policies: Sequence[Mapping[str, Any]],
    isolated: Pod,
    peer: Pod,
    destination: Pod,
    port: int,
    *,
    protocol: str,
    namespaces: Mapping[str, Mapping[str, str]],
    direction: Direction,
) -> bool:
    selecting = _selecting(policies, isolated, direction)
    if not selecting:
        return True
    key, peers_key = ("ingress", "from") if direction == "Ingress" else ("egress", "to")
    for policy in selecting:
        for rule in policy["spec"].get(key) or []:
            peers = rule.get(peers_key)
            if peers and not any(peer_matches(p, policy["metadata"]["namespace"], peer, namespaces) for p in peers):
                continue
            if port_matches(rule.get("ports"), port, protocol, destination):
                return True
    return False


def ingress_allowed(
    policies: Sequence[Mapping[str, Any]],
    source: Pod,
    destination: Pod,
    port: int,
    namespaces: Mapping[str, Mapping[str, str]],
    *,
    protocol: str = "TCP",
) -> bool:
    """Whether ``destination``'s ingress side admits ``source`` on ``port``."""
    return _allowed(
        policies, destination, source, destination, port, protocol=protocol, namespaces=namespaces, direction="Ingress"
    )


def egress_allowed(
    policies: Sequence[Mapping[str, Any]],
    source: Pod,
    destination: Pod,
    port: int,
    namespaces: Mapping[str, Mapping[str, str]],
    *,
    protocol: str = "TCP",
) -> bool:
    """Whether ``source``'s egress side lets it open a connection to ``destination`` on ``port``."""
    return _allowed(
        policies, source, destination, destination, port, protocol=protocol, namespaces=namespaces, direction="Egress"
    )


def connects(
    policies: Sequence[Mapping[str, Any]],
    source: Pod,
    destination: Pod,
    port: int,
    namespaces: Mapping[str, Mapping[str, str]],
    *,
    protocol: str = "TCP",
) -> bool:
    """Whether a connection from ``source`` to ``destination``'s ``port`` is allowed: egress and ingress both."""
    return egress_allowed(policies, source, destination, port, namespaces, protocol=protocol) and ingress_allowed(
        policies, source, destination, port, namespaces, protocol=protocol
    )
