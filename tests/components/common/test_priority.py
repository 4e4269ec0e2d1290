"""The stack's PriorityClasses (pure decisions of ``components.common.priority``) and how they reach prod's plan:
every serving pod (Triton, gateway) names the serving class, every tools Job's pod the batch class."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from components.common.priority import (
    SYSTEM_CLUSTER_CRITICAL,
    USER_PRIORITY_MAX,
    priority_class_names,
    priority_class_specs,
)
from components.common.target import PriorityClassNames
from components.settings.stack_file import settings_from_stack_file
from tests.plans import StackPlans, deploy_secrets

REPO = Path(__file__).resolve().parents[3]

NAMES = PriorityClassNames(serving="ns-serving", batch="ns-batch")


def by_name(specs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {spec["metadata"]["name"]: spec for spec in specs}


def test_serving_ranks_above_batch() -> None:
    classes = by_name(priority_class_specs(NAMES))
    assert classes["ns-serving"]["value"] > classes["ns-batch"]["value"]


def test_both_classes_stay_below_every_system_class_and_within_the_user_range() -> None:
    for spec in priority_class_specs(NAMES):
        assert 0 < spec["value"] <= USER_PRIORITY_MAX < SYSTEM_CLUSTER_CRITICAL


def test_serving_may_preempt_and_batch_never_preempts() -> None:
    classes = by_name(priority_class_specs(NAMES))
    assert classes["ns-serving"]["preemptionPolicy"] == "PreemptLowerPriority"
    assert classes["ns-batch"]["preemptionPolicy"] == "Never"


def test_neither_class_becomes_the_cluster_s_default() -> None:
    assert [spec["globalDefault"] for spec in priority_class_specs(NAMES)] == [False, False]


def test_the_class_names_carry_the_stack_s_namespace_so_two_stacks_never_share_one() -> None:
    assert priority_class_names("triton-prod") != priority_class_names("triton-staging")
    assert priority_class_names("triton-prod") == PriorityClassNames("triton-prod-serving", "triton-prod-batch")


@pytest.fixture(scope="module")
def prod_objects(stack_plan: StackPlans) -> list[dict[str, Any]]:
    manifests: Path = stack_plan("prod").out / "manifests"
    return [doc for path in sorted(manifests.rglob("*.yaml")) for doc in yaml.safe_load_all(path.read_text()) if doc]


@pytest.fixture(scope="module")
def prod_classes() -> PriorityClassNames:
    return priority_class_names(settings_from_stack_file(REPO, "prod", deploy_secrets("prod")).namespace)


def pod_spec(obj: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = obj["spec"]["template"]["spec"]
    return spec


def test_prod_s_plan_makes_both_classes(prod_objects: list[dict[str, Any]], prod_classes: PriorityClassNames) -> None:
    made = by_name([o for o in prod_objects if o["kind"] == "PriorityClass"])
    names = prod_classes
    assert set(made) == {names.serving, names.batch}
    assert made[names.serving]["value"] > made[names.batch]["value"]


def test_every_triton_and_gateway_pod_of_prod_names_the_serving_class(
    prod_objects: list[dict[str, Any]], prod_classes: PriorityClassNames
) -> None:
    deployments = [o for o in prod_objects if o["kind"] == "Deployment"]
    components = {d["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"] for d in deployments}
    assert {"triton", "gateway"} <= components
    serving = prod_classes.serving
    assert {d["metadata"]["name"]: pod_spec(d).get("priorityClassName") for d in deployments} == {
        d["metadata"]["name"]: serving for d in deployments
    }


def test_every_tools_job_of_prod_names_the_batch_class(
    prod_objects: list[dict[str, Any]], prod_classes: PriorityClassNames
) -> None:
    jobs = [o for o in prod_objects if o["kind"] == "Job"]
    assert jobs
    batch = prod_classes.batch
    assert {j["metadata"]["name"]: pod_spec(j).get("priorityClassName") for j in jobs} == {
        j["metadata"]["name"]: batch for j in jobs
    }
