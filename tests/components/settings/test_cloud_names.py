"""AWS regions and EC2 instance types that do not exist are refused before any resource: the names come from what
the AWS provider package ships (``pulumi_aws.Region``, ``pulumi_aws.ec2.InstanceType``), not from a list kept here."""

from __future__ import annotations

import pytest

from components.settings import load_settings
from components.settings.aws_names import aws_regions, ec2_instance_types, provider_version
from components.settings.gpus import AWS_GPU_INSTANCES
from tests.components.settings.test_validation import as_cli, aws_stack, problems_of


@pytest.mark.parametrize(
    ("region", "nearest"),
    [("us-west-3", "`us-west-2`"), ("eu-central-3", "`eu-central-1`"), ("us-gov-west-2", "`us-gov-west-1`")],
)
def test_a_region_aws_does_not_have_is_refused_with_the_nearest_ones(region: str, nearest: str) -> None:
    (problem,) = problems_of(aws_stack(awsRegion=region))

    assert problem.startswith(
        f"awsRegion: {region!r} is not an AWS region (the regions pulumi_aws {provider_version()}"
    )
    assert nearest in problem


def test_a_region_name_in_words_is_refused() -> None:
    (problem,) = problems_of(aws_stack(awsRegion="Oregon"))

    assert problem.startswith("awsRegion: 'Oregon' is not an AWS region")


@pytest.mark.parametrize("region", ["us-west-2", "eu-central-2", "ap-southeast-7", "us-gov-west-1", "cn-north-1"])
def test_a_region_aws_has_is_accepted(region: str) -> None:
    settings = load_settings(as_cli(aws_stack(awsRegion=region)), project="triton-ft", stack="test")

    assert settings.cluster.aws is not None and settings.cluster.aws.region == region


@pytest.mark.parametrize(
    ("instance_type", "hint"),
    [
        ("m6i.3xlarge", "m6i comes in m6i.large, m6i.xlarge, m6i.2xlarge, m6i.4xlarge"),
        ("m6i.huge", "m6i comes in"),
        ("m9z.large", "did you mean"),
    ],
)
def test_a_system_instance_type_ec2_does_not_have_is_refused(instance_type: str, hint: str) -> None:
    (problem,) = problems_of(aws_stack(systemInstanceType=instance_type))

    assert problem.startswith(f"systemInstanceType: {instance_type!r} is not an EC2 instance type")
    assert hint in problem


@pytest.mark.parametrize("instance_type", ["m6i.2xlarge", "c7g.large", "r7i.xlarge", "t3.medium"])
def test_a_system_instance_type_ec2_has_is_accepted(instance_type: str) -> None:
    settings = load_settings(as_cli(aws_stack(systemInstanceType=instance_type)), project="triton-ft", stack="test")

    assert settings.cluster.aws is not None and settings.cluster.aws.system_instance_type == instance_type


def test_a_gpu_instance_type_ec2_does_not_have_is_refused_as_no_known_gpu_type() -> None:
    (problem,) = problems_of(aws_stack(gpuInstanceType="g5.3xlarge"))

    assert problem.startswith("gpuInstanceType: 'g5.3xlarge' is not a known value; did you mean g5.xlarge")


def test_every_gpu_instance_type_of_the_sizing_table_exists_in_ec2() -> None:
    assert sorted(set(AWS_GPU_INSTANCES) - ec2_instance_types()) == []


def test_the_names_come_from_the_provider_package() -> None:
    import pulumi_aws

    assert aws_regions() == {r.value for r in pulumi_aws.Region}
    assert ec2_instance_types() == {t.value for t in pulumi_aws.ec2.InstanceType}
    assert len(aws_regions()) > 30 and len(ec2_instance_types()) > 1000
