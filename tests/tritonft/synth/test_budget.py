"""The longest `up` of a plan: waits (custom timeouts, dynamic deadlines) summed along dependencies."""

from __future__ import annotations

from typing import Any

import pytest

from tritonft.synth.budget import minutes, up_budget_minutes, wait_minutes


def res(urn: str, *, create: str | None = None, deadline_s: float | None = None, **extra: Any) -> dict[str, Any]:
    typ = "pulumi-python:dynamic/tritonft:RolloutWatch" if deadline_s is not None else "aws:x/y:Z"
    options: dict[str, Any] = {"dependsOn": extra.pop("depends", [])}
    if create:
        options["customTimeouts"] = {"create": create}
    inputs = {"deadline_s": deadline_s} if deadline_s is not None else {}
    return {"urn": urn, "type": typ, "name": urn, "options": options, "inputs": inputs, **extra}


@pytest.mark.parametrize(("text", "value"), [("40m", 40.0), ("1h30m", 90.0), ("90s", 1.5), ("2h", 120.0)])
def test_pulumi_durations_read_as_minutes(text: str, value: float) -> None:
    assert minutes(text) == value


def test_a_malformed_duration_is_refused() -> None:
    with pytest.raises(ValueError, match="not a Pulumi duration"):
        minutes("forty minutes")


def test_a_dynamic_resources_deadline_is_its_wait() -> None:
    assert wait_minutes(res("w", deadline_s=1800)) == 30.0


def test_an_in_cluster_judges_wait_is_its_jobs_deadline_and_its_own_waits_around_it() -> None:
    """Its Job's ``activeDeadlineSeconds``, up to 120 s deleting a previous run's Job, 60 s for the verdict."""
    judge = {
        "urn": "j",
        "type": "pulumi-python:dynamic/tritonft:InClusterJudge",
        "name": "j",
        "options": {},
        "inputs": {"job": {"spec": {"activeDeadlineSeconds": 1920}}},
    }
    assert wait_minutes(judge) == 35.0


def test_waits_add_up_along_a_chain_and_the_longest_branch_wins() -> None:
    plan = [
        res("cluster", create="30m"),
        res("nodes", create="40m", depends=["cluster"]),
        res("job", create="100m", depends=["nodes"]),
        res("short", create="5m", depends=["nodes"]),
        res("watch", deadline_s=600, depends=["job", "short"]),
    ]
    assert up_budget_minutes(plan) == 30 + 40 + 100 + 10


def test_depending_on_a_component_waits_for_its_children() -> None:
    plan = [
        {"urn": "comp", "type": "c:c:C", "name": "comp", "options": {}, "inputs": {}},
        res("child", create="50m", parent="comp"),
        res("after", create="10m", depends=["comp"]),
    ]
    assert up_budget_minutes(plan) == 60


def k8s(typ: str, *, annotations: dict[str, str] | None = None, spec: dict[str, Any] | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "x", **({"annotations": annotations} if annotations else {})}
    return {
        "urn": "x",
        "type": f"kubernetes:{typ}",
        "name": "x",
        "options": {},
        "inputs": {"metadata": metadata, "spec": spec or {}},
    }


def test_a_deployment_without_custom_timeouts_holds_up_for_the_providers_ten_minute_await() -> None:
    assert wait_minutes(k8s("apps/v1:Deployment")) == 10.0


def test_a_deployment_applied_without_the_providers_await_holds_up_for_nothing_itself() -> None:
    assert wait_minutes(k8s("apps/v1:Deployment", annotations={"pulumi.com/skipAwait": "true"})) == 0.0


def test_custom_timeouts_replace_the_providers_default_await() -> None:
    deployment = {**k8s("apps/v1:Deployment"), "options": {"customTimeouts": {"create": "25m"}}}
    assert wait_minutes(deployment) == 25.0


def test_a_service_waits_ten_minutes_for_its_pods_unless_headless_or_applied_without_the_await() -> None:
    assert wait_minutes(k8s("core/v1:Service", spec={"selector": {"app": "x"}})) == 10.0
    assert wait_minutes(k8s("core/v1:Service", spec={"clusterIP": "None"})) == 0.0
    assert wait_minutes(k8s("core/v1:Service", spec={"type": "ExternalName"})) == 0.0
    assert wait_minutes(k8s("core/v1:Service", annotations={"pulumi.com/skipAwait": "true"})) == 0.0


def test_kinds_the_provider_does_not_await_hold_up_for_nothing() -> None:
    assert wait_minutes(k8s("core/v1:ConfigMap")) == wait_minutes(k8s("networking.k8s.io/v1:NetworkPolicy")) == 0.0


def test_a_deployments_own_await_adds_to_the_chain_after_what_it_depends_on() -> None:
    plan = [
        res("watch", deadline_s=600),
        {**k8s("apps/v1:Deployment"), "urn": "gw", "options": {"dependsOn": ["watch"]}},
    ]
    plan.append(res("probe", deadline_s=1800, depends=["gw"]))
    assert up_budget_minutes(plan) == 10 + 10 + 30
