"""The Triton pod with the GEMM tuning init container: same GPUs, Triton starts where the config is written."""

from __future__ import annotations

from typing import Any

import pytest

from components.common.layout import STORE_MOUNT, model_paths
from components.common.sizing import server_sizing, startup_budget
from components.common.target import GpuScheduling
from components.serving.gemm_tuning import (
    INIT_CONTAINER,
    STORE_RW_VOLUME,
    WORKDIR,
    WORKDIR_VOLUME,
    GemmTuning,
    with_gemm_tuning,
)
from components.serving.server_spec import ServerPod, server_pod_spec
from tests.components.fixtures import CONVERTER, GPTJ_6B, SERVER_IMAGE, T5_SMALL
from tests.components.validation import validate_manifest
from tritonft.engines.fastertransformer.gemm import GEMM_CONFIG, gemm_commands
from tritonft.spec import ModelSpec

CLAIM = "models"
GPU = GpuScheduling(node_selector={"triton-ft/pool": "gpu"})


def pod(model: ModelSpec = GPTJ_6B, tuning: GemmTuning | None = None) -> dict[str, Any]:
    spec = server_pod_spec(
        model,
        model_paths(model, CONVERTER).repository_dir,
        ServerPod(image=SERVER_IMAGE, claim_name=CLAIM, gpu=GPU),
        server_sizing(model),
        startup_budget(model),
    )
    return with_gemm_tuning(spec, model, SERVER_IMAGE, CLAIM, tuning or GemmTuning())


def containers(spec: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    (init,) = spec["initContainers"]
    (triton,) = spec["containers"]
    return init, triton


def env(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container["env"]}


def test_the_tuning_runs_before_triton_in_an_init_container_of_the_server_image():
    init, triton = containers(pod())
    assert init["name"] == INIT_CONTAINER
    assert init["image"] == triton["image"] == SERVER_IMAGE


def test_the_tuning_gets_exactly_tritons_gpus_cpu_and_memory():
    init, triton = containers(pod())
    assert init["resources"] == triton["resources"]
    assert init["resources"]["limits"]["nvidia.com/gpu"] == str(GPTJ_6B.gpus) == "4"


def test_triton_starts_in_the_directory_the_tuning_writes_gemm_config_into():
    init, triton = containers(pod())
    assert triton["workingDir"] == env(init)["WORKDIR"] == WORKDIR
    mounts = {m["name"]: m["mountPath"] for m in triton["volumeMounts"]}
    init_mounts = {m["name"]: m["mountPath"] for m in init["volumeMounts"]}
    assert mounts[WORKDIR_VOLUME] == init_mounts[WORKDIR_VOLUME] == WORKDIR
    assert GEMM_CONFIG not in WORKDIR


def test_only_the_tuning_writes_to_the_store_and_only_its_cache():
    spec = pod()
    init, triton = containers(spec)
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["store"]["persistentVolumeClaim"]["readOnly"] is True
    assert volumes[STORE_RW_VOLUME]["persistentVolumeClaim"] == {"claimName": CLAIM}
    assert STORE_RW_VOLUME not in {m["name"] for m in triton["volumeMounts"]}
    assert env(init)["CACHE_DIR"].startswith(f"{STORE_MOUNT}/gemm/")


def test_the_tuning_sees_the_store_read_only_but_for_its_cache_directory():
    init, _ = containers(pod())
    mounts = {m["mountPath"]: m for m in init["volumeMounts"]}
    assert mounts[STORE_MOUNT] == {"name": "store", "mountPath": STORE_MOUNT, "readOnly": True}
    writable = [m for m in init["volumeMounts"] if m["name"] == STORE_RW_VOLUME]
    cache = env(init)["CACHE_DIR"]
    assert writable == [{"name": STORE_RW_VOLUME, "mountPath": cache, "subPath": cache.removeprefix(f"{STORE_MOUNT}/")}]


def test_the_tuning_can_write_only_its_models_cache_directory_not_the_shared_gemm_tree():
    """Another model's tuned config (another key under ``gemm/``) is out of reach: only the key directory is
    mounted writable, and the script writes ``<GPU product>/gemm_config.in`` inside it."""
    init, _ = containers(pod())
    (writable,) = [m for m in init["volumeMounts"] if m["name"] == STORE_RW_VOLUME]
    other = env(containers(pod(T5_SMALL))[0])["CACHE_DIR"]
    assert writable["subPath"].startswith("gemm/") and writable["subPath"].count("/") == 2
    assert not other.startswith(writable["mountPath"] + "/") and other != writable["mountPath"]
    assert f"{STORE_MOUNT}/gemm" not in {m["mountPath"] for m in init["volumeMounts"]}


def test_the_init_container_runs_the_models_own_tuner_commands():
    init, _ = containers(pod())
    assert env(init)["GEMM_PROGRAM"] == "gpt_gemm"
    assert env(init)["GEMM_RUNS"].splitlines() == [" ".join(c[1:]) for c in gemm_commands(GPTJ_6B)]
    assert init["terminationMessagePolicy"] == "FallbackToLogsOnError"


def test_the_cache_directory_is_per_key_and_follows_the_image_build():
    default = env(containers(pod())[0])["CACHE_DIR"]
    other_ft = env(containers(pod(tuning=GemmTuning(ft_commit="f" * 40)))[0])["CACHE_DIR"]
    other_model = env(containers(pod(T5_SMALL))[0])["CACHE_DIR"]
    assert len({default, other_ft, other_model}) == 3


def test_the_tuning_container_is_hardened_like_triton():
    init, triton = containers(pod())
    assert init["securityContext"] == triton["securityContext"]


def test_turned_off_the_pod_is_exactly_the_plain_triton_pod():
    plain = server_pod_spec(
        GPTJ_6B,
        model_paths(GPTJ_6B, CONVERTER).repository_dir,
        ServerPod(image=SERVER_IMAGE, claim_name=CLAIM, gpu=GPU),
        server_sizing(GPTJ_6B),
        startup_budget(GPTJ_6B),
    )
    assert pod(tuning=GemmTuning(enabled=False)) == plain
    assert "initContainers" not in plain and "workingDir" not in plain["containers"][0]


def test_the_tuning_budget_is_its_timeout_plus_a_container_start_and_nothing_when_off():
    assert GemmTuning(timeout_seconds=600).budget_seconds() == 660
    assert GemmTuning(enabled=False, timeout_seconds=600).budget_seconds() == 0


@pytest.mark.parametrize("model", [T5_SMALL, GPTJ_6B], ids=lambda m: m.name)
def test_the_pod_with_tuning_is_a_valid_pod_spec(model):
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "triton"}, "spec": pod(model)}
    assert validate_manifest(body) == []


def test_adding_the_tuning_leaves_the_callers_pod_spec_untouched():
    plain = server_pod_spec(
        T5_SMALL,
        model_paths(T5_SMALL, CONVERTER).repository_dir,
        ServerPod(image=SERVER_IMAGE, claim_name=CLAIM, gpu=GPU),
        server_sizing(T5_SMALL),
        startup_budget(T5_SMALL),
    )
    before = repr(plain)
    with_gemm_tuning(plain, T5_SMALL, SERVER_IMAGE, CLAIM, GemmTuning())
    assert repr(plain) == before
