"""The GPU quota check: the account's EC2 vCPU quota, read from Service Quotas (the provider's mocked answer), refuses
node groups it cannot hold before any AWS resource is registered, naming the number to ask for."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pulumi
import pytest

from components.platform.aws import decisions
from components.platform.aws.nodegroups import GpuNodeGroup
from tests.components.platform.aws.helpers import aws_resources, build_platform, provider_ref
from tritonft.errors import UserError
from tritonft.synth.engine import RecordingMocks, mock_engine

QUOTA_CALL = "aws:servicequotas/getServiceQuota:getServiceQuota"
PROD_GPUS = (GpuNodeGroup(name="gpu", instance_types=("g5.12xlarge",), min_size=3, desired_size=3, max_size=8),)


class QuotaMocks(RecordingMocks):
    """The AWS provider's answers, with Service Quotas answering ``values`` (quota code -> vCPUs); a code missing
    from ``values`` fails the call as AWS does without ``servicequotas:GetServiceQuota``."""

    def __init__(self, values: dict[str, float]) -> None:
        super().__init__()
        self.values = values

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[Any, Any], list[tuple[str, str]] | None]:
        if args.token != QUOTA_CALL:
            return super().call(args)
        self.calls.append(args)
        code = args.args["quotaCode"]
        if code not in self.values:
            return {}, [("servicequotas:GetServiceQuota", f"AccessDeniedException: not authorized for {code}")]
        return {"value": self.values[code], "quotaCode": code, "serviceCode": args.args["serviceCode"]}, []


@pytest.fixture
def quota(request: pytest.FixtureRequest) -> Iterator[QuotaMocks]:
    mocks = QuotaMocks(request.param)
    with mock_engine(mocks, "triton-ft", "test"):
        yield mocks


@pytest.mark.parametrize("quota", [{"L-DB2E81BA": 96.0}], indirect=True)
def test_a_quota_below_gpu_nodes_max_is_refused_before_any_aws_resource_with_the_number_to_ask_for(
    quota: QuotaMocks,
) -> None:
    with pytest.raises(UserError) as info:
        build_platform(environment="prod", gpu_node_groups=PROD_GPUS)
    (problem,) = info.value.problems
    # maxSize 8 + an update's surge of 4 (twice the 2 zones, more than desiredSize 3 of a replacement) = 12 x 48.
    assert problem.startswith("gpuNodesMax: the GPU node groups need 576 vCPUs")
    assert "gpu: 12 x g5.12xlarge (48 vCPUs each) = maxSize 8 + 4" in problem
    assert "'Running On-Demand G and VT instances' (L-DB2E81BA) in us-west-2" in problem
    assert "the account has 96. gpuNodesMax alone takes 384" in problem
    assert "Ask for 576" in problem and "--desired-value 576" in problem
    assert aws_resources(quota) == []
    (call,) = [c for c in quota.calls if c.token == QUOTA_CALL]
    assert call.args == {"serviceCode": "ec2", "quotaCode": "L-DB2E81BA"}
    assert call.provider == provider_ref(quota, "pulumi:providers:aws")


@pytest.mark.parametrize("quota", [{"L-DB2E81BA": 384.0}], indirect=True)
def test_a_quota_that_holds_only_gpu_nodes_max_is_refused_for_day_two(quota: QuotaMocks) -> None:
    with pytest.raises(UserError) as info:
        build_platform(environment="prod", gpu_node_groups=PROD_GPUS)
    (problem,) = info.value.problems
    assert "need 576 vCPUs" in problem and "a node group update (each AMI release, a version bump)" in problem


@pytest.mark.parametrize("quota", [{"L-DB2E81BA": 576.0}], indirect=True)
def test_a_quota_that_holds_the_day_two_peak_lets_the_platform_be_built(quota: QuotaMocks) -> None:
    build_platform(environment="prod", gpu_node_groups=PROD_GPUS)
    assert quota.named("tft-gpu").inputs["scalingConfig"]["maxSize"] == 8


@pytest.mark.parametrize("quota", [{"L-3819A6DF": 48.0}], indirect=True)
def test_spot_groups_are_checked_against_the_spot_quota(quota: QuotaMocks) -> None:
    spot = (GpuNodeGroup(name="gpu", instance_types=("g5.12xlarge",), capacity_type="SPOT", max_size=2),)
    with pytest.raises(UserError) as info:
        build_platform(gpu_node_groups=spot)
    (problem,) = info.value.problems
    assert "'All G and VT Spot Instance Requests' (L-3819A6DF)" in problem and "Ask for 288" in problem  # (2+4) x 48


@pytest.mark.parametrize("quota", [{}], indirect=True)
def test_an_unreadable_quota_is_warned_about_and_not_checked(quota: QuotaMocks) -> None:
    build_platform(gpu_node_groups=PROD_GPUS)
    assert [c.args["quotaCode"] for c in quota.calls if c.token == QUOTA_CALL] == ["L-DB2E81BA"]
    assert quota.named("tft-gpu").inputs["instanceTypes"] == ["g5.12xlarge"]


@pytest.mark.parametrize("quota", [{"L-DB2E81BA": 0.0}], indirect=True)
def test_the_check_can_be_turned_off(quota: QuotaMocks) -> None:
    build_platform(gpu_node_groups=PROD_GPUS, gpu_quota_check=False)
    assert [c for c in quota.calls if c.token == QUOTA_CALL] == []
    assert quota.named("tft-gpu").inputs["instanceTypes"] == ["g5.12xlarge"]


def test_groups_on_one_quota_are_summed_and_p_types_count_against_the_p_quota() -> None:
    groups = [
        decisions.QuotaGroup("a", ("g5.xlarge",), "ON_DEMAND", desired_size=1, max_size=4, zones=2),
        decisions.QuotaGroup("b", ("g6e.12xlarge",), "ON_DEMAND", desired_size=1, max_size=2, zones=2),
        decisions.QuotaGroup("c", ("p4d.24xlarge",), "ON_DEMAND", desired_size=1, max_size=1, zones=1),
    ]
    problems = decisions.quota_problems(groups, {"L-DB2E81BA": 100.0, "L-417A185B": 288.0}, "us-east-1")
    (problem,) = problems
    assert "need 320 vCPUs" in problem  # (4+4) x 4 + (2+4) x 48; the p4d's (1+2) x 96 fit its own quota
    assert "a: 8 x g5.xlarge (4 vCPUs each) = maxSize 4 + 4; b: 6 x g6e.12xlarge (48 vCPUs each)" in problem


def test_a_replacement_beside_the_old_group_counts_when_it_is_larger_than_an_updates_surge() -> None:
    # desiredSize 6 > an update's surge of 4 (2 zones): a new instance type brings 6 nodes up beside the old 10.
    group = decisions.QuotaGroup("gpu", ("g5.12xlarge",), "ON_DEMAND", desired_size=6, max_size=10, zones=2)
    assert (group.surge, group.peak_nodes) == (4, 16)
    assert decisions.QuotaGroup("gpu", ("g5.xlarge",), "ON_DEMAND", 1, 2, zones=3).surge == 6


def test_several_instance_types_count_at_the_first_one_launched() -> None:
    group = decisions.QuotaGroup("gpu", ("g5.12xlarge", "g5.24xlarge"), "ON_DEMAND", 1, 2, zones=2)
    assert group.vcpus == 48


@pytest.mark.parametrize(
    ("instance_type", "vcpus"),
    [("g5.xlarge", 4), ("g5.12xlarge", 48), ("g4dn.metal", 96), ("p5.48xlarge", 192), ("g6.2xlarge", 8)],
)
def test_vcpus_follow_the_ec2_size(instance_type: str, vcpus: int) -> None:
    assert decisions.instance_vcpus(instance_type) == vcpus
