"""TritonService for a Llama-family model served by vLLM: the vLLM server image's release, GPUs = TP, plain
``tritonserver`` (vLLM starts its own workers), ``/dev/shm`` and memory sized, the start-up budget from the model's
bytes plus the engine's start, no GEMM tuning; asserted on the captured inputs."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from components.common import sizing
from components.serving.gemm_tuning import GemmTuning
from components.serving.server_spec import TRITONSERVER
from components.settings.catalog import KNOWN_VLLM
from tests.components.fixtures import pod_spec, served_deployment, triton_container
from tritonft.engines.vllm.versions import TRITON_VERSION as VLLM_RELEASE
from tritonft.spec import Architecture, DataType, Family, ModelSpec, WeightDType

ENTRY = KNOWN_VLLM["meta-llama/Llama-3.1-8B-Instruct"]
LLAMA = ModelSpec(
    name="llama",
    family=Family.LLAMA,
    hf_repo="meta-llama/Llama-3.1-8B-Instruct",
    revision="0e9e39f249a16976918f6564b8830bc894c89659",
    architecture=ENTRY.architecture,
    weight_dtype=WeightDType.FP16,
    data_type=DataType.BF16,
    decoupled=True,
    vllm=replace(ENTRY.facts, max_model_len=16384),
)
LLAMA_TP2 = replace(LLAMA, tensor_parallel=2)


def _triton(mocks: Any, model: ModelSpec = LLAMA, **kwargs: Any) -> dict[str, Any]:
    return triton_container(served_deployment(mocks, model, triton_release=VLLM_RELEASE, **kwargs))


def _server(container: dict[str, Any]) -> list[str]:
    """What the container's command runs as its main process: the command after the lease's launcher
    (``tritonft.engines.vllm.compile_cache.renewing_lease``), asserted to be that launcher."""
    from tritonft.engines.vllm.compile_cache import renewing_lease

    command: list[str] = container["command"]
    launcher = len(renewing_lease(["server"], "root")) - 1
    root = {e["name"]: e.get("value") for e in container["env"]}["VLLM_CACHE_ROOT"]
    assert command == renewing_lease(command[launcher:], root)
    return command[launcher:]


def test_gpus_are_the_tensor_parallel_size(mocks):
    resources = _triton(mocks, LLAMA_TP2)["resources"]
    assert resources["limits"]["nvidia.com/gpu"] == resources["requests"]["nvidia.com/gpu"] == "2"


def test_tensor_parallel_runs_plain_tritonserver_since_vllm_starts_its_own_workers(mocks):
    command = _server(_triton(mocks, LLAMA_TP2))
    assert command[0] == TRITONSERVER and "mpirun" not in command


def test_the_vllm_images_release_restricts_the_http_apis_too(mocks):
    command = _server(_triton(mocks))
    assert any(arg.startswith("--http-restricted-api=") for arg in command)


def test_the_pod_never_calls_the_hub_or_vllms_usage_reporting(mocks):
    env = {e["name"]: e.get("value") for e in _triton(mocks)["env"]}
    assert env["HF_HUB_OFFLINE"] == "1" and env["VLLM_NO_USAGE_STATS"] == "1" and env["DO_NOT_TRACK"] == "1"
    assert "NCCL_LAUNCH_MODE" not in env, "FasterTransformer's backend setting"


def test_shm_and_memory_are_sized_per_gpu(mocks):
    run = served_deployment(mocks, LLAMA_TP2, triton_release=VLLM_RELEASE)
    (shm,) = [v for v in pod_spec(run)["volumes"] if v["name"] == "shm"]
    assert shm["emptyDir"] == {"medium": "Memory", "sizeLimit": "1280Mi"}  # 1 GiB + 256 MiB for the second GPU
    memory = triton_container(run)["resources"]["requests"]["memory"]
    assert memory == f"{3 * 1024 + 1280 + 2 * 4 * 1024}Mi"  # server + shm + one 4 GiB worker per GPU


def test_tmp_holds_what_the_engines_libraries_cache_under_home(mocks):
    run = served_deployment(mocks, LLAMA, triton_release=VLLM_RELEASE)
    (tmp,) = [v for v in pod_spec(run)["volumes"] if v["name"] == "tmp"]
    assert tmp["emptyDir"] == {"sizeLimit": "4Gi"}
    assert triton_container(run)["resources"]["limits"]["ephemeral-storage"] == "6Gi"


def test_the_engines_cpu_limit_is_the_gpu_nodes_cpus_and_its_request_what_it_needs(mocks):
    resources = _triton(mocks, gpu_node_cpus=48)["resources"]  # a g5.12xlarge
    assert (resources["requests"]["cpu"], resources["limits"]["cpu"]) == ("3", "48")


def test_without_the_nodes_cpus_the_engines_cpu_limit_is_twice_its_request(mocks):
    resources = _triton(mocks)["resources"]
    assert (resources["requests"]["cpu"], resources["limits"]["cpu"]) == ("3", "6")


def test_vllms_compile_cache_is_its_keys_directory_in_the_models_own_on_the_store(mocks):
    from components.common.layout import model_paths
    from tests.components.fixtures import COMPILE_IDENTITY, CONVERTER
    from tritonft.engines.vllm.compile_cache import cache_key

    run = served_deployment(mocks, LLAMA, triton_release=VLLM_RELEASE)
    cache = model_paths(LLAMA, CONVERTER).compile_cache
    assert cache == "/models/compile-cache/llama"
    container = triton_container(run)
    key = cache_key(LLAMA, COMPILE_IDENTITY)
    assert {"name": "VLLM_CACHE_ROOT", "value": f"{cache}/{key}"} in container["env"]
    (mount,) = [m for m in container["volumeMounts"] if m["name"] == "compile-cache"]
    assert mount == {"name": "compile-cache", "mountPath": cache, "subPath": "compile-cache/llama"}
    (volume,) = [v for v in pod_spec(run)["volumes"] if v["name"] == "compile-cache"]
    assert volume == {"name": "compile-cache", "persistentVolumeClaim": {"claimName": "m-store-models"}}


def test_the_pods_command_renews_its_compile_caches_lease_beside_tritonserver_not_in_its_probes(mocks):
    """A stalled store never touches the probes (``tritonft.engines.vllm.health``); the container's command starts
    the lease's loop and then execs ``tritonserver`` (the loop itself: ``tests/tritonft/engines/vllm``)."""
    container = _triton(mocks)
    assert container["command"][:2] == ["/bin/sh", "-c"]
    assert _server(container)[0] == TRITONSERVER
    for probe in ("readinessProbe", "livenessProbe"):
        assert "VLLM_CACHE_ROOT" not in " ".join(container[probe]["exec"]["command"])


def _cache_roots(mocks: Any, *stacks: dict[str, Any]) -> list[str]:
    """``VLLM_CACHE_ROOT`` of the Llama served once per entry of ``stacks`` (``serve``'s options)."""
    from tests.components.fixtures import DEPLOYMENT, containers, serve
    from tritonft.synth.engine import run_program

    run_program(
        lambda: [serve(f"s{i}", LLAMA, triton_release=VLLM_RELEASE, **options) for i, options in enumerate(stacks)]
    )
    roots = []
    for deployment in mocks.of_type(DEPLOYMENT):
        (container,) = containers(deployment)
        roots.append({e["name"]: e.get("value") for e in container["env"]}["VLLM_CACHE_ROOT"])
    return roots


def test_a_rebuild_of_the_same_server_image_compiles_into_the_same_directory(mocks):
    """CI pushes a new digest for the same base and files at every run: the pods keep the directory (and what the
    last pods compiled), instead of starting cold at each deploy."""
    from tests.components.fixtures import SERVER_IMAGE

    rebuilt = SERVER_IMAGE.replace("b" * 64, "d" * 64)
    first, second = _cache_roots(mocks, {"image": SERVER_IMAGE}, {"image": rebuilt})
    assert first == second


def test_another_server_image_base_or_patch_compiles_into_a_directory_of_its_own(mocks):
    """Another vLLM, torch or Triton (another compile identity) never reads what the other compiled."""
    first, second = _cache_roots(mocks, {"compile_identity": "1" * 64}, {"compile_identity": "2" * 64})
    assert first != second
    assert first.rsplit("/", 1)[0] == second.rsplit("/", 1)[0] == "/models/compile-cache/llama"


def test_only_the_compile_cache_is_writable_the_store_stays_read_only(mocks):
    container = triton_container(served_deployment(mocks, LLAMA, triton_release=VLLM_RELEASE))
    writable = [
        m for m in container["volumeMounts"] if m["name"] in ("store", "compile-cache") and not m.get("readOnly")
    ]
    assert [m["subPath"] for m in writable] == ["compile-cache/llama"]


def test_a_fastertransformer_model_gets_no_compile_cache(mocks):
    from tests.components.fixtures import T5_SMALL

    container = triton_container(served_deployment(mocks, T5_SMALL))
    assert all(m["name"] != "compile-cache" for m in container["volumeMounts"])
    assert all(e["name"] != "VLLM_CACHE_ROOT" for e in container["env"])


def test_the_startup_budget_reads_the_published_weights_and_adds_the_engines_start(mocks):
    probe = _triton(mocks)["startupProbe"]
    weights = LLAMA.parameters * 2  # bfloat16 files as published
    seconds = (sizing.SERVER_START_SECONDS + sizing.VLLM_ENGINE_START_SECONDS + weights / sizing.LOAD_BANDWIDTH) * 1.5
    assert probe["periodSeconds"] * probe["failureThreshold"] == 10 * math.ceil(seconds / 10)


def test_a_bigger_model_gets_a_longer_startup_budget() -> None:
    small = replace(LLAMA, architecture=Architecture(896, 14, 24, 4864, 151936, max_positions=32768))
    assert sizing.startup_budget(small).seconds < sizing.startup_budget(LLAMA).seconds


def test_no_gemm_tuning_runs_before_a_vllm_model(mocks):
    run = served_deployment(mocks, LLAMA, triton_release=VLLM_RELEASE, gemm_tuning=GemmTuning(enabled=True))
    assert not pod_spec(run).get("initContainers")


def test_the_store_is_mounted_read_only_where_model_json_names_the_files(mocks):
    container = _triton(mocks)
    (mount,) = [m for m in container["volumeMounts"] if m["name"] == "store"]
    assert mount == {"name": "store", "mountPath": "/models", "readOnly": True}


def test_the_pod_is_ready_only_while_its_engine_makes_progress(mocks):
    from tritonft.engines.vllm import health

    probe = _triton(mocks)["readinessProbe"]
    assert probe["exec"]["command"] == [
        "python3",
        "-c",
        health.SCRIPT,
        "http://127.0.0.1:8000",
        "http://127.0.0.1:8002/metrics",
        "llama",
        "19",
        "/tmp/tritonft-readiness-llama",
        "readiness",
        "20",
    ]
    assert (probe["periodSeconds"], probe["timeoutSeconds"], probe["failureThreshold"]) == (10, 20, 3)
    assert health.UNREADY_WITHIN_S == 50


def test_the_engine_is_restarted_once_it_has_made_no_progress_for_its_first_token_deadline(mocks):
    """Liveness judges the engine's progress on its own reading (a token only when it is known idle), and fails only
    after the model's first-token deadline (the gateway's base deadline) in periods: 120 s -> 12 probes 10 s
    apart."""
    from tritonft.engines.vllm import health

    probe = _triton(mocks, engine_stall_seconds=120)["livenessProbe"]
    assert probe["exec"]["command"] == [
        "python3",
        "-c",
        health.SCRIPT,
        "http://127.0.0.1:8000",
        "http://127.0.0.1:8002/metrics",
        "llama",
        "19",
        "/tmp/tritonft-liveness-llama",
        "liveness",
        "120",  # without the gauges, its token only once the counters stood still for the whole stall
    ]
    assert (probe["periodSeconds"], probe["timeoutSeconds"], probe["failureThreshold"]) == (10, 20, 12)


def test_a_fastertransformer_servers_liveness_stays_tritons_own(mocks):
    from tests.components.fixtures import T5_SMALL

    container = triton_container(served_deployment(mocks, T5_SMALL, engine_stall_seconds=120))
    assert container["livenessProbe"]["httpGet"]["path"] == "/v2/health/live"
    assert container["livenessProbe"]["failureThreshold"] == 3
