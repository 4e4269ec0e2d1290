"""A vLLM model's compile cache: the key a pod compiles under (what decides the compiled code, nothing else), and the
Job's pruning of the directories no pod has used for a day, on a real directory tree."""

from __future__ import annotations

import os
import re
import signal
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
    is_key,
    prune,
    renewing_lease,
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


OLD = "0123456789abcdef"  # keys, as cache_key makes them
STABLE = "fedcba9876543210"
REVISION = LLAMA.revision  # the old layout's compile-cache/<model>/<revision>, mounted by pods of before the key


def _aged(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


def _cache(tmp_path: Path, *names: str, leased_for: float | None = None) -> Path:
    """One model's compile cache with the directories ``names``; each with a lease last renewed ``leased_for`` s
    ago (and its directory as old) unless None."""
    model_dir = tmp_path / "compile-cache" / "llama"
    for name in names:
        (model_dir / name / "torch_compile_cache").mkdir(parents=True)
        if leased_for is not None:
            (model_dir / name / LEASE).touch()
            _aged(model_dir / name / LEASE, leased_for)
            _aged(model_dir / name, leased_for)
    return model_dir


def test_a_key_no_pod_renewed_for_a_day_is_removed(tmp_path: Path) -> None:
    model_dir = _cache(tmp_path, OLD, leased_for=UNUSED_FOR_S + 60)
    assert prune(model_dir, time.time()) == [OLD]
    assert list(model_dir.iterdir()) == []


def test_a_key_whose_lease_a_running_pod_renewed_stays_however_old(tmp_path: Path) -> None:
    """The stable version's pods through a promotion: vLLM made the directory long ago, the pod renews its lease."""
    model_dir = _cache(tmp_path, STABLE)
    (model_dir / STABLE / LEASE).touch()
    _aged(model_dir / STABLE, 30 * UNUSED_FOR_S)
    assert prune(model_dir, time.time()) == []
    assert (model_dir / STABLE / "torch_compile_cache").is_dir()


def test_a_key_without_a_lease_stays_however_old(tmp_path: Path) -> None:
    model_dir = _cache(tmp_path, OLD)
    _aged(model_dir / OLD, 30 * UNUSED_FOR_S)
    assert prune(model_dir, time.time()) == []
    assert (model_dir / OLD / "torch_compile_cache").is_dir()


def test_the_old_layouts_revision_directory_stays_under_its_running_pods_however_old(tmp_path: Path) -> None:
    """Pods of before the key mount ``compile-cache/<model>/<revision>`` by ``subPath`` and renew no lease: the first
    Job of the new layout must not remove it from under them (ESTALE on the store; a root-owned subPath on restart),
    even with a lease-named file in it or a stale one."""
    model_dir = _cache(tmp_path, REVISION, "main", leased_for=30 * UNUSED_FOR_S)
    _cache(tmp_path, "no-lease")
    _aged(model_dir / "no-lease", 30 * UNUSED_FOR_S)
    assert prune(model_dir, time.time()) == []
    assert sorted(p.name for p in model_dir.iterdir()) == sorted([REVISION, "main", "no-lease"])


@pytest.mark.parametrize("name", ["0123456789ABCDEF", "0123456789abcde", "0123456789abcdef0", "0123456789abcdeg"])
def test_only_names_a_key_has_are_pruned(tmp_path: Path, name: str) -> None:
    model_dir = _cache(tmp_path, name, leased_for=UNUSED_FOR_S + 60)
    assert prune(model_dir, time.time()) == []


def test_every_key_cache_key_makes_is_a_name_the_job_prunes() -> None:
    key = cache_key(LLAMA, IMAGE)
    assert is_key(key) and is_key(f"{PRUNING}{key}")


def test_a_lease_gone_stale_lets_its_directory_go(tmp_path: Path) -> None:
    model_dir = _cache(tmp_path, OLD, leased_for=UNUSED_FOR_S + 60)
    _aged(model_dir / OLD / LEASE, UNUSED_FOR_S + 60)
    _aged(model_dir / OLD, 60)  # a pod wrote into it a minute ago
    assert prune(model_dir, time.time()) == []
    _aged(model_dir / OLD, UNUSED_FOR_S + 60)
    assert prune(model_dir, time.time()) == [OLD]


def test_a_removal_left_half_done_is_finished(tmp_path: Path) -> None:
    model_dir = _cache(tmp_path, f"{PRUNING}{OLD}")  # a Job killed between the rename and the end of the removal
    assert prune(model_dir, time.time()) == [f"{PRUNING}{OLD}"]
    assert list(model_dir.iterdir()) == []


def test_files_and_links_beside_the_keys_are_left_alone(tmp_path: Path) -> None:
    model_dir = _cache(tmp_path, OLD, leased_for=UNUSED_FOR_S + 60)
    (model_dir / "note").write_text("x")
    (model_dir / STABLE).symlink_to(model_dir / OLD)
    _aged(model_dir / "note", UNUSED_FOR_S + 60)
    assert prune(model_dir, time.time()) == [OLD]
    assert sorted(p.name for p in model_dir.iterdir()) == sorted(["note", STABLE])


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
    model_dir = _cache(tmp_path, OLD, leased_for=UNUSED_FOR_S + 60)
    (model_dir / f"{PRUNING}{OLD}").write_text("not a directory")
    command = [sys.executable, "-m", "tritonft", "prune-compile-cache", str(model_dir)]
    failed = subprocess.run(command, check=False, capture_output=True, text=True, timeout=60)
    assert failed.returncode == 1
    assert failed.stderr.startswith(f"error: {model_dir}: cannot remove an unused compile cache directory (")
    assert "fix its ownership on the store or delete the directory" in failed.stderr
    assert (model_dir / OLD / "torch_compile_cache").is_dir()


def _renewing(root: Path, server: list[str], rounds: int, wait_s: float = 5, report_every: int = 2) -> list[str]:
    return renewing_lease(server, str(root), period_s=0, wait_s=wait_s, report_every=report_every, rounds=rounds)


def test_the_pods_command_execs_the_server_and_renews_the_lease_beside_it(tmp_path: Path) -> None:
    """The server replaces the shell (the container's PID and signals stay Triton's) with its own arguments; the
    loop makes the key's directory with its lease before vLLM writes in it."""
    root = tmp_path / "compile-cache" / "llama" / OLD
    server = [sys.executable, "-c", "import os, sys; print(os.getpid(), sys.argv[1:])", "--model-repository=/m"]
    with subprocess.Popen(_renewing(root, server, rounds=1), stdout=subprocess.PIPE, text=True) as running:
        out, _ = running.communicate(timeout=60)  # the loop holds the pipe too: it has run its round
    assert out.strip() == f"{running.pid} ['--model-repository=/m']"
    assert running.returncode == 0
    assert (root / LEASE).is_file()


def test_a_renewal_moves_the_lease_on(tmp_path: Path) -> None:
    model_dir = _cache(tmp_path, OLD, leased_for=UNUSED_FOR_S + 60)
    subprocess.run(_renewing(model_dir / OLD, ["true"], rounds=1), check=True, capture_output=True, timeout=60)
    assert prune(model_dir, time.time()) == []


def test_a_renewal_that_blocks_on_the_store_is_reported_while_it_stays_stuck(tmp_path: Path) -> None:
    """A stalled store (here the lease is a FIFO: opening it to write blocks until a reader comes): each round counts
    a failure, on the container's stderr (``kubectl logs``) at the first and every ``report_every``-th."""
    root = tmp_path / OLD
    root.mkdir()
    os.mkfifo(root / LEASE)
    command = _renewing(root, ["true"], rounds=4, wait_s=0.2)
    ran = subprocess.run(command, check=True, capture_output=True, text=True, timeout=60)
    reported = ran.stderr.splitlines()
    assert [line.split(" (")[0] for line in reported] == [
        f"triton-ft: compile cache lease {root / LEASE}: renewal failed {n} times in a row" for n in (1, 2, 4)
    ]
    assert "(the store did not answer within 0.2 s); a day without one and the model's Job prunes" in reported[0]


def test_a_failed_renewal_is_reported_and_so_is_its_recovery(tmp_path: Path) -> None:
    """Here the key's directory is at first a file (no lease can be made in it), removed once the loop said so."""
    root = tmp_path / OLD
    root.write_text("squatter")
    command = renewing_lease(["true"], str(root), period_s=0.05, report_every=10**6)
    with subprocess.Popen(command, stderr=subprocess.PIPE, text=True, start_new_session=True) as running:
        assert running.stderr is not None
        try:
            first = running.stderr.readline()
            root.unlink()
            second = running.stderr.readline()
        finally:
            os.killpg(running.pid, signal.SIGKILL)  # the loop runs as long as the pod: end it (its process group)
    assert first.startswith(f"triton-ft: compile cache lease {root / LEASE}: renewal failed 1 times in a row (")
    assert re.fullmatch(
        rf"triton-ft: compile cache lease {re.escape(str(root / LEASE))}: renewed again after \d+ failures\n", second
    )
    assert (root / LEASE).is_file()


def test_no_renewal_without_a_server_or_a_directory() -> None:
    with pytest.raises(ValueError, match="needs the server's command"):
        renewing_lease([], "/models/compile-cache/llama/" + OLD)
