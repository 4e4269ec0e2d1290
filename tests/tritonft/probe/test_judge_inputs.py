"""``tritonft judge-inputs``: a model's judge inputs copied out of a synthesized plan, unchanged. The verdict they
reproduce on a real Triton: ``tests/system/realtriton/test_reproduce_a_verdict.py``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.plans import StackPlans
from tritonft.cli import main
from tritonft.errors import UserError
from tritonft.probe.in_cluster import CONFIG_ENV
from tritonft.probe.judge_inputs import JUDGE_TYPE, planned_judge, planned_spec
from tritonft.synth.plandiff import load_plan


def judge_resource(models: list[str], endpoint: str = "http://c:8000") -> dict[str, Any]:
    settings = {"endpoint": endpoint, "models": [{"name": m, "family": "gpt2"} for m in models]}
    container = {"name": "judge", "env": [{"name": CONFIG_ENV, "value": json.dumps(settings)}]}
    return {"type": JUDGE_TYPE, "inputs": {"job": {"spec": {"template": {"spec": {"containers": [container]}}}}}}


def test_the_judge_of_the_model_is_found_by_the_model_it_judges() -> None:
    resources = [judge_resource(["t5-small"], "http://a:8000"), judge_resource(["gpt2"], "http://b:8000")]
    assert planned_judge(resources, "gpt2")["endpoint"] == "http://b:8000"


def test_a_model_without_a_judge_is_refused_naming_the_judged_ones() -> None:
    with pytest.raises(UserError, match=r"--model: the plan declares no judge of 'minilm'; it judges gpt2, t5-small"):
        planned_judge([judge_resource(["t5-small"]), judge_resource(["gpt2"])], "minilm")


def test_a_model_without_a_spec_is_refused_naming_the_plans_models(tmp_path: Path) -> None:
    (tmp_path / "triton").mkdir()
    config_map = {"kind": "ConfigMap", "data": {"spec.json": json.dumps({"name": "gpt2"})}}
    (tmp_path / "triton/configmap-gpt2-1-spec.yaml").write_text(yaml.safe_dump(config_map))
    with pytest.raises(UserError, match=r"holds no spec of 't5-small'; its models are gpt2"):
        planned_spec(tmp_path, "t5-small")


def test_devs_gpt2_inputs_are_its_jobs_spec_and_its_judge_jobs_settings_byte_for_byte(
    stack_plan: StackPlans, tmp_path: Path
) -> None:
    plan = stack_plan("dev").out

    assert main(["judge-inputs", "--plan", str(plan), "--model", "gpt2", "--out", str(tmp_path)]) == 0

    (config_map,) = [yaml.safe_load(p.read_text()) for p in plan.glob("manifests/*/configmap-gpt2-*-spec.yaml")]
    assert (tmp_path / "spec.json").read_text() == config_map["data"]["spec.json"]
    (judge,) = [r for r in load_plan(plan) if r["type"] == JUDGE_TYPE and r["name"].startswith("dev-gpt2-judge-")]
    (container,) = judge["inputs"]["job"]["spec"]["template"]["spec"]["containers"]
    (env,) = [e["value"] for e in container["env"] if e["name"] == CONFIG_ENV]
    assert json.loads((tmp_path / "judge.json").read_text()) == json.loads(env)
