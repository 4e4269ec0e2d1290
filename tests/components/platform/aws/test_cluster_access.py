"""The EKS cluster's control plane under the mock engine: who reaches its API, where its logs go, how long they stay,
what protects it, which Kubernetes it runs."""

from __future__ import annotations

from datetime import date

import pytest

from components.platform.aws.autoscaler import IMAGE_TAGS, RELEASES
from components.platform.aws.decisions import creator_admin_problems, principal_of
from components.settings import eks as eks_facts
from tests.components.platform.aws.helpers import build_platform
from tritonft.errors import UserError
from tritonft.synth.engine import RecordingMocks

CLUSTER = "eks:index:Cluster"


def test_the_log_group_exists_before_the_cluster_with_the_retention_asked_for(mocks: RecordingMocks) -> None:
    build_platform(control_plane_log_retention_days=30)
    group = mocks.named("tft-control-plane-logs")
    (cluster,) = mocks.of_type(CLUSTER)
    assert group.inputs["name"] == f"/aws/eks/{cluster.inputs['name']}/cluster"  # the group EKS writes to
    assert group.inputs["retentionInDays"] == 30
    assert group.urn in cluster.depends_on
    assert cluster.inputs["enabledClusterLogTypes"] == ["api", "audit", "authenticator"]


def test_the_public_endpoint_is_limited_to_the_cidrs_given(mocks: RecordingMocks) -> None:
    build_platform(public_access_cidrs=("203.0.113.0/24", "198.51.100.7/32"))
    (cluster,) = mocks.of_type(CLUSTER)
    assert cluster.inputs["endpointPublicAccess"] is True
    assert cluster.inputs["endpointPrivateAccess"] is True
    assert cluster.inputs["publicAccessCidrs"] == ["203.0.113.0/24", "198.51.100.7/32"]


def test_a_private_endpoint_has_no_public_access_at_all(mocks: RecordingMocks) -> None:
    build_platform(private_endpoint_only=True)
    (cluster,) = mocks.of_type(CLUSTER)
    assert cluster.inputs["endpointPublicAccess"] is False
    assert cluster.inputs["endpointPrivateAccess"] is True
    assert "publicAccessCidrs" not in cluster.inputs


def test_every_admin_principal_gets_a_cluster_admin_access_entry(mocks: RecordingMocks) -> None:
    ci, operator = "arn:aws:iam::123456789012:role/deploy", "arn:aws:iam::123456789012:role/oncall"
    build_platform(admin_role_arns=(ci, operator))
    (cluster,) = mocks.of_type(CLUSTER)
    assert cluster.inputs["authenticationMode"] == "API"
    entries = cluster.inputs["accessEntries"]
    assert {e["principalArn"] for e in entries.values()} == {ci, operator}
    for entry in entries.values():
        (policy,) = entry["accessPolicies"].values()
        assert policy["policyArn"] == "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"
        assert policy["accessScope"] == {"type": "cluster"}


def test_prod_protects_the_cluster_and_the_vpc(mocks: RecordingMocks) -> None:
    build_platform(environment="prod")
    (cluster,) = mocks.of_type(CLUSTER)
    (vpc,) = mocks.of_type("aws:ec2/vpc:Vpc")
    assert cluster.protect and vpc.protect


def test_dev_protects_neither_unless_asked(mocks: RecordingMocks) -> None:
    build_platform(environment="dev")
    (cluster,) = mocks.of_type(CLUSTER)
    assert not cluster.protect and not mocks.of_type("aws:ec2/vpc:Vpc")[0].protect


def test_the_protection_setting_wins_over_the_environment(mocks: RecordingMocks) -> None:
    build_platform(environment="dev", protect_infrastructure=True)
    (cluster,) = mocks.of_type(CLUSTER)
    assert cluster.protect and mocks.of_type("aws:ec2/vpc:Vpc")[0].protect


def test_the_default_version_is_in_standard_support_with_its_own_autoscaler(mocks: RecordingMocks) -> None:
    build_platform()
    (cluster,) = mocks.of_type(CLUSTER)
    version = cluster.inputs["version"]
    assert eks_facts.support_status(version, eks_facts.today()) == "standard"
    assert IMAGE_TAGS[version].startswith(f"v{version}.")


def test_each_pinned_cluster_autoscaler_chart_image_and_cluster_share_one_minor() -> None:
    assert set(RELEASES) <= set(eks_facts.EKS_VERSIONS)
    for minor, release in RELEASES.items():
        assert release.image.startswith(f"v{minor}."), minor
        assert release.app_version.startswith(f"{minor}."), f"chart {release.chart} is not of {minor}"


def test_a_version_whose_autoscaler_chart_is_not_released_is_refused_with_node_autoscaling() -> None:
    # cluster-autoscaler v1.36.0 is promoted, no chart of app 1.36 is: the 1.35 chart's RBAC is not 1.36's.
    assert "1.36" in eks_facts.EKS_VERSIONS and "1.36" not in RELEASES
    with pytest.raises(UserError) as info:
        build_platform(kubernetes_version="1.36")
    assert any(p.startswith("kubernetesVersion: '1.36' has no pinned cluster-autoscaler") for p in info.value.problems)


@pytest.mark.parametrize(
    ("minor", "today", "status"),
    [
        ("1.34", date(2026, 12, 1), "standard"),
        ("1.34", date(2026, 12, 2), "extended"),
        ("1.33", date(2026, 11, 26), "extended"),
        ("1.32", date(2027, 3, 23), "ended"),
        ("1.29", date(2026, 11, 26), "unknown"),
    ],
)
def test_support_status_follows_the_eks_calendar(minor: str, today: date, status: str) -> None:
    assert eks_facts.support_status(minor, today) == status


def test_a_version_warns_ninety_days_before_its_standard_support_ends() -> None:
    assert eks_facts.version_warnings("1.35", date(2026, 12, 26)) == []
    (warning,) = eks_facts.version_warnings("1.35", date(2026, 12, 27))
    assert warning.startswith("kubernetesVersion: 1.35 leaves EKS standard support on 2027-03-27 (in 90 days)")
    assert "EKS then upgrades the control plane to the next minor by itself" in warning


def test_a_version_in_extended_support_is_refused_under_standard_support() -> None:
    (problem,) = eks_facts.version_problems("1.34", date(2026, 12, 2))
    assert problem.startswith("kubernetesVersion: 1.34 left EKS standard support on 2026-12-02, and eksSupport is")
    assert "upgrade to a minor in standard support (1.35, 1.36), or set eksSupport: extended" in problem
    assert eks_facts.version_warnings("1.34", date(2026, 12, 2)) == []


def test_a_version_in_extended_support_warns_of_the_price_when_extended_support_is_chosen() -> None:
    assert eks_facts.version_problems("1.34", date(2026, 12, 2), "extended") == []
    (warning,) = eks_facts.version_warnings("1.34", date(2026, 12, 2), "extended")
    assert "left EKS standard support on 2026-12-02" in warning and "$0.60 instead of $0.10" in warning


@pytest.mark.parametrize(("support", "policy"), [("standard", "STANDARD"), ("extended", "EXTENDED")])
def test_the_cluster_carries_its_upgrade_policy(mocks: RecordingMocks, support: str, policy: str) -> None:
    build_platform(eks_support=support)
    (cluster,) = mocks.of_type("eks:index:Cluster")
    assert cluster.inputs["upgradePolicy"] == {"supportType": policy}


def test_no_extended_support_billing_unless_asked_for(mocks: RecordingMocks) -> None:
    build_platform()
    (cluster,) = mocks.of_type("eks:index:Cluster")
    assert cluster.inputs["upgradePolicy"] == {"supportType": "STANDARD"}


def test_a_version_past_extended_support_is_refused(mocks: RecordingMocks, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("components.settings.eks.today", lambda: date(2027, 3, 23))
    with pytest.raises(UserError) as info:
        build_platform(kubernetes_version="1.32")
    assert (
        "kubernetesVersion: 1.32 is past EKS extended support (no new clusters); use one of" in info.value.problems[0]
    )
    assert mocks.resources == []


def test_an_assumed_roles_session_is_its_role() -> None:
    session = "arn:aws:sts::123456789012:assumed-role/github-deploy/GitHubActions"
    assert principal_of(session) == "arn:aws:iam::123456789012:role/github-deploy"
    assert principal_of("arn:aws:iam::123456789012:user/ops") == "arn:aws:iam::123456789012:user/ops"


def test_listing_the_role_that_runs_up_among_the_admins_is_refused() -> None:
    session = "arn:aws:sts::123456789012:assumed-role/github-deploy/GitHubActions"
    admins = ("arn:aws:iam::123456789012:role/ops", "arn:aws:iam::123456789012:role/ci/github-deploy")
    (problem,) = creator_admin_problems(session, admins)
    assert problem.startswith("adminPrincipalArns[1]: 'arn:aws:iam::123456789012:role/ci/github-deploy' is the")
    assert "ResourceInUseException" in problem
    assert creator_admin_problems(session, admins[:1]) == []


def test_the_platform_stops_before_any_resource_when_the_creator_is_listed(mocks: RecordingMocks) -> None:
    # The mock engine's caller is arn:aws:iam::123456789012:user/mock (tritonft.synth.engine.CALL_RESULTS).
    with pytest.raises(UserError) as info:
        build_platform(admin_role_arns=("arn:aws:iam::123456789012:user/mock",))
    assert info.value.problems[0].startswith("adminPrincipalArns[0]: 'arn:aws:iam::123456789012:user/mock'")
    assert not mocks.of_type("eks:index:Cluster") and not mocks.of_type("aws:ec2/vpc:Vpc")
