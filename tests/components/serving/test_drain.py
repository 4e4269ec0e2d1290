"""The Triton pod's drain, asserted on the captured Deployment: it leaves a rollout or a scale-in without failing a
request (the behaviour itself: ``tests/system/realtriton/test_drain.py``)."""

from __future__ import annotations

import pytest

from components.common.workload import ENDPOINTS_LAG_S, SERVICE_DNS_TTL_S
from components.serving.server_spec import TRITON_EXIT_S, TRITONSERVER
from tests.components.fixtures import GPTJ_6B, T5_SMALL, pod_spec, served_deployment, triton_container
from tritonft.errors import UserError
from tritonft.gateway.triton import REFRESH_S
from tritonft.synth.engine import RecordingMocks


def pre_stop_sleep(container: dict[str, object]) -> int:
    command = container["lifecycle"]["preStop"]["exec"]["command"]  # type: ignore[index]
    assert command[0] == "sleep"
    return int(command[1])


def test_the_pre_stop_hook_waits_until_no_client_picks_the_pod_and_its_longest_request_ended(
    mocks: RecordingMocks,
) -> None:
    deployment = served_deployment(mocks, T5_SMALL, longest_request_seconds=90)
    assert pre_stop_sleep(triton_container(deployment)) >= SERVICE_DNS_TTL_S + REFRESH_S + ENDPOINTS_LAG_S + 90


def test_the_grace_period_outlasts_the_drain_and_tritons_exit(mocks: RecordingMocks) -> None:
    deployment = served_deployment(mocks, T5_SMALL, longest_request_seconds=90)
    slept = pre_stop_sleep(triton_container(deployment))
    assert pod_spec(deployment)["terminationGracePeriodSeconds"] > slept + TRITON_EXIT_S


def test_a_model_under_mpirun_drains_before_mpirun_gets_sigterm(mocks: RecordingMocks) -> None:
    container = triton_container(served_deployment(mocks, GPTJ_6B, longest_request_seconds=60))
    assert container["command"][0] == "mpirun" and TRITONSERVER in container["command"]
    assert pre_stop_sleep(container) >= 60, "the hook runs before the kubelet signals PID 1 (mpirun)"


def test_a_longest_request_under_a_second_is_refused_naming_it(mocks: RecordingMocks) -> None:
    with pytest.raises(UserError, match="longest_request_seconds must be at least 1"):
        served_deployment(mocks, T5_SMALL, longest_request_seconds=0)


def test_a_vllm_pod_waits_for_its_engine_to_be_idle_bounded_by_its_longest_request(mocks: RecordingMocks) -> None:
    from components.serving.server_spec import TRITON_PROPAGATION_S
    from tests.components.serving.test_service_vllm import LLAMA
    from tritonft.engines.vllm import health
    from tritonft.engines.vllm.versions import TRITON_VERSION as VLLM_RELEASE

    deployment = served_deployment(mocks, LLAMA, longest_request_seconds=880, triton_release=VLLM_RELEASE)
    command = triton_container(deployment)["lifecycle"]["preStop"]["exec"]["command"]
    assert command == health.drain_command("llama", TRITON_PROPAGATION_S, 880)
    grace = pod_spec(deployment)["terminationGracePeriodSeconds"]
    assert grace > TRITON_PROPAGATION_S + 880 + health.DRAIN_OVERRUN_S + TRITON_EXIT_S
