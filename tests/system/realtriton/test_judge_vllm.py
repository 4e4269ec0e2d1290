"""The judge of a Llama-family version, as ``prod``'s program declares it, against a real Triton with the real vLLM
engine: it passes the model whose answers are its original weights' and fails each wrong one, naming the prompt and
both answers.

``prod``'s synthesized plan gives the judge's inputs (its in-cluster judge of ``llama-3-1-8b``: the model's name,
its vLLM contract, ``reference: true``, the reference's 16 greedy steps). The "original weights" are the vLLM tests'
seeded tiny Llama (:mod:`tests.tritonft.engines.vllm.checkpoints`, a ``LlamaForCausalLM`` like Llama 3.1 8B), whose
spec (:func:`tritonft.engines.vllm.local.spec_for`, float32 on this CPU) stands in for the 8B's under the plan's name,
repo and revision: the Job's reference step (``tritonft reference``, the command its script runs) computes the
reference from the checkpoint's files, and it is rendered into the model's ``config.pbtxt`` as the Job's ``tritonft
repo --judge-reference`` renders it (the same :func:`tritonft.engines.vllm.repository.repository_files`; its
``model.json`` with this CPU's engine arguments, as the other real-vLLM tests'). Served by the real Triton + vLLM
(one engine at a time, each ~1-2 min to start here):

* the right model: the original weights;
* random weights of the same shape (every tensor's values permuted);
* another seed's weights (the same builder, another seed);
* the right weights with a chat template that drops the system message (the tiny checkpoint's template with system
  messages left out): the judge renders the reference's conversation from the version's ``tokenizer_config.json``
  (in the cluster, its checkpoint mounted in the judge's pod; here that file on this machine) as the gateway would.

Each wrong model is served with the right model's reference (the reference of the revision it claims).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from components.probe import IntegrationProbeProvider, ProbeFailedError
from components.serving.judge_job import CHECKPOINT_MOUNT
from tests.plans import StackPlans
from tests.system.realtriton.test_judge_reference import assert_names_a_prompt_and_both_answers, planned_judge
from tests.system.realtriton.vllm_server import OPTIONS
from tests.tritonft.engines.vllm.checkpoints import VARIANTS, write
from tests.tritonft.reference.test_judge_llama import drop_system_messages
from tritonft.cli import main
from tritonft.engines.vllm import local
from tritonft.local_triton import LocalTriton
from tritonft.probe.judge_reference import REFERENCE_FILE, REFERENCE_STEPS, JudgeReference
from tritonft.repo.render import judge_reference_text
from tritonft.spec import Family, ModelSpec

pytestmark = pytest.mark.slow

STACK, MODEL = "prod", "llama-3-1-8b"
"""Where the Llama's judge is declared."""
WRONG = ("random-weights", "another-seed")
OTHER_SEED = 7919


@dataclass(frozen=True)
class Planned:
    inputs: dict[str, Any]
    """What its judge Job is told to check (the probe's settings), as the plan declares them."""
    spec: ModelSpec
    """The spec its Job receives (the 8B's)."""
    job: dict[str, Any]
    """Its judge Job's manifest."""


@pytest.fixture(scope="module")
def planned(stack_plan: StackPlans) -> Planned:
    _, inputs, judge_inputs, spec = planned_judge(stack_plan(STACK).out, STACK, MODEL)
    return Planned(inputs, spec, judge_inputs["job"])


@dataclass(frozen=True)
class Original:
    hf: Path
    spec: Path
    """The tiny Llama's spec under the plan's name, repo and revision (what the Job's steps are given here)."""
    reference: Path


@pytest.fixture(scope="module")
def original(planned: Planned, tmp_path_factory: pytest.TempPathFactory) -> Original:
    root = tmp_path_factory.mktemp("judged-llama")
    hf = write(VARIANTS[0], root / "hf")
    tiny = local.spec_for(MODEL, hf, OPTIONS)
    spec = replace(tiny, hf_repo=planned.spec.hf_repo, revision=planned.spec.revision)
    spec_path = root / "spec.json"
    spec_path.write_text(spec.to_json())
    reference = root / REFERENCE_FILE
    # The Job's reference step, as its script runs it (on the files the download put on the store).
    assert main(["reference", "--input", str(hf), "--spec", str(spec_path), "--out", str(reference)]) == 0
    return Original(hf, spec_path, reference)


def wrong_weights(kind: str, original: Path, out: Path) -> Path:
    """A copy of ``original`` whose ``model.safetensors`` holds the ``kind`` of wrong weights (same shapes)."""
    if kind == "another-seed":
        return write(replace(VARIANTS[0], seed=OTHER_SEED), out)
    write(VARIANTS[0], out)
    rng = np.random.default_rng(1)
    tensors = load_file(str(out / "model.safetensors"))
    permuted = {name: rng.permutation(t.reshape(-1)).reshape(t.shape) for name, t in tensors.items()}
    save_file(permuted, str(out / "model.safetensors"), metadata={"format": "pt"})
    return out


@pytest.fixture(scope="module")
def served(original: Original, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[str], LocalTriton]]:
    """``served(kind)``: a real Triton + vLLM serving the ``kind`` of weights under the plan's model name, its
    ``config.pbtxt`` carrying the right model's reference (as the Job's ``tritonft repo --judge-reference``). One
    server at a time: asking for another kind stops the previous one."""
    running: dict[str, LocalTriton] = {}

    def serve(kind: str) -> LocalTriton:
        if kind in running:
            return running[kind]
        for server in running.values():
            server.stop()
        running.clear()
        work = tmp_path_factory.mktemp(f"vllm-{kind}")
        weights = original.hf if kind == "right" else wrong_weights(kind, original.hf, work / "hf")
        # The files its Job renders (config.pbtxt carrying the reference: tritonft.engines.vllm.repository, which
        # `tritonft repo --judge-reference` writes), with the CPU's engine arguments (enforce_eager: no compilation).
        reference = judge_reference_text(original.reference)
        repository = local.render({MODEL: weights}, work / "repository", OPTIONS, judge_references={MODEL: reference})
        server = local.server(repository, work / "tritonserver.log")
        server.start()
        running[kind] = server
        return server

    yield serve
    for server in running.values():
        server.stop()


def judge(planned: Planned, server: LocalTriton, checkpoint: Path) -> dict[str, Any]:
    """The plan's judge inputs with ``server`` as the version it asks (what the candidate's Service leads to) and
    ``checkpoint`` as the version's files its pod mounts (their ``tokenizer_config.json`` on this machine)."""
    (target,) = planned.inputs["models"]
    mounted = {**target, "tokenizer_config": str(checkpoint / Path(target["tokenizer_config"]).name)}
    return {**planned.inputs, "endpoint": f"http://{server.http_url}", "models": [mounted]}


def test_the_plans_judge_asks_the_llama_against_its_reference(planned: Planned) -> None:
    (target,) = planned.inputs["models"]
    assert (target["reference"], target["vllm"], target["family"]) == (True, True, "llama")
    assert target["max_tokens"] == REFERENCE_STEPS[Family.LLAMA]


def test_the_plans_judge_renders_its_chats_from_the_versions_own_checkpoint(planned: Planned) -> None:
    (target,) = planned.inputs["models"]
    pod = planned.job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    (mount,) = [m for m in container["volumeMounts"] if m["name"] == "store"]

    assert target["tokenizer_config"] == f"{CHECKPOINT_MOUNT}/tokenizer_config.json"
    assert mount == {
        "name": "store",
        "mountPath": CHECKPOINT_MOUNT,
        "subPath": f"hf/{MODEL}/{planned.spec.revision}",
        "readOnly": True,
    }, "where the gateway reads the version's chat template"


def test_the_right_llama_passes_its_judge(
    planned: Planned, original: Original, served: Callable[[str], LocalTriton]
) -> None:
    done = IntegrationProbeProvider().create(judge(planned, served("right"), original.hf))

    assert done.outs is not None and done.outs["ok"] is True
    assert done.outs["model_status"] == {MODEL: "ok"}
    (inference,) = [c for c in done.outs["report"]["checks"] if c["check"] == "inference"]
    assert "5 answers follow the reference of the original weights" in inference["detail"], inference["detail"]
    assert "1 of them a chat through the candidate's chat template" in inference["detail"], inference["detail"]


def test_a_chat_template_that_drops_the_system_message_fails_its_judge_naming_the_chat_and_both_answers(
    planned: Planned, original: Original, served: Callable[[str], LocalTriton], tmp_path: Path
) -> None:
    reference = JudgeReference.from_json(original.reference.read_text())
    dropped = drop_system_messages(original.hf, tmp_path / "dropped")

    with pytest.raises(ProbeFailedError) as failed:
        IntegrationProbeProvider().create(judge(planned, served("right"), dropped))

    message = str(failed.value)
    print(message)  # the verdict as `up` reports it (shown with -rA)
    assert "1 of 5 answers differ" in message, "the right weights: every plain prompt still passes"
    (chat,) = reference.chats
    # Both answers named; the verdict does not rest on them differing (a dropped message fails whatever is answered).
    assert f"the answer to {chat.prompt!r} is not the reference's: served '" in message
    assert "reference " + repr(chat.answer[:100])[:-1] in message
    assert (
        "the candidate's chat template renders the conversation wrong: the system message's content "
        "'Answer with exactly one word, in French.' is not in it at all" in message
    )
    assert "tokens of the conversation as the candidate's template renders it, the reference " in message


@pytest.mark.parametrize("kind", WRONG)
def test_a_wrong_llama_fails_its_judge_naming_the_prompt_and_both_answers(
    planned: Planned, original: Original, served: Callable[[str], LocalTriton], kind: str
) -> None:
    reference = JudgeReference.from_json(original.reference.read_text())

    with pytest.raises(ProbeFailedError) as failed:
        IntegrationProbeProvider().create(judge(planned, served(kind), original.hf))

    message = str(failed.value)
    print(message)  # the verdict as `up` reports it (shown with -rA)
    assert_names_a_prompt_and_both_answers(message, MODEL, reference)
