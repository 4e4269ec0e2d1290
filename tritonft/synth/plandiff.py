"""The day-2 check: what ``pulumi up`` would do to a stack, from two synthesized plans (``resources.json``).

Each resource of the new plan is compared with the same URN in the old one, input by input. What a changed input
does is the provider's rule, tabled in :data:`RULES` per resource type with its source: a change to an input the
provider marks force-new is a **replace** (delete + create), any other change an **update**; a Deployment whose pod
template changes also **rolls** its pods; a dynamic resource (rollout watch, probe) re-runs only when an input its
provider compares changes. ``ignoreChanges`` and ``replaceOnChanges`` from the resource options are honoured, as the
engine does. :data:`PRECIOUS` lists what a routine change must never replace or delete (stateful or slow to make).

This is an offline model of the engine's diff, not the engine: the real check stays ``pulumi preview --diff``
(``docs/day2.md``); this one runs in tests and in a pull request with no cloud, and says why.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Rule:
    """What forces a replacement of one resource type, and where that rule comes from."""

    replace_on: tuple[str, ...]
    """Input paths (camelCase, dotted) whose change replaces the resource; a change inside one counts too."""
    source: str
    compared: tuple[str, ...] | None = None
    """For dynamic resources: the only inputs the provider's ``diff`` compares (None: every input)."""
    rolls_on: tuple[str, ...] = ()
    """Paths whose change restarts the resource's pods (a rolling update)."""


_K8S = "pulumi-kubernetes provider/pkg/provider/diff.go forceNew (metadata.name/namespace for every kind)"
_K8S_META = ("metadata.name", "metadata.namespace")
_TF_AWS = "pulumi-aws (Terraform AWS provider schema, ForceNew arguments; the registry docs mark them 'forces new')"

RULES: dict[str, Rule] = {
    "kubernetes:core/v1:PersistentVolumeClaim": Rule(
        (*_K8S_META, "spec.accessModes", "spec.selector", "spec.storageClassName", "spec.volumeName"),
        f"{_K8S}; since pulumi-kubernetes#1705 spec.resources is patched, not replaced",
    ),
    "kubernetes:batch/v1:Job": Rule(
        (*_K8S_META, "spec.completions", "spec.parallelism", "spec.selector", "spec.template"), _K8S
    ),
    "kubernetes:apps/v1:Deployment": Rule((*_K8S_META, "spec.selector"), _K8S, rolls_on=("spec.template",)),
    "kubernetes:apps/v1:StatefulSet": Rule(
        (
            *_K8S_META,
            "spec.podManagementPolicy",
            "spec.revisionHistoryLimit",
            "spec.selector",
            "spec.serviceName",
            "spec.volumeClaimTemplates",
        ),
        _K8S,
        rolls_on=("spec.template",),
    ),
    "kubernetes:core/v1:ConfigMap": Rule((*_K8S_META, "data", "binaryData"), _K8S),
    "kubernetes:core/v1:Secret": Rule((*_K8S_META, "type", "data", "stringData"), _K8S),
    "kubernetes:core/v1:Service": Rule((*_K8S_META, "spec.clusterIP"), _K8S),
    "kubernetes:storage.k8s.io/v1:StorageClass": Rule((*_K8S_META, "parameters", "provisioner"), _K8S),
    "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding": Rule((*_K8S_META, "roleRef"), _K8S),
    "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding": Rule((*_K8S_META, "roleRef"), _K8S),
    "aws:efs/fileSystem:FileSystem": Rule(
        ("availabilityZoneName", "creationToken", "encrypted", "kmsKeyId", "performanceMode"),
        f"{_TF_AWS}: aws_efs_file_system",
    ),
    "aws:efs/mountTarget:MountTarget": Rule(
        ("fileSystemId", "subnetId", "ipAddress", "ipAddressType", "ipv6Address"), f"{_TF_AWS}: aws_efs_mount_target"
    ),
    "aws:ec2/vpc:Vpc": Rule(("cidrBlock", "ipv4IpamPoolId", "ipv4NetmaskLength"), f"{_TF_AWS}: aws_vpc"),
    "aws:ec2/subnet:Subnet": Rule(
        ("availabilityZone", "availabilityZoneId", "cidrBlock", "vpcId", "outpostArn", "ipv6Native"),
        f"{_TF_AWS}: aws_subnet",
    ),
    "aws:ec2/routeTableAssociation:RouteTableAssociation": Rule(
        ("subnetId", "gatewayId"), f"{_TF_AWS}: aws_route_table_association"
    ),
    "aws:ec2/natGateway:NatGateway": Rule(
        ("allocationId", "subnetId", "connectivityType", "privateIp"), f"{_TF_AWS}: aws_nat_gateway"
    ),
    "aws:ec2/eip:Eip": Rule(("domain", "publicIpv4Pool", "address"), f"{_TF_AWS}: aws_eip"),
    "aws:ec2/securityGroup:SecurityGroup": Rule(
        ("name", "namePrefix", "vpcId", "description"), f"{_TF_AWS}: aws_security_group"
    ),
    "aws:eks/nodeGroup:NodeGroup": Rule(
        (
            "amiType",
            "capacityType",
            "clusterName",
            "diskSize",
            "instanceTypes",
            "nodeGroupName",
            "nodeGroupNamePrefix",
            "nodeRoleArn",
            "remoteAccess",
            "subnetIds",
            "launchTemplate.id",
            "launchTemplate.name",
        ),
        f"{_TF_AWS}: aws_eks_node_group (labels, taints, scalingConfig, version, updateConfig update in place)",
    ),
    "eks:index:Cluster": Rule(
        (
            "name",
            "vpcId",
            "subnetIds",
            "privateSubnetIds",
            "publicSubnetIds",
            "serviceRole",
            "kubernetesServiceIpAddressRange",
            "encryptionConfigKeyArn",
            "ipFamily",
        ),
        "pulumi-eks Cluster: these reach aws_eks_cluster's ForceNew arguments (name, role_arn, "
        "vpc_config.subnet_ids, kubernetes_network_config, encryption_config) or re-create the cluster's VPC wiring",
    ),
    "aws:eks/addon:Addon": Rule(("addonName", "clusterName"), f"{_TF_AWS}: aws_eks_addon"),
    "aws:ecr/repository:Repository": Rule(("name", "encryptionConfigurations"), f"{_TF_AWS}: aws_ecr_repository"),
    "aws:iam/role:Role": Rule(("name", "namePrefix", "path"), f"{_TF_AWS}: aws_iam_role"),
    "docker-build:index:Image": Rule(
        (), "pulumi-docker-build provider/internal/image.go Diff: any diffed input is an update (rebuild + push)"
    ),
    "kubernetes:helm.sh/v4:Chart": Rule(
        (), "pulumi-kubernetes helm.sh/v4 Chart: a component; its rendered objects update like any other object"
    ),
}

PRECIOUS: frozenset[str] = frozenset(
    {
        "kubernetes:core/v1:PersistentVolumeClaim",
        "aws:efs/fileSystem:FileSystem",
        "aws:efs/mountTarget:MountTarget",
        "eks:index:Cluster",
        "aws:eks/nodeGroup:NodeGroup",
        "aws:ec2/vpc:Vpc",
        "aws:ec2/subnet:Subnet",
        "aws:ec2/natGateway:NatGateway",
        "aws:ec2/eip:Eip",
        "aws:ecr/repository:Repository",
        "kubernetes:storage.k8s.io/v1:StorageClass",
        "kubernetes:core/v1:Namespace",
    }
)
"""Stateful or slow to make: a routine change must neither replace nor delete one (the day-2 check fails)."""

IGNORED_INPUTS = frozenset({"__provider"})
"""Engine plumbing, not a property of the resource."""


def _dynamic_rules() -> dict[str, Rule]:
    """The dynamic resources' own diffs (their providers compare only some inputs; no replacement)."""
    from tritonft.probe.endpoint import COMPARED_INPUTS as PROBE_INPUTS
    from tritonft.probe.in_cluster import JUDGE_INPUTS
    from tritonft.rollout.verdict import COMPARED_INPUTS as WATCH_INPUTS
    from tritonft.rollout.verdict import PROMOTION_GATE_INPUTS, PROMOTION_HANDOVER_INPUTS

    return {
        "pulumi-python:dynamic/tritonft:RolloutWatch": Rule(
            (), "components/rollout_watch.py RolloutWatchProvider.diff", compared=WATCH_INPUTS
        ),
        "pulumi-python:dynamic/tritonft:IntegrationProbe": Rule(
            (), "components/probe/__init__.py IntegrationProbeProvider.diff", compared=PROBE_INPUTS
        ),
        "pulumi-python:dynamic/tritonft:InClusterJudge": Rule(
            (), "components/probe/in_cluster.py InClusterJudgeProvider.diff", compared=JUDGE_INPUTS
        ),
        "pulumi-python:dynamic/tritonft:PromotionGate": Rule(
            (), "components/serving/promotion_gate.py PromotionGateProvider.diff", compared=PROMOTION_GATE_INPUTS
        ),
        "pulumi-python:dynamic/tritonft:PromotionHandover": Rule(
            (),
            "components/serving/promotion_gate.py PromotionHandoverProvider.diff",
            compared=PROMOTION_HANDOVER_INPUTS,
        ),
    }


class Action(StrEnum):
    SAME = "same"
    CREATE = "create"
    UPDATE = "update"
    REPLACE = "replace"
    DELETE = "delete"


@dataclass(frozen=True)
class Change:
    """What ``up`` would do to one resource."""

    urn: str
    type: str
    name: str
    action: Action
    changed: tuple[str, ...] = ()
    """Input paths that differ (after ``ignoreChanges``)."""
    replaced_by: tuple[str, ...] = ()
    """The changed paths that force the replacement."""
    rolls: bool = False
    """The update restarts pods (a Deployment's template changed)."""
    precious: bool = False

    @property
    def harmful(self) -> bool:
        """A precious resource replaced or deleted."""
        return self.precious and self.action in (Action.REPLACE, Action.DELETE)


def changed_paths(old: Any, new: Any, prefix: str = "") -> list[str]:
    """Dotted paths where ``old`` and ``new`` differ; lists are compared whole (a merge patch replaces arrays)."""
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        paths: list[str] = []
        for key in sorted(set(old) | set(new), key=str):
            if not prefix and key in IGNORED_INPUTS:
                continue
            sub = f"{prefix}.{key}" if prefix else str(key)
            if key not in old or key not in new:
                paths.append(sub)
            else:
                paths.extend(changed_paths(old[key], new[key], sub))
        return paths
    return [] if old == new else [prefix or "."]


def _covers(rule_path: str, path: str) -> bool:
    """A change at ``path`` touches ``rule_path``: the same, inside it, or an enclosing value that holds it."""
    return path == rule_path or path.startswith(rule_path + ".") or rule_path.startswith(path + ".")


def classify(old: Mapping[str, Any], new: Mapping[str, Any], rules: Mapping[str, Rule]) -> Change:
    """What the engine does to one resource present in both plans."""
    typ = str(new["type"])
    rule = rules.get(typ, Rule((), "no replace rule: every change is an update"))
    options = new.get("options") or {}
    ignored = tuple(options.get("ignoreChanges") or ())
    changed = [
        p
        for p in changed_paths(old.get("inputs") or {}, new.get("inputs") or {})
        if not any(p == i or p.startswith(i + ".") for i in ignored)
    ]
    if rule.compared is not None:
        changed = [p for p in changed if p.split(".", 1)[0] in rule.compared]
    urn, name, precious = str(new["urn"]), str(new["name"]), typ in PRECIOUS
    if not changed:
        return Change(urn, typ, name, Action.SAME, precious=precious)
    forcing = (*rule.replace_on, *(options.get("replaceOnChanges") or ()))
    replaced_by = tuple(p for p in changed if any(_covers(r, p) for r in forcing))
    rolls = any(_covers(r, p) for r in rule.rolls_on for p in changed)
    action = Action.REPLACE if replaced_by else Action.UPDATE
    return Change(urn, typ, name, action, tuple(changed), replaced_by, rolls, precious)


def plan_diff(old: Sequence[Mapping[str, Any]], new: Sequence[Mapping[str, Any]]) -> list[Change]:
    """Every resource of either plan with what ``up`` would do to it, in the new plan's order (deletes last)."""
    rules = {**RULES, **_dynamic_rules()}
    before = {str(r["urn"]): r for r in old}
    after = {str(r["urn"]): r for r in new}
    changes: list[Change] = []
    for urn, res in after.items():
        if urn in before:
            changes.append(classify(before[urn], res, rules))
        else:
            typ = str(res["type"])
            changes.append(Change(urn, typ, str(res["name"]), Action.CREATE, precious=typ in PRECIOUS))
    for urn, res in before.items():
        if urn not in after:
            typ = str(res["type"])
            changes.append(Change(urn, typ, str(res["name"]), Action.DELETE, precious=typ in PRECIOUS))
    return changes


def load_plan(synth_dir: Path) -> list[dict[str, Any]]:
    """A synthesized plan's resources (``tritonft synth --out DIR`` wrote ``DIR/resources.json``)."""
    path = synth_dir / "resources.json"
    if not path.is_file():
        from tritonft.errors import UserError

        raise UserError(f"{path} not found: give a directory `tritonft synth --out DIR` wrote")
    data = json.loads(path.read_text(encoding="utf-8"))
    return [dict(r) for r in data]


@dataclass(frozen=True)
class Report:
    changes: tuple[Change, ...]
    harmful: tuple[Change, ...] = field(default=())

    @classmethod
    def of(cls, changes: Iterable[Change]) -> Report:
        listed = tuple(changes)
        return cls(listed, tuple(c for c in listed if c.harmful))

    def of_action(self, action: Action) -> list[Change]:
        return [c for c in self.changes if c.action is action]

    def text(self) -> str:
        lines: list[str] = []
        for action in (Action.REPLACE, Action.DELETE, Action.CREATE, Action.UPDATE):
            for c in self.of_action(action):
                mark = "!!" if c.harmful else "  "
                why = ""
                if c.replaced_by:
                    why = f"  (forced by {', '.join(c.replaced_by[:4])})"
                elif c.changed:
                    why = f"  ({', '.join(c.changed[:4])}{', ...' if len(c.changed) > 4 else ''})"
                roll = " [rolls pods]" if c.rolls else ""
                lines.append(f"{mark} {action.value:<8} {c.type} {c.name}{roll}{why}")
        same = len(self.of_action(Action.SAME))
        counts = {a.value: len(self.of_action(a)) for a in Action if a is not Action.SAME}
        summary = ", ".join(f"{n} {a}" for a, n in counts.items() if n) or "no changes"
        lines.append(f"{summary}; {same} unchanged")
        if self.harmful:
            lines.append(f"FAIL: {len(self.harmful)} stateful or expensive resource(s) replaced or deleted")
        return "\n".join(lines)
