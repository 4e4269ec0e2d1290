"""Pure sizing, validation and protection rules of the AWS platform."""

from __future__ import annotations

import pytest

from components.platform.aws import decisions
from tritonft.errors import UserError


def test_node_disk_holds_each_image_twice_plus_weights_with_headroom_rounded_to_ten() -> None:
    # 20 reserve + 2 * 20 image + 1.25 * 16 weights = 80
    assert decisions.node_disk_gib(20.0, 16.0) == 80
    # 20 + 2 * 15 + 1.25 * 10 = 62.5 -> 70
    assert decisions.node_disk_gib(15.0, 10.0) == 70


def test_node_disk_beyond_the_ebs_limit_is_a_user_error() -> None:
    with pytest.raises(UserError, match="EBS limit"):
        decisions.node_disk_gib(20.0, 20000.0)


def test_subnets_split_the_vpc_into_private_then_public_blocks() -> None:
    private, public = decisions.subnet_cidrs("10.0.0.0/16", 3)
    assert private == ["10.0.0.0/19", "10.0.32.0/19", "10.0.64.0/19"]
    assert public == ["10.0.128.0/19", "10.0.160.0/19", "10.0.192.0/19"]


@pytest.mark.parametrize(
    ("cidr", "azs", "message"),
    [("10.0.0.0/24", 2, "too small"), ("10.0.0.0/16", 1, "at least 2"), ("ten-dot-zero", 2, "not a CIDR")],
)
def test_bad_network_settings_name_the_key(cidr: str, azs: int, message: str) -> None:
    with pytest.raises(UserError, match=message):
        decisions.subnet_cidrs(cidr, azs)


def test_arm_and_cpu_types_are_rejected_for_gpu_groups() -> None:
    problems = decisions.validate_gpu_instance_types("gpu", ["g5g.xlarge", "m6i.large", "p5.48xlarge"])
    assert len(problems) == 2
    assert "g5g.xlarge" in problems[0] and "m6i.large" in problems[1]


def test_scaling_limits_must_be_ordered() -> None:
    assert decisions.validate_scaling("gpu", 1, 1, 2) == []
    assert "minSize (3)" in decisions.validate_scaling("gpu", 3, 1, 2)[0]
    assert "at least 1" in decisions.validate_scaling("gpu", 0, 0, 0)[0]


def test_model_storage_is_protected_in_prod_unless_overridden() -> None:
    assert decisions.storage_protected("prod", None) is True
    assert decisions.storage_protected("dev", None) is False
    assert decisions.storage_protected("prod", False) is False
    assert decisions.storage_protected("staging", True) is True


def test_only_al2023_needs_the_helm_device_plugin() -> None:
    assert decisions.needs_device_plugin(decisions.AL2023_NVIDIA)
    assert not decisions.needs_device_plugin(decisions.BOTTLEROCKET_NVIDIA)


def test_default_tags_carry_stack_and_environment_and_extras_win() -> None:
    tags = decisions.default_tags("triton-ft", "dev", "dev", {"team": "ml", "environment": "sandbox"})
    assert tags["pulumi:stack"] == "dev"
    assert tags["team"] == "ml"
    assert tags["environment"] == "sandbox"


def test_prometheus_adapter_serves_the_ratio_metric_the_hpa_scales_on() -> None:
    from components.common.triton import RATIO_METRIC
    from components.platform.aws.charts import prometheus_adapter_values

    rules = prometheus_adapter_values()["rules"]["custom"]
    assert any(rule["name"]["as"] == RATIO_METRIC for rule in rules)
