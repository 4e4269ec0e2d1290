"""The EKS settings: their defaults per environment, what they refuse and warn about, and the platform args they
become."""

from __future__ import annotations

from typing import Any

from components import args
from components.settings import load_settings
from tests.components.settings.test_validation import as_cli, aws_stack, problems_of

SLACK = {"name": "oncall", "slack_configs": [{"api_url": "https://hooks.slack.com/services/T0/B0/XYZ"}]}


def load(values: dict[str, Any], secret_keys: tuple[str, ...] = ()) -> Any:
    return load_settings(as_cli(values), project="triton-ft", stack="test", secret_keys=secret_keys)


def test_prod_defaults_to_a_nat_gateway_per_zone_and_protected_infrastructure() -> None:
    platform = args.aws_platform_args(load(aws_stack(environment="prod", protectStorage=True)))
    assert platform.vpc.nat == "per-zone" and platform.vpc.endpoints  # type: ignore[union-attr]
    assert platform.protect_infrastructure is True


def test_dev_defaults_to_one_nat_gateway_and_nothing_protected() -> None:
    platform = args.aws_platform_args(load(aws_stack(environment="dev")))
    assert platform.vpc.nat == "single"  # type: ignore[union-attr]
    assert platform.protect_infrastructure is False


def test_the_api_and_its_admins_come_from_the_settings() -> None:
    deploy = "arn:aws:iam::123456789012:role/github-deploy"
    settings = load(
        aws_stack(
            adminPrincipalArns=[deploy],
            apiPublicAccessCidrs=["203.0.113.0/24"],
            controlPlaneLogRetentionDays=365,
            nodeSsmAccess=True,
        )
    )
    platform = args.aws_platform_args(settings)
    assert platform.admin_role_arns == (deploy,)
    assert platform.public_access_cidrs == ("203.0.113.0/24",)
    assert platform.private_endpoint_only is False
    assert platform.control_plane_log_retention_days == 365
    assert platform.node_ssm_access is True


def test_a_private_api_endpoint_is_asked_for_by_name() -> None:
    assert args.aws_platform_args(load(aws_stack(apiEndpoint="private"))).private_endpoint_only is True


def test_a_receiver_with_a_plain_text_credential_is_refused_unless_stored_as_a_secret() -> None:
    problems = problems_of(aws_stack(alertReceivers=[SLACK]))
    assert problems == [
        "alertReceivers[0].slack_configs[0].api_url: a credential written in plain text: read it from a file of a "
        "Secret (`api_url_file: /etc/alertmanager/secrets/<secret>/<key>`, docs/day2.md#paging) or store the whole "
        "value with `pulumi config set --secret alertReceivers ...`"
    ]
    settings = load(aws_stack(alertReceivers=[SLACK]), secret_keys=("alertReceivers",))
    assert args.aws_platform_args(settings).alert_receivers == (SLACK,)


def test_a_receiver_that_sends_nowhere_is_refused() -> None:
    problems = problems_of(aws_stack(alertReceivers=[{"name": "oncall"}]), ("alertReceivers",))
    assert problems == [
        "alertReceivers[0]: sends nowhere: give at least one of slack_configs, webhook_configs, pagerduty_configs, ..."
    ]


def test_a_log_retention_cloudwatch_does_not_offer_is_refused() -> None:
    (problem,) = problems_of(aws_stack(controlPlaneLogRetentionDays=45))
    assert problem.startswith("controlPlaneLogRetentionDays: must be one of 1, 3, 5, 7, 14, 30, 60, 90")


def test_an_admin_that_is_not_an_iam_arn_is_refused() -> None:
    (problem,) = problems_of(aws_stack(adminPrincipalArns=["github-deploy"]))
    assert problem.startswith("adminPrincipalArns[0]: 'github-deploy' is not an IAM role or user ARN")


MONITORED = ["envoy-gateway", "cert-manager", "kube-prometheus-stack"]
KEYS = "/etc/alertmanager/secrets/alerting"
PAGING = {
    "alertReceivers": [
        {"name": "oncall", "pagerduty_configs": [{"routing_key_file": f"{KEYS}/pagerduty"}]},
        {"name": "heartbeat", "webhook_configs": [{"url_file": f"{KEYS}/heartbeat"}]},
    ],
    "alertRouting": {"critical": "oncall", "watchdog": "heartbeat"},
}


def test_prod_must_state_who_reaches_its_api_and_who_administers_it() -> None:
    values = aws_stack(environment="prod", protectStorage=True, addons=MONITORED) | PAGING
    del values["apiPublicAccessCidrs"], values["adminPrincipalArns"]
    problems = problems_of(values)
    assert [p.split(":")[0] for p in problems] == ["apiPublicAccessCidrs", "adminPrincipalArns"]
    assert "would default to the whole internet (0.0.0.0/0)" in problems[0]
    assert "no operator could reach it with kubectl during an incident" in problems[1]


def test_a_private_prod_api_needs_no_cidrs_but_still_its_operators() -> None:
    values = aws_stack(environment="prod", protectStorage=True, addons=MONITORED, apiEndpoint="private") | PAGING
    del values["apiPublicAccessCidrs"]
    assert load(values).cluster.aws.api_endpoint == "private"
    del values["adminPrincipalArns"]
    assert [p.split(":")[0] for p in problems_of(values)] == ["adminPrincipalArns"]


def test_dev_may_default_its_api_and_admins() -> None:
    assert load(aws_stack(environment="dev")).cluster.aws.api_public_access_cidrs == ("0.0.0.0/0",)


def test_prod_stating_its_api_open_to_the_internet_is_a_decision_not_a_warning() -> None:
    """Unstated, it is refused (above); written out, the stack has decided, and nothing nags at every `up`."""
    values = aws_stack(environment="prod", protectStorage=True, addons=MONITORED, apiPublicAccessCidrs=["0.0.0.0/0"])
    settings = load(values | PAGING)
    assert settings.cluster.aws is not None
    assert settings.cluster.aws.api_public_access_cidrs == ("0.0.0.0/0",)
    assert not [w for w in settings.warnings if "apiPublicAccessCidrs" in w or "0.0.0.0/0" in w]


def test_staging_warns_of_alerts_going_nowhere() -> None:
    settings = load(aws_stack(environment="staging", addons=MONITORED))
    assert any(
        w.startswith("alertReceivers: none, so Alertmanager sends every alert nowhere") for w in settings.warnings
    )


def test_prod_with_narrow_cidrs_and_paging_has_no_such_warnings() -> None:
    values = aws_stack(
        environment="prod", protectStorage=True, addons=MONITORED, apiPublicAccessCidrs=["203.0.113.0/24"]
    )
    settings = load(values | PAGING)
    assert not [w for w in settings.warnings if w.startswith(("apiPublicAccessCidrs", "alertReceivers"))]


def test_the_quota_check_and_prometheus_storage_reach_the_platform() -> None:
    platform = args.aws_platform_args(load(aws_stack(gpuQuotaCheck=False, prometheusStorageGiB=120)))
    assert platform.gpu_quota_check is False
    assert platform.prometheus_storage_gib == 120


def test_fallback_gpu_types_follow_the_preferred_one_in_the_node_group() -> None:
    settings = load(aws_stack(gpuFallbackInstanceTypes=["g5.24xlarge"]))
    (group,) = args.aws_platform_args(settings).gpu_node_groups
    assert group.instance_types == ("g5.12xlarge", "g5.24xlarge"), "on-demand launches the first when it can"
