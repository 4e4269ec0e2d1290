"""The judge of a candidate version, as ``local``'s program declares it, run by its real provider against a real
Triton serving the candidate: a new "revision" that answers wrong (a random-weight BERT served as ``minilm``: its
vectors have another width) fails the ``up`` naming the wrong answer; the real all-MiniLM-L6-v2 passes. Each
server's own request counters show the judge asked the candidate only, never the serving version.

The candidate is reached at its own address here, as its candidate Service (or its judge route on the edge) is
reached in a cluster: ``tests/system/controlplane/test_judged_promotion.py`` shows that the user-facing Services
never select a candidate before its judge passed.
"""

from __future__ import annotations

import re
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from components.probe import IntegrationProbeProvider, ProbeFailedError
from components.serving.promotion import CANDIDATE_HEADER
from tests.plans import StackPlans
from tests.system.realtriton.conftest import EMBEDDER, ServeTriton
from tritonft.encoder.repo import EncoderServing, OnnxEngine, write_encoder_repository
from tritonft.local_triton import LocalTriton, TritonRuntime
from tritonft.synth.plandiff import load_plan as load_resources

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[3]
JUDGE_PREFIX = "local-minilm-judge-"
PROBE = "pulumi-python:dynamic/tritonft:IntegrationProbe"


@pytest.fixture(scope="module")
def judge_inputs(stack_plan: StackPlans) -> dict[str, Any]:
    """The inputs ``local``'s program gives the judge of minilm's serving version."""
    (judge,) = [
        r for r in load_resources(stack_plan("local").out) if r["type"] == PROBE and r["name"].startswith(JUDGE_PREFIX)
    ]
    return {**judge["inputs"], "_version": judge["name"].removeprefix(JUDGE_PREFIX)}


@pytest.fixture(scope="module")
def wrong_candidate(
    serve_triton: ServeTriton,
    newest_runtime: TritonRuntime,
    tmp_path_factory: pytest.TempPathFactory,
    encoder_converted: Callable[..., Path],
    encoder_checkpoint: Callable[[str], Path],
) -> LocalTriton:
    """A new "revision" of minilm that answers wrong: a seeded random-weight BERT, served under minilm's name."""
    out = tmp_path_factory.mktemp("wrong-minilm")
    serving = EncoderServing(EMBEDDER, max_batch_size=16, engine=OnnxEngine.PYTHON)
    name = "bert-mean-normalized"
    write_encoder_repository(serving, encoder_converted(name), encoder_checkpoint(name), out)
    return serve_triton(out, runtime=newest_runtime)


def successes(server: LocalTriton) -> int:
    """minilm's successful requests on ``server`` (Triton's own counter)."""
    with urllib.request.urlopen(server.metrics_url, timeout=10) as answer:
        text = answer.read().decode()
    found = re.search(rf'^nv_inference_request_success{{model="{EMBEDDER}",version="1"}} (\d+)', text, flags=re.M)
    return int(found.group(1)) if found else 0


def judge_props(inputs: dict[str, Any], candidate: LocalTriton) -> dict[str, Any]:
    """The judge's inputs with the candidate's server as its endpoint (what its canary Ingress routes to)."""
    version = inputs["_version"]
    props = {k: v for k, v in inputs.items() if k != "_version"}
    return {**props, "endpoint": f"http://{candidate.http_url}", "headers": {CANDIDATE_HEADER: version}}


def test_the_judge_asks_minilms_public_host_never_the_gateway(judge_inputs: dict[str, Any]) -> None:
    # On ingress-nginx (local's edge) its header reaches the candidate's canary Ingress only.
    assert judge_inputs["endpoint"] == "http://minilm.local.triton.local"
    assert re.fullmatch(r"[0-9a-f]{8}", judge_inputs["_version"])
    assert not judge_inputs.get("gateway_url"), "never through the gateway, which calls the serving version"


def test_a_candidate_that_answers_wrong_fails_up_naming_the_answer_and_the_stable_gets_no_request(
    judge_inputs: dict[str, Any], wrong_candidate: LocalTriton, encoder_triton: LocalTriton
) -> None:
    stable_before, candidate_before = successes(encoder_triton), successes(wrong_candidate)

    with pytest.raises(ProbeFailedError) as failed:
        IntegrationProbeProvider().create(judge_props(judge_inputs, wrong_candidate))

    message = str(failed.value)
    assert message.startswith(f"integration probe of http://{wrong_candidate.http_url} failed:"), message
    # Its answers are vectors of the random BERT's width, not all-MiniLM-L6-v2's 384.
    assert re.search(rf"inference\[{EMBEDDER}\]: embeddings of shape \[\d+, 64\], expected \[\d+, 384\]", message), (
        message
    )
    assert successes(encoder_triton) == stable_before, "the serving version received no request"
    assert successes(wrong_candidate) > candidate_before, "the candidate was asked"


def test_a_candidate_that_answers_right_passes_its_judge(
    judge_inputs: dict[str, Any], encoder_triton: LocalTriton
) -> None:
    done = IntegrationProbeProvider().create(judge_props(judge_inputs, encoder_triton))

    assert done.outs is not None and done.outs["ok"] is True
    assert done.outs["model_status"] == {EMBEDDER: "ok"}
