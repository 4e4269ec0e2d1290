"""cluster-autoscaler on ``platform: aws`` under the mock engine: chart, values, IRSA role and its policy."""

from __future__ import annotations

import json
from typing import Any

import pytest

from components.platform.aws.autoscaler import autoscaler_policy, image_tag
from components.platform.aws.nodegroups import GpuNodeGroup, SystemNodeGroup
from tests.components.platform.aws.helpers import build_platform
from tritonft.errors import UserError
from tritonft.synth.engine import RecordingMocks

CHART = "kubernetes:helm.sh/v4:Chart"


def _autoscaler(mocks: RecordingMocks) -> Any:
    return [r for r in mocks.of_type(CHART) if r.inputs["chart"] == "cluster-autoscaler"]


def test_a_gpu_group_that_may_grow_gets_the_pinned_cluster_autoscaler(mocks: RecordingMocks) -> None:
    build_platform(kubernetes_version="1.35")
    (chart,) = _autoscaler(mocks)
    assert chart.inputs["version"] == "9.59.0"  # app 1.35.0: the first charts with CA 1.35's DRA RBAC are 9.54+
    assert chart.inputs["repositoryOpts"]["repo"] == "https://kubernetes.github.io/autoscaler"
    values = chart.inputs["values"]
    assert values["image"]["tag"] == "v1.35.1"

    assert values["autoDiscovery"]["clusterName"] == "triton-ft-test"
    assert "k8s.io/cluster-autoscaler/triton-ft-test" in values["autoDiscovery"]["tags"]
    assert values["nodeSelector"] == {"triton-ft.io/node-pool": "system"}


def test_scale_up_is_immediate_and_idle_gpu_nodes_are_scaled_down(mocks: RecordingMocks) -> None:
    build_platform()
    (chart,) = _autoscaler(mocks)
    args = chart.inputs["values"]["extraArgs"]
    assert args["new-pod-scale-up-delay"] == "0s"
    assert args["scale-down-enabled"] is True
    assert args["scale-down-unneeded-time"] == "10m"
    assert args["skip-nodes-with-local-storage"] is False  # Triton's /dev/shm emptyDir would pin every GPU node


def test_gpu_nodes_min_and_max_are_the_groups_bounds_the_autoscaler_moves_within(mocks: RecordingMocks) -> None:
    build_platform(gpu_node_groups=(GpuNodeGroup(min_size=3, desired_size=3, max_size=8),))
    gpu = mocks.named("tft-gpu")
    assert gpu.inputs["scalingConfig"] == {"minSize": 3, "desiredSize": 3, "maxSize": 8}
    assert gpu.ignore_changes == ("scalingConfig.desiredSize",)
    assert gpu.inputs["labels"]["k8s.amazonaws.com/accelerator"] == "nvidia"


def test_the_autoscaler_assumes_its_own_irsa_role_with_a_least_privilege_policy(mocks: RecordingMocks) -> None:
    build_platform()
    role = mocks.named("tft-cluster-autoscaler-irsa")
    (statement,) = json.loads(role.inputs["assumeRolePolicy"])["Statement"]
    assert (
        "system:serviceaccount:cluster-autoscaler:cluster-autoscaler" in statement["Condition"]["StringEquals"].values()
    )
    (chart,) = _autoscaler(mocks)
    sa = chart.inputs["values"]["rbac"]["serviceAccount"]
    assert (
        sa["annotations"]["eks.amazonaws.com/role-arn"] == "arn:aws:iam::123456789012:role/tft-cluster-autoscaler-irsa"
    )
    policy = json.loads(mocks.named("tft-cluster-autoscaler-policy").inputs["policy"])
    writes = [s for s in policy["Statement"] if "autoscaling:SetDesiredCapacity" in s["Action"]]
    assert writes == [
        {
            "Sid": "ScaleOwnGroups",
            "Effect": "Allow",
            "Action": ["autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup"],
            "Resource": "*",
            "Condition": {"StringEquals": {"aws:ResourceTag/k8s.io/cluster-autoscaler/triton-ft-test": "owned"}},
        }
    ]
    (read,) = [s for s in policy["Statement"] if s["Action"] == ["eks:DescribeNodegroup"]]
    assert read["Resource"] != "*" and len(read["Resource"]) == 2  # the system and the GPU group only


def test_every_other_action_of_the_policy_only_reads() -> None:
    policy = json.loads(autoscaler_policy("c", ["arn:ng"]))
    other = [a for s in policy["Statement"] if s["Sid"] == "Discover" for a in s["Action"]]
    assert other and all(a.split(":")[1].startswith(("Describe", "Get")) for a in other)


def test_an_older_cluster_gets_the_chart_of_its_own_minor(mocks: RecordingMocks) -> None:
    build_platform(kubernetes_version="1.34")
    (chart,) = _autoscaler(mocks)
    assert (chart.inputs["version"], chart.inputs["values"]["image"]["tag"]) == ("9.53.0", "v1.34.4")


def test_fixed_size_groups_get_no_autoscaler(mocks: RecordingMocks) -> None:
    build_platform(
        system_nodes=SystemNodeGroup(min_size=2, desired_size=2, max_size=2),
        gpu_node_groups=(GpuNodeGroup(min_size=2, desired_size=2, max_size=2),),
    )
    assert _autoscaler(mocks) == []


def test_a_kubernetes_version_without_a_pinned_autoscaler_is_refused() -> None:
    assert image_tag("1.35.2") == "v1.35.1"
    with pytest.raises(UserError) as info:
        build_platform(kubernetes_version="1.29")
    assert any(p.startswith("kubernetesVersion: '1.29' has no pinned cluster-autoscaler") for p in info.value.problems)


def test_a_drained_pod_gets_at_least_the_autoscalers_default_grace(mocks: RecordingMocks) -> None:
    build_platform()
    (chart,) = _autoscaler(mocks)
    assert chart.inputs["values"]["extraArgs"]["max-graceful-termination-sec"] == 600
