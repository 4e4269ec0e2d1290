"""The judge of a candidate version, as ``local``'s program declares it, run against a real Triton serving the
candidate: a new "revision" that answers wrong (a random-weight BERT served as ``minilm``: its vectors have another
width) fails the ``up`` naming the wrong answer; the real all-MiniLM-L6-v2 passes. Each server's own request counters
show the judge asked the candidate only, never the serving version.

The judge is a Job in the cluster (issue 51: no candidate has a route at the edge): its container's command and
environment, as the plan declares them, run here with the candidate's server as the address its Service would give
(``tests/system/judge_command.py``): its exit code and termination message are what the in-cluster judge reads of
the Job.
``tests/system/controlplane/test_judged_promotion.py`` shows the Job made, scheduled and read on the real API server,
and that the user-facing Services never select a candidate before its judge passed.
"""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from components.probe.in_cluster import JudgeOutcome
from tests.plans import StackPlans
from tests.system.judge_command import run_judge_container
from tests.system.realtriton.conftest import EMBEDDER, ServeTriton
from tritonft.encoder.repo import EncoderServing, OnnxEngine, write_encoder_repository
from tritonft.local_triton import LocalTriton, TritonRuntime
from tritonft.probe.in_cluster import CONFIG_ENV
from tritonft.synth.plandiff import load_plan as load_resources

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[3]
JUDGE_PREFIX = "local-minilm-judge-"
JUDGE = "pulumi-python:dynamic/tritonft:InClusterJudge"


@pytest.fixture(scope="module")
def judge_inputs(stack_plan: StackPlans) -> dict[str, Any]:
    """The inputs ``local``'s program gives the judge of minilm's serving version."""
    (judge,) = [
        r for r in load_resources(stack_plan("local").out) if r["type"] == JUDGE and r["name"].startswith(JUDGE_PREFIX)
    ]
    return dict(judge["inputs"])


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


def verdict(inputs: dict[str, Any], candidate: LocalTriton, workdir: Path) -> JudgeOutcome:
    """What the judge Job leaves (its exit code, its termination message) when its Service leads to ``candidate``."""
    return run_judge_container(inputs["job"], f"http://{candidate.http_url}", workdir)


def test_the_judge_job_asks_minilms_candidate_service_in_the_cluster_never_the_edge_or_the_gateway(
    judge_inputs: dict[str, Any],
) -> None:
    (container,) = judge_inputs["job"]["spec"]["template"]["spec"]["containers"]
    settings = json.loads(next(e["value"] for e in container["env"] if e["name"] == CONFIG_ENV))
    service = judge_inputs["candidate_service"]
    assert re.fullmatch(r"local-minilm-[0-9a-f]{8}", service)
    assert settings["endpoint"] == f"http://{service}.triton-local.svc:8000"
    assert not settings.get("gateway_url"), "never through the gateway, which calls the serving version"
    assert "headers" not in settings, "no credential: Triton is asked directly"


def test_a_candidate_that_answers_wrong_fails_up_naming_the_answer_and_the_stable_gets_no_request(
    judge_inputs: dict[str, Any], wrong_candidate: LocalTriton, encoder_triton: LocalTriton, tmp_path: Path
) -> None:
    stable_before, candidate_before = successes(encoder_triton), successes(wrong_candidate)

    failed = verdict(judge_inputs, wrong_candidate, tmp_path)

    assert not failed.passed, "the Job fails (exit 1): its candidate is not promoted"
    # Its answers are vectors of the random BERT's width, not all-MiniLM-L6-v2's 384: said in the termination message
    # the in-cluster judge puts in the failed `up`'s message.
    assert re.search(
        rf"inference\[{EMBEDDER}\]: embeddings of shape \[\d+, 64\], expected \[\d+, 384\]", failed.message
    ), failed.message
    assert successes(encoder_triton) == stable_before, "the serving version received no request"
    assert successes(wrong_candidate) > candidate_before, "the candidate was asked"


def test_a_candidate_that_answers_right_passes_its_judge(
    judge_inputs: dict[str, Any], encoder_triton: LocalTriton, tmp_path: Path
) -> None:
    passed = verdict(judge_inputs, encoder_triton, tmp_path)

    assert passed.passed, passed.message
    assert passed.message == f"passed: {EMBEDDER} ok"
