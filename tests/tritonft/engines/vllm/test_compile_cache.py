"""A vLLM model's compile cache: the key a pod compiles under (what decides the compiled code, nothing else), and the
Job's pruning of the directories no pod has used for a day, on a real directory tree."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from components.settings.catalog import KNOWN_VLLM
from tritonft.engines.vllm.compile_cache import (
    LEASE,
    NOT_COMPILED,
    PRUNING,
    UNUSED_FOR_S,
    cache_key,
    compiled_engine_args,
    prune,
)
from tritonft.engines.vllm.engine import checkpoint_of, model_path, options_of
from tritonft.engines.vllm.repository import engine_args
from tritonft.spec import DataType, Family, ModelSpec, WeightDType

ENTRY = KNOWN_VLLM["meta-llama/Llama-3.1-8B-Instruct"]
VLLM = replace(ENTRY.facts, max_model_len=16384)
LLAMA = ModelSpec(
    name="llama",
    family=Family.LLAMA,
    hf_repo="meta-llama/Llama-3.1-8B-Instruct",
    revision="0e9e39f249a16976918f6564b8830bc894c89659",
    architecture=ENTRY.architecture,
    weight_dtype=WeightDType.FP16,
    data_type=DataType.BF16,
    decoupled=True,
    vllm=VLLM,
)
IMAGE = "a" * 64


def test_the_key_is_the_same_for_the_same_image_revision_and_arguments() -> None:
    assert cache_key(LLAMA, IMAGE) == cache_key(replace(LLAMA), IMAGE)
    assert len(cache_key(LLAMA, IMAGE)) == 16


def test_another_server_image_gets_another_key() -> None:
    assert cache_key(LLAMA, IMAGE) != cache_key(LLAMA, "b" * 64)


def test_another_revision_gets_another_key() -> None:
    assert cache_key(LLAMA, IMAGE) != cache_key(replace(LLAMA, revision="1" * 40), IMAGE)


@pytest.mark.parametrize(
    "changed",
    [
        {"max_model_len": 8192},
        {"max_num_seqs": 32},  # bounds the CUDA graphs' batch sizes
        {"dtype": "float16"},
    ],
)
def test_an_engine_argument_that_shapes_the_graphs_gets_another_key(changed: dict[str, Any]) -> None:
    assert cache_key(LLAMA, IMAGE) != cache_key(replace(LLAMA, vllm=replace(VLLM, **changed)), IMAGE)


def test_tensor_parallelism_gets_another_key() -> None:
    assert cache_key(LLAMA, IMAGE) != cache_key(replace(LLAMA, tensor_parallel=2), IMAGE)


@pytest.mark.parametrize("changed", [{"gpu_memory_utilization": 0.8}, {"enable_prefix_caching": False}])
def test_an_engine_argument_vllms_own_hash_leaves_out_keeps_the_key(changed: dict[str, Any]) -> None:
    """vLLM 0.27.1 ``config/cache.py:214-220``: the KV cache's size and prefix caching do not change the graphs."""
    assert cache_key(LLAMA, IMAGE) == cache_key(replace(LLAMA, vllm=replace(VLLM, **changed)), IMAGE)


def test_every_argument_left_out_of_the_key_is_one_model_json_has() -> None:
    """A misspelt name in :data:`NOT_COMPILED` would leave nothing out; every other argument is in the key."""
    written = engine_args(options_of(LLAMA), model_path(LLAMA), checkpoint_of(LLAMA), served_name=LLAMA.name)
    assert set(written) >= NOT_COMPILED
    assert set(compiled_engine_args(LLAMA)) == set(written) - NOT_COMPILED


def test_a_key_without_the_server_images_identity_is_refused() -> None:
    with pytest.raises(ValueError, match="needs the server image's identity"):
        cache_key(LLAMA, "")


def _aged(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


def _cache(tmp_path: Path, *names: str) -> Path:
    model_dir = tmp_path / "compile-cache" / "llama"
    for name in names:
        (model_dir / name / "torch_compile_cache").mkdir(parents=True)
    return model_dir


def test_a_directory_no_pod_used_for_a_day_is_removed(tmp_path: Path) -> None:
    model_dir = _cache(tmp_path, "old")
    _aged(model_dir / "old", UNUSED_FOR_S + 60)
    assert prune(model_dir, time.time()) == ["old"]
    assert list(model_dir.iterdir()) == []


def test_a_directory_whose_lease_a_running_pod_renewed_stays_however_old(tmp_path: Path) -> None:
    """The stable version's pods through a promotion: vLLM made the directory long ago, the probes renew its lease."""
    model_dir = _cache(tmp_path, "stable")
    (model_dir / "stable" / LEASE).touch()
    _aged(model_dir / "stable", 30 * UNUSED_FOR_S)
    assert prune(model_dir, time.time()) == []
    assert (model_dir / "stable" / "torch_compile_cache").is_dir()


def test_a_directory_a_pod_is_compiling_into_stays_before_any_probe_ran(tmp_path: Path) -> None:
    model_dir = _cache(tmp_path, "starting")  # made by vLLM a moment ago, no lease yet
    assert prune(model_dir, time.time()) == []


def test_a_lease_gone_stale_lets_its_directory_go(tmp_path: Path) -> None:
    model_dir = _cache(tmp_path, "replaced")
    (model_dir / "replaced" / LEASE).touch()
    _aged(model_dir / "replaced" / LEASE, UNUSED_FOR_S + 60)
    _aged(model_dir / "replaced", UNUSED_FOR_S + 60)
    assert prune(model_dir, time.time()) == ["replaced"]


def test_a_removal_left_half_done_is_finished(tmp_path: Path) -> None:
    model_dir = _cache(tmp_path, f"{PRUNING}old")  # a Job killed between the rename and the end of the removal
    assert prune(model_dir, time.time()) == [f"{PRUNING}old"]
    assert list(model_dir.iterdir()) == []


def test_files_and_links_beside_the_keys_are_left_alone(tmp_path: Path) -> None:
    model_dir = _cache(tmp_path, "target")
    (model_dir / "note").write_text("x")
    (model_dir / "link").symlink_to(model_dir / "target")
    for path in (model_dir / "note", model_dir / "target"):
        _aged(path, UNUSED_FOR_S + 60)
    assert prune(model_dir, time.time()) == ["target"]
    assert sorted(p.name for p in model_dir.iterdir()) == ["link", "note"]


def test_the_command_names_a_missing_directory_and_the_fix(tmp_path: Path) -> None:
    missing = tmp_path / "compile-cache" / "llama"
    command = [sys.executable, "-m", "tritonft", "prune-compile-cache", str(missing)]
    failed = subprocess.run(command, check=False, capture_output=True, text=True, timeout=60)
    assert failed.returncode == 1
    assert failed.stderr.strip() == (
        f"error: {missing}: no such directory (the model's compile cache; the Job makes it first)"
    )


def test_a_directory_that_cannot_be_moved_aside_fails_the_command_naming_the_fix(tmp_path: Path) -> None:
    """Here a file squats the name the directory is renamed to; on a store, a directory the Job's user does not own."""
    model_dir = _cache(tmp_path, "old")
    _aged(model_dir / "old", UNUSED_FOR_S + 60)
    (model_dir / f"{PRUNING}old").write_text("not a directory")
    command = [sys.executable, "-m", "tritonft", "prune-compile-cache", str(model_dir)]
    failed = subprocess.run(command, check=False, capture_output=True, text=True, timeout=60)
    assert failed.returncode == 1
    assert failed.stderr.startswith(f"error: {model_dir}: cannot remove an unused compile cache directory (")
    assert "fix its ownership on the store or delete the directory" in failed.stderr
    assert (model_dir / "old" / "torch_compile_cache").is_dir()
