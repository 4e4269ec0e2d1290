"""prod's plan for Llama 3.1 8B: the engine's CPU limit is the largest GPU node's CPUs (no CFS throttling), its
compile cache is its own directory on the store (the pods' only writable one), which its download Job makes, and
inside it the server image's own (by digest)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.plans import StackPlans
from tritonft.synth.result import SynthResult

LLAMA = "llama-3-1-8b"
REVISION = "0e9e39f249a16976918f6564b8830bc894c89659"
CACHE = f"/models/compile-cache/{LLAMA}/{REVISION}"


@pytest.fixture(scope="module")
def prod(stack_plan: StackPlans) -> SynthResult:
    return stack_plan("prod")


def _pods(result: SynthResult, kind: str, name_part: str) -> list[dict[str, Any]]:
    typ = f"kubernetes:{'apps/v1:Deployment' if kind == 'Deployment' else 'batch/v1:Job'}"
    found = [r for r in result.resources if r.typ == typ and name_part in r.inputs["metadata"]["name"]]
    assert found, f"no {kind} named like {name_part}"
    return [r.inputs["spec"]["template"]["spec"] for r in found]


def _triton(pod: dict[str, Any]) -> dict[str, Any]:
    containers: list[dict[str, Any]] = [c for c in pod["containers"] if c["name"] == "triton"]
    (container,) = containers
    return container


def test_llamas_engine_may_use_every_cpu_of_the_largest_gpu_node_and_reserves_three(prod: SynthResult) -> None:
    for pod in _pods(prod, "Deployment", LLAMA):
        resources = _triton(pod)["resources"]
        assert (resources["requests"]["cpu"], resources["limits"]["cpu"]) == ("3", "96")  # g5.24xlarge's vCPUs


def test_llamas_pods_compile_into_its_own_directory_of_the_store(prod: SynthResult) -> None:
    for pod in _pods(prod, "Deployment", LLAMA):
        container = _triton(pod)
        digest = container["image"].rsplit("@sha256:", 1)[1]
        assert {"name": "VLLM_CACHE_ROOT", "value": f"{CACHE}/sha256-{digest}"} in container["env"]
        writable = [m for m in container["volumeMounts"] if m["name"] in ("store", "compile-cache")]
        assert [(m["mountPath"], m.get("subPath"), m.get("readOnly", False)) for m in writable] == [
            ("/models", None, True),
            (CACHE, CACHE.removeprefix("/models/"), False),
        ]


def test_llamas_download_job_makes_the_cache_directory_and_may_write_only_its_models(prod: SynthResult) -> None:
    (pod,) = [p for p in _pods(prod, "Job", LLAMA) if "COMPILE_CACHE_DIR" in str(p)]
    (container,) = pod["containers"]
    assert {"name": "COMPILE_CACHE_DIR", "value": CACHE} in container["env"]
    subpaths = [m["subPath"] for m in container["volumeMounts"] if m["name"] == "store" and "subPath" in m]
    assert subpaths == [f"hf/{LLAMA}", f"repositories/{LLAMA}", f"compile-cache/{LLAMA}", f"references/{LLAMA}"]


def test_llamas_engine_is_restarted_after_a_minute_without_progress_the_gateways_deadline(prod: SynthResult) -> None:
    for pod in _pods(prod, "Deployment", LLAMA):
        probe = _triton(pod)["livenessProbe"]
        *_, state, kind, _idle_after = probe["exec"]["command"]
        assert (state, kind) == (f"/tmp/tritonft-liveness-{LLAMA}", "liveness")  # judged on progress, its own reading
        assert (probe["periodSeconds"], probe["failureThreshold"]) == (10, 6)  # gatewayDeadlineSeconds 60
