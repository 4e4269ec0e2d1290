"""prod's plan: Llama 3.1 8B's requests get the gateway's 60 s plus its longest answer (16384 tokens at the default
0.05 s each: 880 s), and everything in front of and behind the gateway allows it: the ``/v1`` route and the edge's
policy (every route's timeout, GRPCRoutes included) outlast it, the gateway's pods and the model's Triton pods drain
for it, while the FasterTransformer models keep the 60 s."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from components.common.workload import ENDPOINTS_LAG_S
from tests.plans import StackPlans
from tritonft.spec import DEFAULT_TIME_PER_OUTPUT_TOKEN_S, ModelSpec
from tritonft.synth.engine import Registered
from tritonft.synth.result import SynthResult

LLAMA = "llama-3-1-8b"
LLAMA_DEADLINE_S = math.ceil(60 + 16384 * DEFAULT_TIME_PER_OUTPUT_TOKEN_S)


@pytest.fixture(scope="module")
def prod(stack_plan: StackPlans) -> SynthResult:
    return stack_plan("prod")


def _of_type(result: SynthResult, typ: str) -> list[Registered]:
    return [r for r in result.resources if r.typ == typ]


def _seconds(duration: str) -> int:
    assert duration.endswith("s"), duration
    return int(duration.removesuffix("s"))


def _pre_stop(deployment: Registered) -> int:
    (container, *_) = deployment.inputs["spec"]["template"]["spec"]["containers"]
    command: list[str] = container["lifecycle"]["preStop"]["exec"]["command"]
    return int(command[1])


def _deployments(result: SynthResult, component: str, model: str | None = None) -> list[Registered]:
    """The Deployments of ``component`` (``triton``, ``gateway``), of ``model`` when given."""
    found = []
    for d in _of_type(result, "kubernetes:apps/v1:Deployment"):
        labels = d.inputs["metadata"]["labels"]
        if labels.get("app.kubernetes.io/component") == component and model in (None, labels.get("triton-ft/model")):
            found.append(d)
    assert found, f"no {component} Deployment of {model}"
    return found


def _gateway_spec(result: SynthResult, model: str) -> ModelSpec:
    (specs,) = [c for c in _of_type(result, "kubernetes:core/v1:ConfigMap") if c.name.endswith("gateway-specs")]
    return ModelSpec.from_json(specs.inputs["data"][f"{model}.json"])


def test_the_gateways_spec_of_llama_states_its_pace(prod: SynthResult) -> None:
    vllm = _gateway_spec(prod, LLAMA).vllm
    assert vllm is not None and vllm.time_per_output_token_s == DEFAULT_TIME_PER_OUTPUT_TOKEN_S == 0.05
    assert LLAMA_DEADLINE_S == 880


def test_the_v1_route_and_the_edges_policy_outlast_llamas_deadline(prod: SynthResult) -> None:
    routes = [r for r in _of_type(prod, "kubernetes:gateway.networking.k8s.io/v1:HTTPRoute") if "gateway" in r.name]
    (api,) = [r for r in routes if r.inputs["spec"]["rules"][0]["matches"][0]["path"]["value"] == "/v1"]
    route_timeout = _seconds(api.inputs["spec"]["rules"][0]["timeouts"]["request"])
    policies = _of_type(prod, "kubernetes:gateway.envoyproxy.io/v1alpha1:BackendTrafficPolicy")
    (policy,) = [p for p in policies if "timeout" in p.inputs["spec"]]  # the Gateway's (the public routes' has none)
    policy_timeout = _seconds(policy.inputs["spec"]["timeout"]["http"]["requestTimeout"])
    assert route_timeout == policy_timeout > LLAMA_DEADLINE_S


def test_the_gateway_pods_drain_for_llamas_longest_answer(prod: SynthResult) -> None:
    (deployment,) = _deployments(prod, "gateway")
    template: dict[str, Any] = deployment.inputs["spec"]["template"]["spec"]
    assert template["terminationGracePeriodSeconds"] > _pre_stop(deployment) + LLAMA_DEADLINE_S


def test_the_gateway_pods_pre_stop_waits_for_the_edge_only_and_uvicorn_drains_its_requests(prod: SynthResult) -> None:
    (deployment,) = _deployments(prod, "gateway")
    assert _pre_stop(deployment) == ENDPOINTS_LAG_S


def test_llamas_triton_pods_drain_for_its_deadline_at_most_and_t5s_keep_the_base(prod: SynthResult) -> None:
    from tritonft.engines.vllm import health

    for deployment in _deployments(prod, "triton", LLAMA):
        pod = deployment.inputs["spec"]["template"]["spec"]
        (container,) = pod["containers"]
        command = container["lifecycle"]["preStop"]["exec"]["command"]
        assert command[:3] == ["python3", "-c", health.DRAIN_SCRIPT]  # until the engine is idle, at most:
        assert float(command[6]) >= LLAMA_DEADLINE_S
        assert pod["terminationGracePeriodSeconds"] > float(command[5]) + float(command[6]) + health.DRAIN_OVERRUN_S
    t5 = [_pre_stop(d) for d in _deployments(prod, "triton", "t5-3b")]
    assert all(pre_stop < 60 + 60 for pre_stop in t5), json.dumps(t5)
