"""The generated bad-config test: each knob's every defect is refused, naming that key and nothing else."""

from __future__ import annotations

import re

import pytest

from components.settings import load_settings
from components.settings.schema import MODEL_KNOBS, STACK_KNOBS, Knob, parse_value, schema_path
from tests.components.settings.bad_configs import Case, all_cases, sample
from tests.components.settings.test_validation import T5_SMALL, as_cli, kubernetes_stack, problems_of

CASES = all_cases()


def path_of(problem: str) -> str:
    return problem.split(": ", 1)[0]


def key_of(path: str) -> str:
    """The key a message path belongs to: ``subnetIds[1]`` -> ``subnetIds``, ``models[0].architecture.dModel``
    -> ``models[0].architecture``."""
    match = re.match(r"^(models\[\d+\]\.\w+|\w+)", path)
    assert match, path
    return match.group(1)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_config_is_refused_naming_only_its_key(case: Case) -> None:
    problems = problems_of(case.values, case.secret_keys)
    assert problems, "refused"
    assert {key_of(path_of(p)) for p in problems} == {case.path}, ("only the defective key is reported", problems)
    if case.suggests:
        assert problems == [f"{case.path}: unknown key; did you mean `{case.suggests}`?"]


def test_every_integer_knob_is_bounded_so_its_range_is_tested() -> None:
    for knob in (*STACK_KNOBS, *MODEL_KNOBS):
        if knob.type == "integer":
            assert knob.minimum is not None or knob.choices, knob.key
            assert knob.maximum is not None or knob.choices, knob.key


def test_every_knob_has_cases_for_type_spelling_and_platform() -> None:
    ids = {c.id for c in CASES}
    for knob in STACK_KNOBS:
        assert {f"{knob.key}:wrong-type", f"{knob.key}:misspelt"} <= ids
        if knob.scope != "any":
            assert f"{knob.key}:wrong-platform" in ids
        if knob.choices:
            assert f"{knob.key}:not-a-choice" in ids
    for knob in MODEL_KNOBS:
        assert {f"models[0].{knob.key}:wrong-type", f"models[0].{knob.key}:misspelt"} <= ids


SCALARS = [k for k in (*STACK_KNOBS, *MODEL_KNOBS) if k.type in ("integer", "boolean")]


@pytest.mark.parametrize("knob", SCALARS, ids=[k.key for k in SCALARS])
def test_stringified_scalars_are_accepted(knob: Knob) -> None:
    """`pulumi config set` rewrites every scalar as a string (`gpusPerNode: "1"`): the same value, accepted."""
    value = sample(knob)
    typed, problems = parse_value(knob, str(value).lower() if isinstance(value, bool) else str(value))
    assert problems == [] and typed == value


def test_a_whole_stack_written_by_pulumi_config_set_loads() -> None:
    quoted = kubernetes_stack(gpusPerNode="1", autoscaling="false", replicasMax="1", probeRequests="10")
    quoted["models"] = [dict(T5_SMALL) | {"maxBatchSize": "8", "streaming": "false", "tensorParallel": "1"}]
    settings = load_settings(as_cli(quoted), project="triton-ft", stack="local")
    assert settings.cluster.gpu_node.gpus == 1
    assert settings.serving.autoscaling.enabled is False
    assert settings.models[0].batching.max_batch_size == 8 and settings.models[0].decoupled is False


def test_each_sample_value_is_valid() -> None:
    """The generator's valid values really are valid, so a refused case is refused for its defect alone."""
    for knob in (*STACK_KNOBS, *MODEL_KNOBS):
        typed, problems = parse_value(knob, sample(knob))
        assert problems == [] and typed == sample(knob), (knob.key, problems)


def test_every_message_names_a_key_of_the_schema() -> None:
    """Property over every generated case: the path a message starts with is a schema key or model-entry path,
    or a misspelt key exactly as written whose suggestion is a schema key."""
    for case in CASES:
        for problem in problems_of(case.values, case.secret_keys):
            path = path_of(problem)
            if "unknown key" in problem:
                assert path == case.path
                suggested = problem.split("did you mean `")[-1].rstrip("`?")
                assert "did you mean" not in problem or schema_path(
                    path.rsplit(".", 1)[0] + "." + suggested if path.startswith("models[") else suggested
                ), problem
            else:
                assert schema_path(path), problem
            assert "None" not in problem, problem
