"""What a pod on the nodes can reach: instance metadata (IMDSv2, hop limit 1), the node role's policies (no CNI, no
SSM unless asked), the VPC CNI with its own IRSA role and its network-policy agent on; and the nodes' disks."""

from __future__ import annotations

import json

from components.platform.aws.decisions import BOTTLEROCKET_NVIDIA
from components.platform.aws.iam import CNI_POLICY, SSM_POLICY
from components.platform.aws.nodegroups import GpuNodeGroup
from tests.components.platform.aws.helpers import build_platform
from tritonft.synth.engine import RecordingMocks

NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
ATTACHMENT = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"


def _policies_of(mocks: RecordingMocks, role: str) -> set[str]:
    return {a.inputs["policyArn"] for a in mocks.of_type(ATTACHMENT) if a.inputs["role"] == role}


def test_every_node_group_requires_imdsv2_answered_one_hop_away(mocks: RecordingMocks) -> None:
    build_platform()
    groups = mocks.of_type(NODE_GROUP)
    assert len(groups) == 2
    for group in groups:
        template = mocks.named(f"{group.name}-lt")
        # the group follows the template's latest version: a changed template rolls the nodes
        assert group.inputs["launchTemplate"] == {"id": f"{template.name}-id", "version": "1"}
        assert template.inputs["metadataOptions"] == {
            "httpEndpoint": "enabled",
            "httpTokens": "required",
            "httpPutResponseHopLimit": 1,
        }


def test_the_node_role_has_neither_the_cni_policy_nor_ssm(mocks: RecordingMocks) -> None:
    build_platform()
    policies = _policies_of(mocks, "tft-node-role")
    assert policies == {
        "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
        "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly",
    }


def test_ssm_is_attached_to_the_node_role_only_when_asked(mocks: RecordingMocks) -> None:
    build_platform(node_ssm_access=True)
    assert SSM_POLICY in _policies_of(mocks, "tft-node-role")
    assert CNI_POLICY not in _policies_of(mocks, "tft-node-role")


def test_the_vpc_cni_runs_as_aws_node_with_its_own_role_and_the_network_policy_agent(mocks: RecordingMocks) -> None:
    build_platform()
    addon = mocks.named("tft-vpc-cni")
    role = mocks.named("tft-vpc-cni-irsa")
    assert addon.inputs["addonName"] == "vpc-cni"
    assert addon.inputs["serviceAccountRoleArn"] == f"arn:aws:iam::123456789012:role/{role.name}"
    assert json.loads(addon.inputs["configurationValues"])["enableNetworkPolicy"] == "true"
    (statement,) = json.loads(role.inputs["assumeRolePolicy"])["Statement"]
    assert "system:serviceaccount:kube-system:aws-node" in statement["Condition"]["StringEquals"].values()
    assert _policies_of(mocks, role.name) == {CNI_POLICY}
    # aws-node must find its role when the first node boots: every node group waits for the add-on
    for group in mocks.of_type(NODE_GROUP):
        assert addon.urn in group.depends_on


def test_system_nodes_hold_the_server_image_a_cpu_model_runs_there(mocks: RecordingMocks) -> None:
    build_platform(server_image_gib=20.0, tools_image_gib=1.0, conversion_scratch_gib=60.0)
    # 20 reserve + 2 x (20 + 1) images + 1.25 x 60 scratch = 137 -> 140
    (mapping,) = mocks.named("tft-system-lt").inputs["blockDeviceMappings"]
    assert mapping["ebs"]["volumeSize"] == 140


def test_system_nodes_without_a_cpu_model_hold_only_the_tools_image(mocks: RecordingMocks) -> None:
    build_platform(system_runs_server_image=False, tools_image_gib=1.0, conversion_scratch_gib=60.0)
    (mapping,) = mocks.named("tft-system-lt").inputs["blockDeviceMappings"]
    assert mapping["ebs"]["volumeSize"] == 100  # 20 + 2 x 1 + 75 = 97 -> 100


def test_bottlerocket_sizes_its_data_volume_not_its_os_volume(mocks: RecordingMocks) -> None:
    build_platform(gpu_node_groups=(GpuNodeGroup(name="br", ami_type=BOTTLEROCKET_NVIDIA, disk_gib=200),))
    (mapping,) = mocks.named("tft-br-lt").inputs["blockDeviceMappings"]
    assert (mapping["deviceName"], mapping["ebs"]["volumeSize"]) == ("/dev/xvdb", 200)


def test_nodes_carry_the_cluster_security_group_and_their_own(mocks: RecordingMocks) -> None:
    build_platform()
    (cluster,) = mocks.of_type("eks:index:Cluster")
    assert cluster.inputs["skipDefaultSecurityGroups"] is True
    for group in mocks.of_type(NODE_GROUP):
        template = mocks.named(f"{group.name}-lt")
        assert template.inputs["vpcSecurityGroupIds"] == [f"sg-{cluster.name}-cluster", "tft-nodes-id"]
