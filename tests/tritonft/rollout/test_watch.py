"""The rollout watch ends the wait of a Triton that cannot load its model: once a pod crash-loops and its last run's
log says a model failed to load, it fails with the backend's own words (vLLM's for a vLLM model), instead of waiting
out the startup budget; a crash without that line is waited for, as before."""

from __future__ import annotations

from typing import Any

import pytest

from tritonft.kube import ApiError
from tritonft.rollout.verdict import NodeGrowth, load_failure
from tritonft.rollout.watch import RolloutFailedError, WatchConfig, watch_rollout

NS, NAME = "triton", "prod-llama"
LOG_LINE = (
    "E1126 20:16:01.810994 26741 model_lifecycle.cc:642] \"failed to load 'llama' version 1: Internal: "
    "SafetensorError: Error while deserializing header: incomplete metadata, file not fully covered\\n\\nAt:\\n  "
    '/opt/vllm/model_executor/model_loader/weight_utils.py(1208): safetensors_weights_iterator\\n"'
)
"""The line the real Triton 2.51 writes for a vLLM model whose weights were cut short (test_vllm_engine.py reads the
same words from the real server's log)."""
LOG = (
    f'I1126 20:15:55 server.cc:305] "starting"\n{LOG_LINE}\n'
    "error: creating server: Internal - failed to load all models\n"
)


class FakeKube:
    """The API as the watch reads it: one Deployment not rolled out, its pods, and their previous runs' logs."""

    def __init__(self, pods: list[dict[str, Any]], logs: dict[str, str]) -> None:
        self.pods, self.logs = pods, logs
        self.asked: list[tuple[str, dict[str, str]]] = []

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> Any:
        return {
            "metadata": {"name": name, "generation": 1},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "triton"}}},
            "status": {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1, "unavailableReplicas": 1},
        }

    def items(self, api_version: str, kind: str, namespace: str | None = None, selector: str = "") -> list[Any]:
        return self.pods if kind == "Pod" else []

    def request(self, method: str, path: str, *, params: dict[str, str] | None = None, **_: Any) -> Any:
        self.asked.append((path, dict(params or {})))
        pod = path.split("/pods/")[1].split("/", maxsplit=1)[0]
        if pod not in self.logs:
            raise ApiError(400, f'previous terminated container "triton" in pod "{pod}" not found')
        return self.logs[pod]


def pod(name: str, reason: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "status": {
            "phase": "Running",
            "containerStatuses": [
                {
                    "name": "triton",
                    "restartCount": 3,
                    "state": {"waiting": {"reason": reason}},
                    "lastState": {"terminated": {"exitCode": 1}},
                }
            ],
        },
    }


def watch(kube: FakeKube) -> None:
    config = WatchConfig(NS, NAME, NodeGrowth(autoscaler=False), deadline_s=0.0, poll_s=0.0)
    watch_rollout(kube, config)  # type: ignore[arg-type]


def test_a_crash_looping_triton_that_cannot_load_its_model_fails_the_wait_in_the_backends_words() -> None:
    kube = FakeKube([pod("prod-llama-1", "CrashLoopBackOff")], {"prod-llama-1": LOG})
    with pytest.raises(RolloutFailedError) as failed:
        watch(kube)
    assert str(failed.value) == (
        f"Deployment {NS}/{NAME} cannot start: pod prod-llama-1: model 'llama' version 1 failed to load: Internal: "
        "SafetensorError: Error while deserializing header: incomplete metadata, file not fully covered"
    )
    assert kube.asked == [
        (f"/api/v1/namespaces/{NS}/pods/prod-llama-1/log", {"container": "triton", "previous": "true"})
    ]


def test_a_crash_without_a_load_failure_is_waited_out_to_the_deadline() -> None:
    kube = FakeKube([pod("prod-llama-1", "CrashLoopBackOff")], {"prod-llama-1": "Killed\n"})
    with pytest.raises(RolloutFailedError, match=r"did not roll out within 0 s: prod-llama-1 \(Running\)"):
        watch(kube)


def test_a_pod_whose_previous_log_is_gone_is_waited_out_to_the_deadline() -> None:
    kube = FakeKube([pod("prod-llama-1", "CrashLoopBackOff")], {})
    with pytest.raises(RolloutFailedError, match=r"did not roll out within 0 s"):
        watch(kube)


def test_a_starting_pod_is_not_asked_for_its_log() -> None:
    kube = FakeKube([pod("prod-llama-1", "ContainerCreating")], {"prod-llama-1": LOG})
    with pytest.raises(RolloutFailedError, match=r"did not roll out within 0 s"):
        watch(kube)
    assert kube.asked == []


def test_the_failure_is_the_first_failed_load_without_the_python_traceback() -> None:
    assert load_failure(LOG) == (
        "model 'llama' version 1 failed to load: Internal: SafetensorError: Error while deserializing header: "
        "incomplete metadata, file not fully covered"
    )
    assert load_failure("error: creating server: Internal - failed to load all models\n") is None
