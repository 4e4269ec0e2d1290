"""The gateway pod's drain: out of the edge's endpoints, then SIGTERM; uvicorn lets its requests end within the grace
period (tests/tritonft/gateway/test_deadlines.py shows it on a real server)."""

from __future__ import annotations

from typing import Any

from components.common.workload import ENDPOINTS_LAG_S
from components.gateway.spec import GatewayPod, gateway_pod_spec


def pod(deadline_seconds: int) -> dict[str, Any]:
    gateway = GatewayPod("tools@sha256:" + "0" * 64, "specs", "500m", "512Mi", deadline_seconds, {})
    return gateway_pod_spec((), gateway, {"app": "gw"})


def test_the_grace_period_is_longer_than_the_gateways_deadline() -> None:
    assert pod(90)["terminationGracePeriodSeconds"] > 90


def test_the_pre_stop_hook_sleeps_until_the_edge_has_dropped_the_pod_only() -> None:
    (container,) = pod(90)["containers"]
    command = container["lifecycle"]["preStop"]["exec"]["command"]
    assert command == ["sleep", str(ENDPOINTS_LAG_S)]


def test_the_grace_period_covers_the_edge_dropping_the_pod_then_the_deadline() -> None:
    assert pod(90)["terminationGracePeriodSeconds"] >= ENDPOINTS_LAG_S + 90


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
    served = served_pod(llama(0.05), 60)
    (container,) = served["containers"]
    # 469.6 s: the base and 8192 tokens at 50 ms
    assert served["terminationGracePeriodSeconds"] >= ENDPOINTS_LAG_S + 60 + 8192 * 0.05
    assert (
        "--deadline" in container["command"]
        and container["command"][container["command"].index("--deadline") + 1] == "60"
    )


def test_a_faster_stated_pace_drains_for_less() -> None:
    slow, fast = (served_pod(llama(pace), 60)["terminationGracePeriodSeconds"] for pace in (0.05, 0.01))
    assert fast < slow
