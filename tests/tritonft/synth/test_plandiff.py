"""The day-2 check's model of the engine's diff: the providers' replace rules applied to two plans' inputs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tritonft.cli import main
from tritonft.synth.plandiff import Action, Report, changed_paths, plan_diff

PVC = "kubernetes:core/v1:PersistentVolumeClaim"


def res(typ: str, name: str, inputs: dict[str, Any], **options: Any) -> dict[str, Any]:
    return {"type": typ, "name": name, "urn": f"urn:pulumi:s::p::{typ}::{name}", "inputs": inputs, "options": options}


def claim(size: str = "100Gi", storage_class: str = "efs", **options: list[str]) -> dict[str, Any]:
    spec = {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": size}}}
    return res(
        PVC, "claim", {"metadata": {"name": "c"}, "spec": {**spec, "storageClassName": storage_class}}, **options
    )


def only(old: dict[str, Any], new: dict[str, Any]) -> Any:
    (change,) = plan_diff([old], [new])
    return change


def test_a_claims_size_is_patched_not_replaced() -> None:
    change = only(claim("60Gi"), claim("80Gi"))
    assert (change.action, change.changed, change.harmful) == (
        Action.UPDATE,
        ("spec.resources.requests.storage",),
        False,
    )


def test_a_claims_class_replaces_it_and_that_is_harmful() -> None:
    change = only(claim(storage_class="efs"), claim(storage_class="gp3"))
    assert change.action is Action.REPLACE and change.replaced_by == ("spec.storageClassName",)
    assert change.harmful


def test_ignored_changes_are_no_change_as_the_engine_ignores_them() -> None:
    ignored = ["spec.resources.requests.storage"]
    assert only(claim("60Gi", ignoreChanges=ignored), claim("80Gi", ignoreChanges=ignored)).action is Action.SAME


def test_replace_on_changes_from_the_options_forces_a_replacement() -> None:
    forcing = ["spec.resources"]
    change = only(claim("60Gi", replaceOnChanges=forcing), claim("80Gi", replaceOnChanges=forcing))
    assert change.action is Action.REPLACE


def test_a_deployments_template_change_rolls_its_pods_and_its_selector_replaces_it() -> None:
    typ = "kubernetes:apps/v1:Deployment"
    old = res(typ, "d", {"spec": {"selector": {"matchLabels": {"a": "1"}}, "template": {"spec": {"x": 1}}}})
    rolled = res(typ, "d", {"spec": {"selector": {"matchLabels": {"a": "1"}}, "template": {"spec": {"x": 2}}}})
    reselected = res(typ, "d", {"spec": {"selector": {"matchLabels": {"a": "2"}}, "template": {"spec": {"x": 1}}}})
    assert (only(old, rolled).action, only(old, rolled).rolls) == (Action.UPDATE, True)
    assert only(old, reselected).action is Action.REPLACE


def test_a_jobs_template_change_replaces_the_job() -> None:
    typ = "kubernetes:batch/v1:Job"
    old = res(typ, "j", {"spec": {"template": {"spec": {"image": "a"}}}})
    assert only(old, res(typ, "j", {"spec": {"template": {"spec": {"image": "b"}}}})).action is Action.REPLACE


def test_node_group_labels_update_in_place_but_its_instance_types_replace_it() -> None:
    typ = "aws:eks/nodeGroup:NodeGroup"
    old = res(typ, "gpu", {"instanceTypes": ["g5.xlarge"], "labels": {"a": "1"}})
    assert only(old, res(typ, "gpu", {"instanceTypes": ["g5.xlarge"], "labels": {"a": "2"}})).action is Action.UPDATE
    replaced = only(old, res(typ, "gpu", {"instanceTypes": ["g5.2xlarge"], "labels": {"a": "1"}}))
    assert replaced.action is Action.REPLACE and replaced.harmful


def test_a_subnets_zone_replaces_it() -> None:
    typ = "aws:ec2/subnet:Subnet"
    old = res(typ, "s", {"availabilityZone": "us-west-2a", "cidrBlock": "10.0.0.0/19", "tags": {}})
    new = res(typ, "s", {"availabilityZone": "us-west-2b", "cidrBlock": "10.0.0.0/19", "tags": {}})
    assert only(old, new).harmful


def test_a_dynamic_resource_re_runs_only_on_the_inputs_its_provider_compares() -> None:
    typ = "pulumi-python:dynamic/tritonft:RolloutWatch"
    old = res(typ, "w", {"spec_hash": "a", "kubeconfig": "k1", "__provider": "p1"})
    assert only(old, res(typ, "w", {"spec_hash": "a", "kubeconfig": "k2", "__provider": "p2"})).action is Action.SAME
    assert only(old, res(typ, "w", {"spec_hash": "b", "kubeconfig": "k1", "__provider": "p1"})).action is Action.UPDATE


def test_a_precious_resource_missing_from_the_new_plan_is_a_harmful_delete() -> None:
    (change,) = plan_diff([claim()], [])
    assert change.action is Action.DELETE and change.harmful
    assert "FAIL: 1 stateful or expensive" in Report.of([change]).text()


def test_lists_are_compared_whole_as_a_merge_patch_replaces_them() -> None:
    assert changed_paths({"a": [1, 2], "b": {"c": 1}}, {"a": [1, 3], "b": {"c": 1, "d": 2}}) == ["a", "b.d"]


def test_the_command_exits_1_when_a_precious_resource_would_be_replaced(tmp_path: Path, capsys: Any) -> None:
    for name, plan in (("old", [claim(storage_class="efs")]), ("new", [claim(storage_class="gp3")])):
        (tmp_path / name).mkdir()
        (tmp_path / name / "resources.json").write_text(json.dumps(plan))
    assert main(["diff", str(tmp_path / "old"), str(tmp_path / "old")]) == 0
    assert main(["diff", str(tmp_path / "old"), str(tmp_path / "new")]) == 1
    assert "!! replace  kubernetes:core/v1:PersistentVolumeClaim claim" in capsys.readouterr().out
