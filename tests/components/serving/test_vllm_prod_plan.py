"""prod's plan for Llama 3.1 8B: the engine's CPU limit is the largest GPU node's CPUs (no CFS throttling), its
compile cache is its own directory on the store (the pods' only writable one), which its download Job makes and
prunes, and inside it the directory of what decides the compiled code (the server image's base and files, the
revision, the engine arguments), not of the pushed image's digest."""

from __future__ import annotations

from typing import Any

import pytest

from components.platform.compile_identity import image_compile_identity
from components.settings import load_settings
from tests.plans import REPO, StackPlans, deploy_secrets
from tritonft.engines import engine_for
from tritonft.engines.vllm.compile_cache import cache_key
from tritonft.synth.result import SynthResult
from tritonft.synth.stackfile import read_stack

LLAMA = "llama-3-1-8b"
CACHE = f"/models/compile-cache/{LLAMA}"


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


def _prods_key() -> str:
    """The compile cache key of prod's Llama, from prod's own settings: its spec, its base image pins
    (``baseImageDigests``) and the repository's vLLM Dockerfile and patch."""
    config = read_stack(REPO, "prod", deploy_secrets("prod"))
    prefix = f"{config.project}:"
    values = {k[len(prefix) :]: v for k, v in config.values.items() if k.startswith(prefix)}
    secrets = {k[len(prefix) :] for k in config.secret_keys if k.startswith(prefix)}
    settings = load_settings(values, project=config.project, stack="prod", secret_keys=secrets)
    (spec,) = [m for m in settings.models if m.name == LLAMA]
    identity = image_compile_identity(REPO, engine_for(spec.family).server_image, settings.image.base_digests)
    return cache_key(spec, identity)


def test_llamas_pods_compile_into_the_directory_of_what_decides_the_compiled_code(prod: SynthResult) -> None:
    key = _prods_key()
    for pod in _pods(prod, "Deployment", LLAMA):
        container = _triton(pod)
        assert {"name": "VLLM_CACHE_ROOT", "value": f"{CACHE}/{key}"} in container["env"]
        writable = [m for m in container["volumeMounts"] if m["name"] in ("store", "compile-cache")]
        assert [(m["mountPath"], m.get("subPath"), m.get("readOnly", False)) for m in writable] == [
            ("/models", None, True),
            (CACHE, CACHE.removeprefix("/models/"), False),
        ]


def test_llamas_download_job_makes_and_prunes_the_cache_directory_and_may_write_only_its_models(
    prod: SynthResult,
) -> None:
    (pod,) = [p for p in _pods(prod, "Job", LLAMA) if "COMPILE_CACHE_DIR" in str(p)]
    (container,) = pod["containers"]
    assert {"name": "COMPILE_CACHE_DIR", "value": CACHE} in container["env"]
    assert 'tritonft prune-compile-cache "$COMPILE_CACHE_DIR"' in container["command"][-1]
    subpaths = [m["subPath"] for m in container["volumeMounts"] if m["name"] == "store" and "subPath" in m]
    assert subpaths == [f"hf/{LLAMA}", f"repositories/{LLAMA}", f"compile-cache/{LLAMA}", f"references/{LLAMA}"]


def test_llamas_engine_is_restarted_after_a_minute_without_progress_the_gateways_deadline(prod: SynthResult) -> None:
    for pod in _pods(prod, "Deployment", LLAMA):
        probe = _triton(pod)["livenessProbe"]
        *_, state, kind, still_for = probe["exec"]["command"]
        assert (state, kind) == (f"/tmp/tritonft-liveness-{LLAMA}", "liveness")  # judged on progress, its own reading
        assert still_for == "60"  # without the gauges its token waits for the counters to stand still that long
        assert (probe["periodSeconds"], probe["failureThreshold"]) == (10, 6)  # gatewayDeadlineSeconds 60
