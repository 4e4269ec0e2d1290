"""Day two of a node group's size: the autoscaler owns ``desiredSize``, but when the stack's limits change EKS takes
them only with a desired size inside (min <= desired <= max), so the update sends the group's current size moved
into the new limits: raising ``gpuNodesMin`` above the autoscaler's size adds nodes instead of failing the ``up``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pulumi
import pytest

from components.platform.aws.nodegroups import CurrentScaling, GpuNodeGroup, desired_size_on_up
from tests.components.platform.aws.helpers import build_platform
from tritonft.synth.engine import RecordingMocks, mock_engine

LIST_CALL = "aws:eks/getNodeGroups:getNodeGroups"
GET_CALL = "aws:eks/getNodeGroup:getNodeGroup"


def test_a_new_group_starts_at_the_stacks_desired_size_then_the_autoscaler_owns_it() -> None:
    assert desired_size_on_up((1, 2, 4), None) == (2, True)


def test_unchanged_limits_keep_the_autoscalers_size() -> None:
    assert desired_size_on_up((1, 2, 4), CurrentScaling(1, 3, 4)) == (3, True)


def test_a_min_raised_above_the_current_size_raises_the_size_with_it() -> None:
    assert desired_size_on_up((4, 4, 10), CurrentScaling(2, 3, 10)) == (4, False)


def test_a_max_lowered_below_the_current_size_lowers_the_size_with_it() -> None:
    assert desired_size_on_up((1, 1, 3), CurrentScaling(1, 5, 8)) == (3, False)


def test_changed_limits_that_hold_the_current_size_send_it_not_the_stale_one_from_creation() -> None:
    # Pulumi's state still holds the size the group was created at (2); the autoscaler has 6 running.
    assert desired_size_on_up((3, 2, 10), CurrentScaling(2, 6, 8)) == (6, False)


class GroupsMocks(RecordingMocks):
    """EKS answering for an existing cluster whose ``tft-gpu`` group the autoscaler left at 3 nodes of 2-10."""

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[Any, Any], list[tuple[str, str]] | None]:
        if args.token == LIST_CALL:
            self.calls.append(args)
            return {"clusterName": args.args["clusterName"], "names": ["tft-gpu-1a2b3c4"], "id": "x"}, []
        if args.token == GET_CALL:
            self.calls.append(args)
            scaling = {"minSize": 2, "desiredSize": 3, "maxSize": 10}
            return {
                "nodeGroupName": args.args["nodeGroupName"],
                "tags": {"Name": "tft-gpu"},
                "scalingConfigs": [scaling],
            }, []
        return super().call(args)


@pytest.fixture
def existing() -> Iterator[GroupsMocks]:
    mocks = GroupsMocks()
    with mock_engine(mocks, "triton-ft", "test"):
        yield mocks


def test_raising_gpu_nodes_min_on_an_existing_cluster_sends_a_desired_size_eks_accepts(existing: GroupsMocks) -> None:
    build_platform(gpu_node_groups=(GpuNodeGroup(min_size=4, desired_size=4, max_size=10),))
    gpu = existing.named("tft-gpu")
    assert gpu.inputs["scalingConfig"] == {"minSize": 4, "desiredSize": 4, "maxSize": 10}
    assert gpu.ignore_changes == (), "the desired size is sent with the new limits"
    system = existing.named("tft-system")  # not reported by EKS here: left to its autoscaler
    assert system.ignore_changes == ("scalingConfig.desiredSize",)


def test_unchanged_limits_on_an_existing_cluster_leave_the_size_to_the_autoscaler(existing: GroupsMocks) -> None:
    build_platform(gpu_node_groups=(GpuNodeGroup(min_size=2, desired_size=2, max_size=10),))
    gpu = existing.named("tft-gpu")
    assert gpu.inputs["scalingConfig"]["desiredSize"] == 3
    assert gpu.ignore_changes == ("scalingConfig.desiredSize",)


def test_the_first_up_finds_no_cluster_and_creates_the_groups_at_their_desired_size(mocks: RecordingMocks) -> None:
    build_platform(gpu_node_groups=(GpuNodeGroup(min_size=1, desired_size=2, max_size=4),))
    assert mocks.named("tft-gpu").inputs["scalingConfig"]["desiredSize"] == 2
    assert mocks.named("tft-gpu").ignore_changes == ("scalingConfig.desiredSize",)
