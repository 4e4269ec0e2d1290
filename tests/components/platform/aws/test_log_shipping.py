"""Logs that outlive their node (issue 51): in staging and prod, Fluent Bit ships the stack's namespace (Triton, the
gateway's access log, the Jobs) and the edge's (Envoy's access log) to a CloudWatch log group of the stack, with an
IRSA role that can write into that group only; dev ships nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest

from components.platform.aws import charts, logs
from tests.components.platform.aws.helpers import build_platform
from tests.plans import StackPlans
from tritonft.synth.engine import RecordingMocks, Registered
from tritonft.synth.result import SynthResult

CHART = "kubernetes:helm.sh/v4:Chart"
LOG_GROUP = "aws:cloudwatch/logGroup:LogGroup"


@pytest.fixture(scope="module")
def prod(stack_plan: StackPlans) -> SynthResult:
    return stack_plan("prod")


def _fluent_bit(resources: list[Registered]) -> list[Registered]:
    return [r for r in resources if r.typ == CHART and r.inputs["chart"] == charts.AWS_FOR_FLUENT_BIT.chart]


def test_prod_ships_the_stacks_and_the_edges_container_logs_to_its_own_log_group(prod: SynthResult) -> None:
    (chart,) = _fluent_bit(prod.resources)
    values: dict[str, Any] = chart.inputs["values"]
    (group,) = [r for r in prod.resources if r.typ == LOG_GROUP and r.inputs["name"].endswith("/containers")]
    cluster = group.inputs["name"].removeprefix("/aws/eks/").removesuffix("/containers")
    assert group.inputs["name"] == logs.container_log_group(cluster)
    (control_plane,) = [r for r in prod.resources if r.typ == LOG_GROUP and r.inputs["name"].endswith("/cluster")]
    assert group.inputs["retentionInDays"] == control_plane.inputs["retentionInDays"]
    out = values["cloudWatchLogs"]
    assert out["enabled"] is True and out["logGroupName"] == group.inputs["name"] and out["autoCreateGroup"] is False
    assert values["input"]["path"] == (
        f"/var/log/containers/*_{prod.outputs['namespace']}_*.log,/var/log/containers/*_envoy-gateway-system_*.log"
    )
    assert values["tolerations"] == [{"operator": "Exists"}]  # the GPU nodes' Triton logs too
    assert values["serviceAccount"]["name"] == logs.SERVICE_ACCOUNT
    assert chart.inputs["namespace"] == charts.AWS_FOR_FLUENT_BIT.namespace


def test_fluent_bits_role_writes_into_that_group_only() -> None:
    arn = "arn:aws:logs:us-west-2:111122223333:log-group:/aws/eks/c/containers:*"
    (statement,) = json.loads(logs.fluent_bit_policy(arn))["Statement"]
    assert statement["Action"] == ["logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"]
    group = arn.removesuffix(":*")
    assert statement["Resource"] == [group, f"{group}:*"]


def test_dev_ships_no_logs(stack_plan: StackPlans) -> None:
    dev = stack_plan("dev")
    assert _fluent_bit(dev.resources) == []
    assert all(not r.inputs["name"].endswith("/containers") for r in dev.resources if r.typ == LOG_GROUP)


def test_the_platform_ships_nothing_unless_asked(mocks: RecordingMocks) -> None:
    build_platform(environment="prod")
    assert _fluent_bit(mocks.resources) == []
