"""The judge of a T5, GPT-2 or GPT-J version, as the stacks' programs declare it, against a real Triton: it passes the
model whose answers are its original weights' and fails each wrong one, naming the prompt and both answers.

For each family, a stack's synthesized plan gives the judge's inputs (``dev``'s t5-small and gpt2, ``staging``'s
gpt-j-6b) and the spec its conversion Job receives. The "original weights" are a seeded random checkpoint of the
family (``tests/tritonft/reference/checkpoints.py``) with a word-level tokenizer over the judge's prompts; the Job's
reference step (``tritonft reference``, the command its script runs) computes the reference from them, and the Job's
``tritonft repo --judge-reference`` renders it into the served ensemble. Served by a real Triton with the CPU
reference of FasterTransformer's step (``--engine reference``) under the plan's model names:

* the right model: the original weights converted at the spec's dtype (fp16: its near-ties may flip);
* random weights of the same shape (every tensor's values shuffled);
* another seed's weights (the same builder, another seed);
* a checkpoint converted at the wrong dtype (bf16 files that ``config.ini`` calls fp16, as FT then reads them).

Each wrong model is served with the right model's reference (its reference Job's, for the revision it claims).

``dev``'s gpt2 has no room for a candidate: it rolls in place, and its judge Job asks the model's user-facing Service
right after the roll (issue 49). Its Job's container, as the plan declares it, is also run here against the served
gpt2 (``tests/system/judge_command.py``): its exit code and termination message are the verdict ``up`` reads.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from components.probe import IntegrationProbeProvider, ProbeFailedError
from tests.plans import StackPlans
from tests.system.judge_command import run_judge_container
from tests.system.realtriton.conftest import ServeTriton
from tests.system.realtriton.repos import render_with_cli
from tests.tritonft.convert.models import Model
from tests.tritonft.reference.checkpoints import GPT2_TEST_DIMS, VARIANTS, Variant, word_tokenizer
from tritonft.cli import main
from tritonft.local_triton import LocalTriton, TritonRuntime
from tritonft.probe.in_cluster import CONFIG_ENV
from tritonft.probe.judge_reference import REFERENCE_FILE, JudgeReference
from tritonft.spec import Family, ModelSpec
from tritonft.synth.plandiff import load_plan as load_resources

pytestmark = pytest.mark.slow

JUDGE = "pulumi-python:dynamic/tritonft:InClusterJudge"
PLANNED: dict[Family, tuple[str, str]] = {
    Family.T5: ("dev", "t5-small"),
    Family.GPT2: ("dev", "gpt2"),
    Family.GPTJ: ("staging", "gpt-j-6b"),
}
"""Where each family's judge is declared: (stack, model)."""
SEEDED = {Family.T5: "t5", Family.GPT2: "gpt2", Family.GPTJ: "gptj"}
"""The seeded checkpoint standing in for each model's original weights."""


def seeded(family: Family) -> Variant:
    """The family's seeded checkpoint; GPT-2's with gpt2's 1024 positions (the plan's prompt + max_output_len 64 do
    not fit the golden's 64)."""
    variant = next(v for v in VARIANTS if v.name == SEEDED[family])
    if family is Family.GPT2:
        return dataclasses.replace(variant, options=(("dims", {**GPT2_TEST_DIMS, "positions": 1024}),))
    return variant


WRONG = ("random-weights", "another-seed", "wrong-dtype")
OTHER_SEED = 7919


def shuffled(model: Model, seed: int) -> Model:
    """``model`` with every tensor's values shuffled: random weights of the same shape and value distribution."""
    rng = np.random.default_rng(seed)
    tensors = {name: rng.permutation(t.reshape(-1)).reshape(t.shape) for name, t in model.tensors.items()}
    extra = {
        name: tensors.get("shared.weight", t) if name.endswith("embed_tokens.weight") else t
        for name, t in model.extra.items()
    }
    return dataclasses.replace(model, tensors=tensors, extra=extra)


def convert(hf: Path, out: Path, spec: ModelSpec, dtype: str) -> Path:
    code = main(
        ["convert", "--input", str(hf), "--output", str(out), "--tp", str(spec.tensor_parallel), "--dtype", dtype]
    )
    assert code == 0, f"tritonft convert {hf} failed"
    return out / f"{spec.tensor_parallel}-gpu"


def bf16_files_called(converted: Path, dtype: str) -> Path:
    """An fp32 conversion's files rewritten as bf16 (the top half of each float) while ``config.ini`` says ``dtype``:
    shards converted at bf16 for a model served as fp16 (FT reads the files as ``config.ini`` says)."""
    for path in converted.glob("*.bin"):
        bits = np.fromfile(path, dtype="<u4")
        (bits >> np.uint32(16)).astype("<u2").tofile(path)
    ini = converted / "config.ini"
    ini.write_text(re.sub(r"(?m)^weight_data_type = \w+$", f"weight_data_type = {dtype}", ini.read_text()))
    return converted


@dataclass(frozen=True)
class Planned:
    """One family's judge as a stack's program declares it, and the spec its conversion Job receives."""

    family: Family
    inputs: dict[str, Any]
    """What its judge Job is told to check (the probe's settings)."""
    judge: dict[str, Any]
    """The in-cluster judge's own inputs (its Job's manifest, the candidate it asks, its failure hint)."""
    spec: ModelSpec
    version: str
    """The serving version the judge judges (its resource's name ends with it)."""


def judge_settings(inputs: dict[str, Any]) -> dict[str, Any]:
    """What the in-cluster judge Job is told to check (its container's settings: the probe's own inputs)."""
    (container,) = inputs["job"]["spec"]["template"]["spec"]["containers"]
    return dict(json.loads(next(e["value"] for e in container["env"] if e["name"] == CONFIG_ENV)))


def planned_judge(out: Path, stack: str, model: str) -> tuple[str, dict[str, Any], dict[str, Any], ModelSpec]:
    """``model``'s in-cluster judge as ``stack``'s synthesized plan (in ``out``) declares it: the serving version it
    judges, what it is told to check (without the gateway's URL and headers: the tests ask the server directly), its
    own inputs, and the spec the model's Job receives."""
    judges = {r["name"]: dict(r["inputs"]) for r in load_resources(out) if r["type"] == JUDGE}
    (name,) = [name for name in judges if name.startswith(f"{stack}-{model}-judge-")]
    inputs = {k: v for k, v in judge_settings(judges[name]).items() if k not in ("gateway_url", "headers")}
    specs = [
        ModelSpec.from_json(yaml.safe_load(m.read_text())["data"]["spec.json"])
        for m in out.glob("manifests/*/configmap-*-spec.yaml")
    ]
    (spec,) = [s for s in specs if s.name == model]
    return name.removeprefix(f"{stack}-{model}-judge-"), inputs, judges[name], spec


@pytest.fixture(scope="module")
def planned(stack_plan: StackPlans) -> dict[Family, Planned]:
    found = {}
    for family, (stack, model) in PLANNED.items():
        # A model with room for a candidate is judged before it takes traffic, one without (dev's gpt2) right after
        # it rolled in place: by the same in-cluster judge Job, declared by the program.
        version, inputs, judge, spec = planned_judge(stack_plan(stack).out, stack, model)
        found[family] = Planned(family, inputs, judge, spec, version)
    return found


@dataclass(frozen=True)
class Checkpoints:
    """Per family: the original weights (Hugging Face files with their tokenizer) and the Job's reference file."""

    hf: dict[Family, Path]
    reference: dict[Family, Path]


@pytest.fixture(scope="module")
def originals(planned: dict[Family, Planned], tmp_path_factory: pytest.TempPathFactory) -> Checkpoints:
    hf, reference = {}, {}
    for family, plan in planned.items():
        variant = seeded(family)
        directory = variant.save(tmp_path_factory.mktemp(f"original-{family}") / "hf")
        word_tokenizer(int(variant.model().config["vocab_size"]), family, directory)
        spec_path = directory.parent / "spec.json"
        spec_path.write_text(plan.spec.to_json())
        out = directory.parent / REFERENCE_FILE
        # The reference Job's step, as its script runs it.
        assert main(["reference", "--input", str(directory), "--spec", str(spec_path), "--out", str(out)]) == 0
        hf[family], reference[family] = directory, out
    return Checkpoints(hf, reference)


def served_weights(kind: str, family: Family, original: Path, spec: ModelSpec, scratch: Path) -> Path:
    """The converted ``<TP>-gpu`` directory the served model of ``kind`` reads."""
    dtype = str(spec.weight_dtype)
    variant = seeded(family)
    if kind == "right":
        return convert(original, scratch / "ft", spec, dtype)
    if kind == "wrong-dtype":
        return bf16_files_called(convert(original, scratch / "ft", spec, "fp32"), dtype)
    model = (
        shuffled(variant.model(), 1)
        if kind == "random-weights"
        else dataclasses.replace(variant, seed=OTHER_SEED).model()
    )
    hf = model.save(scratch / "hf")
    return convert(hf, scratch / "ft", spec, dtype)


@pytest.fixture(scope="module")
def served(
    planned: dict[Family, Planned],
    originals: Checkpoints,
    serve_triton: ServeTriton,
    newest_runtime: TritonRuntime,
    tmp_path_factory: pytest.TempPathFactory,
) -> Callable[[str], LocalTriton]:
    """``served(kind)``: a real Triton serving the three families' models of ``kind`` under the plans' names, each
    ensemble carrying the reference its Jobs rendered in. On tritonserver 2.51.0 (the reference engine is
    code for the image's Python 3.10)."""
    servers: dict[str, LocalTriton] = {}

    def serve(kind: str) -> LocalTriton:
        if kind not in servers:
            repository = tmp_path_factory.mktemp(f"judged-{kind}")
            for family, plan in planned.items():
                scratch = tmp_path_factory.mktemp(f"{kind}-{family}")
                weights = served_weights(kind, family, originals.hf[family], plan.spec, scratch)
                render_with_cli(
                    plan.spec,
                    repository,
                    originals.hf[family],
                    scratch,
                    "--checkpoint",
                    str(weights),
                    "--checkpoint-path",
                    str(weights),
                    "--engine",
                    "reference",
                    "--judge-reference",
                    str(originals.reference[family]),
                )
            servers[kind] = serve_triton(repository, runtime=newest_runtime)
        return servers[kind]

    return serve


def judge(plan: Planned, server: LocalTriton) -> dict[str, Any]:
    """The judge's inputs with ``server`` as the candidate it asks (what its candidate's Service leads to)."""
    grpc = plan.inputs.get("protocol") == "grpc"
    endpoint = f"grpc://{server.grpc_url}" if grpc else f"http://{server.http_url}"
    return {**plan.inputs, "endpoint": endpoint}


FAMILIES = list(PLANNED)


@pytest.mark.parametrize("family", FAMILIES, ids=str)
def test_the_plans_judge_asks_the_reference_of_the_original_weights(
    planned: dict[Family, Planned], family: Family
) -> None:
    (target,) = planned[family].inputs["models"]
    assert target["reference"] is True
    assert target["family"] == str(family)


@pytest.mark.parametrize("family", FAMILIES, ids=str)
def test_the_right_model_passes_its_judge(
    planned: dict[Family, Planned], served: Callable[[str], LocalTriton], family: Family
) -> None:
    plan = planned[family]

    done = IntegrationProbeProvider().create(judge(plan, served("right")))

    assert done.outs is not None and done.outs["ok"] is True
    assert done.outs["model_status"] == {plan.spec.name: "ok"}
    (inference,) = [c for c in done.outs["report"]["checks"] if c["check"] == "inference"]
    assert "follow the reference of the original weights" in inference["detail"], inference["detail"]


@pytest.mark.parametrize("kind", WRONG)
@pytest.mark.parametrize("family", FAMILIES, ids=str)
def test_a_wrong_model_fails_its_judge_naming_the_prompt_and_both_answers(
    planned: dict[Family, Planned],
    originals: Checkpoints,
    served: Callable[[str], LocalTriton],
    family: Family,
    kind: str,
) -> None:
    plan = planned[family]
    reference = JudgeReference.from_json(originals.reference[family].read_text())

    with pytest.raises(ProbeFailedError) as failed:
        IntegrationProbeProvider().create(judge(plan, served(kind)))

    assert_names_a_prompt_and_both_answers(str(failed.value), plan.spec.name, reference)


def assert_names_a_prompt_and_both_answers(message: str, model: str, reference: JudgeReference) -> None:
    """A failed judgement of ``model`` names a judged prompt, the reference's answer to it and a served one that is
    not the reference's."""
    assert f"inference[{model}]" in message, message
    assert "differ from the reference of the original weights" in message, message
    named = [p for p in reference.prompts if f"the answer to {p.prompt!r} is not the reference's: served " in message]
    assert named, message
    first = named[0]
    assert "reference " + repr(first.answer[:100])[:-1] in message, message
    said = re.search(
        rf"the answer to {re.escape(repr(first.prompt))} is not the reference's: served '([^']*)'", message
    )
    assert said is not None and said.group(1) != first.answer[: len(said.group(1))], message


def test_devs_gpt2_rolls_in_place_and_is_judged_at_its_user_facing_service(planned: dict[Family, Planned]) -> None:
    plan = planned[Family.GPT2]
    assert plan.judge["candidate_service"] == plan.judge["candidate_deployment"] == "dev-gpt2"
    assert plan.inputs["endpoint"] == "http://dev-gpt2.triton.svc:8000"
    assert "rolled in place" in plan.judge["failure_hint"]


def test_the_in_place_gpt2s_judge_job_passes_the_right_model(
    planned: dict[Family, Planned], served: Callable[[str], LocalTriton], tmp_path: Path
) -> None:
    plan = planned[Family.GPT2]

    verdict = run_judge_container(plan.judge["job"], f"http://{served('right').http_url}", tmp_path)

    assert verdict.passed, verdict.message
    assert verdict.message == "passed: gpt2 ok"


@pytest.mark.parametrize("kind", ["random-weights", "another-seed"])
def test_the_in_place_gpt2s_judge_job_fails_a_wrong_model_naming_the_prompt_and_both_answers(
    planned: dict[Family, Planned],
    originals: Checkpoints,
    served: Callable[[str], LocalTriton],
    tmp_path: Path,
    kind: str,
) -> None:
    plan = planned[Family.GPT2]
    reference = JudgeReference.from_json(originals.reference[Family.GPT2].read_text())

    verdict = run_judge_container(plan.judge["job"], f"http://{served(kind).http_url}", tmp_path)

    assert not verdict.passed, "the Job fails (exit 1): `up` fails with the version serving"
    message = verdict.message
    assert "inference[gpt2]" in message and "differ from the reference of the original weights" in message, message
    named = [p for p in reference.prompts if f"the answer to {p.prompt!r} is not the reference's: served " in message]
    assert named, message
    prompt = named[0]
    said = message.split(f"the answer to {prompt.prompt!r} is not the reference's: served ", 1)[1]
    served_repr, _, rest = said.partition(", reference ")
    assert rest.startswith(repr(shortened(prompt.answer))), message
    served_answer = ast.literal_eval(served_repr)
    assert not served_answer.startswith(prompt.answer), message


def shortened(text: str, limit: int = 160) -> str:
    """An answer as a failed judgement quotes it (cut at 160 characters)."""
    return text if len(text) <= limit else text[: limit - 3] + "..."
