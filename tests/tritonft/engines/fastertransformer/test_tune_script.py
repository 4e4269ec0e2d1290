"""The GEMM tuning init container's script, run for real with stand-in ``t5_gemm`` / ``gpt_gemm`` and ``nvidia-smi``.

The stand-in tuner behaves as FT's does where the script depends on it: it writes ``gemm_config.in`` into its
working directory (a header line, then ``... ### ...`` lines; appended when ``is_append`` is 1), exits non-zero on a
failure, and - like ``t5_gemm`` given too few arguments - can exit 0 without writing anything.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from tritonft.engines.fastertransformer.gemm import (
    GEMM_CONFIG,
    STATUS_FILE,
    TUNE_SCRIPT,
    cache_dir,
    cache_key,
    gemm_commands,
    script_env,
)
from tritonft.spec import Architecture, Batching, DataType, Family, ModelSpec

T5 = ModelSpec(
    name="t5-small",
    family=Family.T5,
    hf_repo="google-t5/t5-small",
    revision="df1b051c49625cf57a3d0d8d3863ed4d13564fe4",
    architecture=Architecture(d_model=512, num_heads=8, num_layers=6, d_ff=2048, vocab_size=32128, d_kv=64),
    data_type=DataType.FP16,
    batching=Batching(max_batch_size=8, preferred_batch_sizes=(4,)),
)
KEY = cache_key(T5, ft_commit="df4a7534860137e060e18d2ebf019906120ea204", triton_version="23.04")

FAKE_TUNER = """#!/bin/sh
echo "$(basename "$0") $*" >> "$CALLS"
case "$TUNER_MODE" in
  fail) echo "[ERROR] There is no enough device memory for gemm test!" ; exit 255 ;;
  silent) exit 0 ;;
  hang) sleep 30 ;;
esac
append=$(eval echo "\\${$#}")
if [ "$append" = "0" ]; then
  echo "batch_size, seq_len, head_num, size_per_head dataType ### batchCount, n, m, k, algoId, ..." > gemm_config.in
fi
echo "$1 1 8 64 1 ### 1 1536 $1 512 -1 -1 -1 -1 -1 -1 -1 -1 0.01" >> gemm_config.in
"""

FAKE_NVIDIA_SMI = """#!/bin/sh
[ -n "$GPU_NAME" ] || exit 9
echo "$GPU_NAME"
echo "$GPU_NAME"
"""


BASIC_TOOLS = [
    "date",
    "head",
    "tr",
    "sed",
    "wc",
    "grep",
    "rm",
    "mkdir",
    "cp",
    "mv",
    "dirname",
    "timeout",
    "sleep",
    "basename",
]
"""What the script and the stand-ins call besides shell built-ins (the server image's Ubuntu has them all)."""


@dataclass
class Pod:
    """One start of the init container: its own working directory and scratch, the shared store."""

    root: Path
    name: str

    @property
    def workdir(self) -> Path:
        return self.root / self.name / "work"

    @property
    def store(self) -> Path:
        return self.root / "store"

    @property
    def config(self) -> Path:
        return self.workdir / GEMM_CONFIG

    def status(self) -> dict[str, object]:
        return dict(json.loads((self.workdir / STATUS_FILE).read_text()))

    def termination_message(self) -> dict[str, object]:
        return dict(json.loads((self.root / self.name / "termination-log").read_text()))


def start(
    tmp_path: Path,
    name: str = "pod-1",
    *,
    model: ModelSpec = T5,
    gpu: str = "NVIDIA A10G",
    mode: str = "ok",
    timeout: int = 60,
    nvidia_smi: bool = True,
    key: str = KEY,
) -> tuple[Pod, subprocess.CompletedProcess[str]]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for tuner in ("t5_gemm", "gpt_gemm"):
        (bin_dir / tuner).write_text(FAKE_TUNER)
        (bin_dir / tuner).chmod(0o755)
    smi = bin_dir / "nvidia-smi"
    if nvidia_smi:
        smi.write_text(FAKE_NVIDIA_SMI)
        smi.chmod(0o755)
    elif smi.exists():
        smi.unlink()
    pod = Pod(tmp_path, name)
    pod.workdir.mkdir(parents=True, exist_ok=True)
    env = {
        e["name"]: e["value"]
        for e in script_env(
            model,
            cache_directory=str(pod.store) + cache_dir("", model, key),
            workdir=str(pod.workdir),
            scratch=str(tmp_path / name / "scratch"),
            timeout_seconds=timeout,
        )
    }
    # Only the fakes and the basic tools: a real nvidia-smi on the test machine must not answer.
    tools = tmp_path / "tools"
    tools.mkdir(exist_ok=True)
    for tool in BASIC_TOOLS:
        found = shutil.which(tool, path="/usr/bin:/bin")
        if found is not None and not (tools / tool).exists():
            (tools / tool).symlink_to(found)
    env |= {
        "PATH": f"{bin_dir}:{tools}",
        "HOSTNAME": name,
        "CALLS": str(tmp_path / "calls"),
        "TUNER_MODE": mode,
        "GPU_NAME": gpu,
        "TERMINATION_LOG": str(tmp_path / name / "termination-log"),
    }
    proc = subprocess.run(
        ["/bin/sh", "-c", TUNE_SCRIPT],
        check=False,
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return pod, proc


def calls(tmp_path: Path) -> list[str]:
    path = tmp_path / "calls"
    return path.read_text().splitlines() if path.exists() else []


def cached_file(pod: Pod, slug: str, model: ModelSpec = T5, key: str = KEY) -> Path:
    return Path(str(pod.store) + cache_dir("", model, key)) / slug / GEMM_CONFIG


def test_a_first_start_runs_every_tuner_command_and_installs_the_config_where_triton_starts(tmp_path):
    pod, proc = start(tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert calls(tmp_path) == [" ".join(c) for c in gemm_commands(T5)]
    lines = pod.config.read_text().splitlines()
    assert lines[0].startswith("batch_size, seq_len") and len(lines) == 3, "two runs: one header, appended rows"
    assert pod.status()["status"] == "tuned"
    assert pod.status()["gpu"] == "NVIDIA A10G"


def test_a_tuned_config_is_cached_on_the_store_under_the_gpu_product_and_the_key(tmp_path):
    pod, _ = start(tmp_path)
    cached = cached_file(pod, "nvidia-a10g")
    assert cached.read_text() == pod.config.read_text()
    assert KEY in str(cached)
    assert pod.status()["cache"] == str(cached)
    assert not list(cached.parent.glob("*.partial-*")), "the cache is written by rename"


def test_a_second_replica_on_the_same_gpu_product_reuses_the_cache_without_tuning(tmp_path):
    first, _ = start(tmp_path, "pod-1")
    tuned = len(calls(tmp_path))
    second, proc = start(tmp_path, "pod-2")
    assert proc.returncode == 0, proc.stderr
    assert len(calls(tmp_path)) == tuned, "no tuner ran"
    assert second.config.read_text() == first.config.read_text()
    assert second.status()["status"] == "cached"
    assert "reused" in proc.stdout


def test_another_gpu_product_is_tuned_and_cached_beside_the_first(tmp_path):
    first, _ = start(tmp_path, "pod-1", gpu="NVIDIA A10G")
    second, _ = start(tmp_path, "pod-2", gpu="NVIDIA L4")
    assert len(calls(tmp_path)) == 2 * len(gemm_commands(T5))
    assert second.status()["status"] == "tuned"
    assert cached_file(first, "nvidia-a10g").exists() and cached_file(second, "nvidia-l4").exists()


def test_another_model_shape_on_the_same_gpu_is_tuned_under_its_own_key(tmp_path):
    first, _ = start(tmp_path, "pod-1")
    fp32 = replace(T5, data_type=DataType.FP32)
    key = cache_key(fp32, ft_commit="df4a7534860137e060e18d2ebf019906120ea204", triton_version="23.04")
    second, _ = start(tmp_path, "pod-2", model=fp32, key=key)
    assert second.status()["status"] == "tuned"
    assert calls(tmp_path)[-1].split()[13] == "0", "fp32 is FT data type 0"
    assert cached_file(first, "nvidia-a10g").exists() and cached_file(second, "nvidia-a10g", fp32, key).exists()
    assert cached_file(first, "nvidia-a10g") != cached_file(second, "nvidia-a10g", fp32, key)


def test_a_failing_tuner_is_logged_and_falls_back_to_ft_defaults_without_failing_the_pod(tmp_path):
    pod, proc = start(tmp_path, mode="fail")
    assert proc.returncode == 0, "Triton must still start"
    assert not pod.config.exists(), "no gemm_config.in: FT uses its default GEMM algorithms"
    status = pod.status()
    assert status["status"] == "fallback"
    assert "exited with status 255" in str(status["detail"]) and "default GEMM algorithms" in str(status["detail"])
    assert "fallback" in proc.stdout
    assert not cached_file(pod, "nvidia-a10g").exists(), "a failure is never cached"
    assert status["cache"] == "", "the report's cache is the file in use: none"


def test_the_fallback_is_the_init_containers_termination_message(tmp_path):
    pod, _ = start(tmp_path, mode="fail")
    assert pod.termination_message() == pod.status()


def test_a_tuner_that_exits_zero_without_writing_a_config_falls_back(tmp_path):
    pod, proc = start(tmp_path, mode="silent")
    assert proc.returncode == 0
    assert pod.status()["status"] == "fallback"
    assert "wrote no usable" in str(pod.status()["detail"])
    assert not pod.config.exists()


@pytest.mark.slow
def test_a_tuner_that_outlasts_the_budget_is_stopped_and_falls_back(tmp_path):
    pod, proc = start(tmp_path, mode="hang", timeout=2)
    assert proc.returncode == 0
    assert pod.status()["status"] == "fallback"
    assert "did not finish within the 2s tuning budget" in str(pod.status()["detail"])
    assert int(str(pod.status()["seconds"])) < 10


def test_an_unusable_cached_file_is_ignored_and_replaced_by_a_fresh_tuning(tmp_path):
    pod = Pod(tmp_path, "pod-1")
    broken = cached_file(pod, "nvidia-a10g")
    broken.parent.mkdir(parents=True)
    broken.write_text("")  # FT exits on an empty gemm_config.in (cublasAlgoMap.cc:57)
    pod, proc = start(tmp_path)
    assert pod.status()["status"] == "tuned"
    assert "ignoring" in proc.stdout
    assert broken.read_text() == pod.config.read_text() != ""


def test_without_a_gpu_product_the_config_is_tuned_but_not_cached(tmp_path):
    pod, proc = start(tmp_path, nvidia_smi=False)
    assert proc.returncode == 0
    assert pod.status()["status"] == "tuned" and pod.config.exists()
    assert pod.status()["cache"] == ""
    assert not (pod.store).exists()


def test_a_store_the_cache_cannot_be_written_to_still_serves_the_tuned_config(tmp_path):
    pod = Pod(tmp_path, "pod-1")
    pod.root.mkdir(exist_ok=True)
    pod.store.write_text("not a directory")  # mkdir -p under it fails, as on a read-only or full volume
    pod, proc = start(tmp_path)
    assert proc.returncode == 0
    assert pod.status()["status"] == "tuned" and pod.config.exists()
    assert pod.status()["cache"] == ""
    assert "could not write the cache" in str(pod.status()["detail"])


def test_a_stale_config_from_an_earlier_start_is_removed_on_fallback(tmp_path):
    pod = Pod(tmp_path, "pod-1")
    pod.workdir.mkdir(parents=True)
    pod.config.write_text("stale\n")
    pod, _ = start(tmp_path, mode="fail")
    assert not pod.config.exists()


def test_gpt_models_run_gpt_gemm(tmp_path):
    gpt2 = ModelSpec(
        name="gpt2",
        family=Family.GPT2,
        hf_repo="gpt2",
        revision="0" * 40,
        architecture=Architecture(d_model=768, num_heads=12, num_layers=12, d_ff=3072, vocab_size=50257),
    )
    _, proc = start(tmp_path, model=gpt2)
    assert proc.returncode == 0, proc.stderr
    assert calls(tmp_path) == [" ".join(c) for c in gemm_commands(gpt2)]
    assert all(c.startswith("gpt_gemm ") for c in calls(tmp_path))


def test_the_readmes_fallback_example_is_what_the_script_reports_for_prods_gpt_j(tmp_path):
    gptj = ModelSpec(
        name="gpt-j-6b",
        family=Family.GPTJ,
        hf_repo="EleutherAI/gpt-j-6b",
        revision="47e169305d2e8376be1d31e765533382721b2cc1",
        architecture=Architecture(d_model=4096, num_heads=16, num_layers=28, d_ff=16384, vocab_size=50400),
        batching=Batching(max_batch_size=16),
    )
    pod, _ = start(tmp_path, model=gptj, mode="fail")
    readme = " ".join(
        (Path(__file__).resolve().parents[4] / "docs" / "models" / "fastertransformer.md").read_text().split()
    )
    assert " ".join(str(pod.status()["detail"]).split()) in readme
