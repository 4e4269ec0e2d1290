"""A `kubernetesVersion` bump upgrades the whole cluster, not only its control plane: every node group carries the
cluster's version (EKS then rolls it to that minor's AMI, after the control plane it depends on), CoreDNS and
kube-proxy are managed add-ons, and every managed add-on's version is EKS's default for the cluster's minor."""

from __future__ import annotations

import pytest

from components.platform.aws.nodegroups import GpuNodeGroup
from components.platform.aws.platform import AddonFlags
from tests.components.platform.aws.helpers import build_platform
from tritonft.synth.engine import RecordingMocks

NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
ADDON = "aws:eks/addon:Addon"
MANAGED = ("vpc-cni", "kube-proxy", "coredns", "aws-ebs-csi-driver", "aws-efs-csi-driver")


@pytest.mark.parametrize("minor", ["1.34", "1.35"])
def test_every_node_group_carries_the_clusters_version(mocks: RecordingMocks, minor: str) -> None:
    build_platform(kubernetes_version=minor)
    groups = mocks.of_type(NODE_GROUP)
    assert len(groups) >= 2
    assert {g.inputs["version"] for g in groups} == {minor}


AMI_RELEASES = {
    "AL2023_x86_64_STANDARD": "/aws/service/eks/optimized-ami/{m}/amazon-linux-2023/x86_64/standard/recommended/"
    "release_version",
    "AL2023_x86_64_NVIDIA": "/aws/service/eks/optimized-ami/{m}/amazon-linux-2023/x86_64/nvidia/recommended/"
    "release_version",
    "BOTTLEROCKET_x86_64_NVIDIA": "/aws/service/bottlerocket/aws-k8s-{m}-nvidia/x86_64/latest/image_version",
}


@pytest.mark.parametrize("minor", ["1.34", "1.35"])
@pytest.mark.parametrize("gpu_ami", ["AL2023_x86_64_NVIDIA", "BOTTLEROCKET_x86_64_NVIDIA"])
def test_every_node_group_takes_the_newest_ami_release_of_the_clusters_minor(
    mocks: RecordingMocks, minor: str, gpu_ami: str
) -> None:
    build_platform(kubernetes_version=minor, gpu_node_groups=(GpuNodeGroup(ami_type=gpu_ami),))
    releases = {g.inputs["amiType"]: g.inputs["releaseVersion"] for g in mocks.of_type(NODE_GROUP)}
    # The mock's SSM answers name the parameter read: AWS's recommended release of each AMI type for that minor.
    assert releases == {ami: "ssm:" + AMI_RELEASES[ami].format(m=minor) for ami in ("AL2023_x86_64_STANDARD", gpu_ami)}


@pytest.mark.parametrize("minor", ["1.34", "1.35"])
def test_every_managed_addon_follows_the_clusters_version(mocks: RecordingMocks, minor: str) -> None:
    build_platform(kubernetes_version=minor, addons=AddonFlags(kube_prometheus_stack=True))
    versions = {a.inputs["addonName"]: a.inputs.get("addonVersion") for a in mocks.of_type(ADDON)}
    assert versions == {addon: f"{addon}@{minor}" for addon in MANAGED}


def test_coredns_is_managed_after_the_nodes_its_pods_run_on(mocks: RecordingMocks) -> None:
    build_platform()
    (coredns,) = [a for a in mocks.of_type(ADDON) if a.inputs["addonName"] == "coredns"]
    assert coredns.inputs["resolveConflictsOnCreate"] == "OVERWRITE"  # takes over EKS's self-managed CoreDNS
    (system,) = [g for g in mocks.of_type(NODE_GROUP) if g.name.endswith("-system")]
    assert system.urn in coredns.depends_on


def test_kube_proxy_is_managed_after_the_control_plane_and_before_the_nodes(mocks: RecordingMocks) -> None:
    build_platform()
    (kube_proxy,) = [a for a in mocks.of_type(ADDON) if a.inputs["addonName"] == "kube-proxy"]
    # takes over EKS's bootstrapped kube-proxy, on create and on every version bump
    assert kube_proxy.inputs["resolveConflictsOnCreate"] == "OVERWRITE"
    assert kube_proxy.inputs["resolveConflictsOnUpdate"] == "OVERWRITE"
    (cluster,) = mocks.of_type("eks:index:Cluster")
    assert cluster.urn in kube_proxy.depends_on
    groups = mocks.of_type(NODE_GROUP)
    assert groups and all(kube_proxy.urn in g.depends_on for g in groups)


def test_a_pinned_efs_driver_version_wins_over_the_default(mocks: RecordingMocks) -> None:
    build_platform(efs_csi_addon_version="v2.1.4-eksbuild.1")
    (efs,) = [a for a in mocks.of_type(ADDON) if a.inputs["addonName"] == "aws-efs-csi-driver"]
    assert efs.inputs["addonVersion"] == "v2.1.4-eksbuild.1"
