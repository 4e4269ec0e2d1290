"""The gateway pod's drain: out of the edge's endpoints, then its longest request, before uvicorn is stopped."""

from __future__ import annotations

from typing import Any

from components.common.workload import ENDPOINTS_LAG_S
from components.gateway.spec import GatewayPod, gateway_pod_spec


def pod(deadline_seconds: int) -> dict[str, Any]:
    gateway = GatewayPod("tools@sha256:" + "0" * 64, "specs", "500m", "512Mi", deadline_seconds, {})
    return gateway_pod_spec((), gateway, {"app": "gw"})


def test_the_grace_period_is_longer_than_the_gateways_deadline() -> None:
    assert pod(90)["terminationGracePeriodSeconds"] > 90


def test_the_pre_stop_hook_outlasts_the_edge_dropping_the_pod_and_the_deadline() -> None:
    (container,) = pod(90)["containers"]
    command = container["lifecycle"]["preStop"]["exec"]["command"]
    assert command[0] == "sleep" and int(command[1]) >= ENDPOINTS_LAG_S + 90


def llama(time_per_output_token_s: float) -> Any:
    from dataclasses import replace

    from tests.tritonft.engines.vllm.test_engine import LLAMA_8B  # max_model_len 8192

    assert LLAMA_8B.vllm is not None
    return replace(LLAMA_8B, vllm=replace(LLAMA_8B.vllm, time_per_output_token_s=time_per_output_token_s))


def served_pod(model: Any, deadline_seconds: int) -> dict[str, Any]:
    from components.gateway.spec import Backend

    gateway = GatewayPod("tools@sha256:" + "0" * 64, "specs", "500m", "512Mi", deadline_seconds, {})
    return gateway_pod_spec((Backend(model, "llama-pods:8001", {"app": "llama"}),), gateway, {"app": "gw"})


def test_a_vllm_models_longest_answer_is_what_the_gateway_pod_drains_for() -> None:
    (container,) = served_pod(llama(0.05), 60)["containers"]
    command = container["lifecycle"]["preStop"]["exec"]["command"]
    assert int(command[1]) >= ENDPOINTS_LAG_S + 60 + 8192 * 0.05  # 469.6 s: the base and 8192 tokens at 50 ms
    assert (
        "--deadline" in container["command"]
        and container["command"][container["command"].index("--deadline") + 1] == "60"
    )


def test_a_faster_stated_pace_drains_for_less() -> None:
    slow, fast = (served_pod(llama(pace), 60)["terminationGracePeriodSeconds"] for pace in (0.05, 0.01))
    assert fast < slow
