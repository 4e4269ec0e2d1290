"""Who can write the model store (Triton executes what it holds): the EFS file system policy, the NFS source, the
mount options, and the order a claim waits for."""

from __future__ import annotations

import json
from typing import Any

from tests.components.platform.aws.helpers import build_platform
from tritonft.synth.engine import RecordingMocks

NODE_ROLE = "arn:aws:iam::123456789012:role/tft-node-role"


def _statements(mocks: RecordingMocks) -> dict[str, dict[str, Any]]:
    policy = mocks.named("tft-store-policy")
    assert policy.inputs["fileSystemId"] == "tft-store-fs-id"
    return {s["Sid"]: s for s in json.loads(policy.inputs["policy"])["Statement"]}


def test_the_file_system_refuses_every_request_without_tls(mocks: RecordingMocks) -> None:
    build_platform()
    deny = _statements(mocks)["DenyWithoutTls"]
    assert (deny["Effect"], deny["Principal"], deny["Action"]) == ("Deny", {"AWS": "*"}, "*")
    assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


def test_the_file_system_is_mounted_only_through_an_access_point(mocks: RecordingMocks) -> None:
    build_platform()
    deny = _statements(mocks)["DenyOutsideAccessPoints"]
    assert deny["Effect"] == "Deny" and deny["Principal"] == {"AWS": "*"}
    assert set(deny["Action"]) == {"elasticfilesystem:ClientMount", "elasticfilesystem:ClientWrite"}
    assert deny["Condition"] == {"Null": {"elasticfilesystem:AccessPointArn": "true"}}


def test_only_the_node_role_may_mount_and_no_one_gets_root(mocks: RecordingMocks) -> None:
    build_platform()
    statements = _statements(mocks)
    allows = [s for s in statements.values() if s["Effect"] == "Allow"]
    (allow,) = allows
    assert allow["Principal"] == {"AWS": NODE_ROLE}
    assert allow["Condition"] == {"Bool": {"elasticfilesystem:AccessedViaMountTarget": "true"}}
    granted = {a for s in allows for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])}
    assert granted == {"elasticfilesystem:ClientMount", "elasticfilesystem:ClientWrite"}
    assert "elasticfilesystem:ClientRootAccess" not in granted  # root is squashed for every client


def test_the_driver_mounts_with_tls_and_iam_as_the_policy_requires(mocks: RecordingMocks) -> None:
    build_platform()
    storage_class = mocks.named("tft-store-sc")
    assert storage_class.inputs["mountOptions"] == ["tls", "iam"]
    addon = mocks.named("tft-store-efs-csi")
    assert mocks.named("tft-store-policy").urn in addon.depends_on


def test_nfs_is_open_to_the_nodes_security_group_only(mocks: RecordingMocks) -> None:
    build_platform()
    nfs = mocks.named("tft-store-nfs")
    (rule,) = nfs.inputs["ingress"]
    assert rule["securityGroups"] == ["tft-nodes-id"]
    assert "cidrBlocks" not in rule
    for mount_target in mocks.of_type("aws:efs/mountTarget:MountTarget"):
        assert mount_target.inputs["securityGroups"] == ["tft-store-nfs-id"]


def test_the_target_hands_claims_the_storage_class_to_wait_for(mocks: RecordingMocks) -> None:
    built = build_platform()
    (ready,) = built["platform"].target.storage_ready
    sc = mocks.named("tft-store-sc")
    assert ready.__class__.__name__ == "StorageClass"
    addon = mocks.named("tft-store-efs-csi")
    assert addon.urn in sc.depends_on  # through the class, a claim also waits for the CSI driver
