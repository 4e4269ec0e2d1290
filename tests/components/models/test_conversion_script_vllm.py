"""A vLLM model's Job script, run for real: the project's own ``tritonft reference`` and ``tritonft repo`` on a
seeded random Llama checkpoint (only the Hub download is stood in by a copy). No conversion: the Hugging Face files
land on the store as they are, the judge's reference is computed from them, they are checked against the spec, and the
repository names them and carries the reference."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from google.protobuf import text_format  # type: ignore[import-untyped]  # no types-protobuf in the lock
from tritonclient.grpc import model_config_pb2 as mc

from components.common.layout import model_paths
from components.common.sizing import NODE_SCALE_UP_SECONDS, job_sizing, quantity_mi
from components.models.conversion_spec import (
    COMPLETE_MARKER,
    VLLM_SCRIPT,
    ConversionPod,
    conversion_pod_spec,
    script_env,
    script_for,
)
from tests.components.models.test_conversion_script_encoder import DOWNLOAD_STAND_IN
from tests.tritonft.engines.vllm.checkpoints import variant, write
from tritonft.engines.vllm.rules import read_checkpoint
from tritonft.probe.judge_reference import (
    CHAT_CONVERSATIONS,
    GPT_REFERENCE_PROMPTS,
    REFERENCE_FILE,
    REFERENCE_PARAMETER,
    JudgeReference,
)
from tritonft.reference_memory import reference_memory_bytes
from tritonft.repo.check import check_repository
from tritonft.spec import Architecture, Family, ModelSpec, VllmSpec, WeightDType

REAL_TRITONFT = Path(sys.executable).parent / "tritonft"
VERSION = "vllm-test"


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write(variant("tiny-llama"), tmp_path_factory.mktemp("hf") / "tiny-llama")


@pytest.fixture(scope="module")
def spec(checkpoint: Path) -> ModelSpec:
    """The spec a stack entry would give for exactly this checkpoint (its config.json facts)."""
    found = read_checkpoint(json.loads((checkpoint / "config.json").read_text()))
    return ModelSpec(
        name="tiny-llama",
        family=Family.LLAMA,
        hf_repo="example/tiny-llama",
        revision="1" * 40,
        architecture=Architecture(
            d_model=found.hidden_size,
            num_heads=found.num_heads,
            num_layers=found.num_layers,
            d_ff=found.intermediate_size,
            vocab_size=found.vocab_size,
            max_positions=found.max_positions,
            gated_ffn=True,
            tied_embeddings=found.tied_embeddings,
        ),
        weight_dtype=WeightDType.FP32,
        decoupled=True,
        vllm=VllmSpec(num_kv_heads=found.num_kv_heads, checkpoint_dtype="float32", max_model_len=256),
    )


def _store(tmp_path: Path, spec: ModelSpec) -> tuple[Path, Path]:
    paths = model_paths(spec, VERSION)
    root = tmp_path / "store"
    return Path(str(root) + paths.checkpoint_dir), Path(str(root) + paths.repository_dir)


def _reference(tmp_path: Path, spec: ModelSpec) -> Path:
    return Path(str(tmp_path / "store") + model_paths(spec, VERSION).judge_reference)


def _compile_cache(tmp_path: Path, spec: ModelSpec) -> Path:
    return Path(str(tmp_path / "store") + model_paths(spec, VERSION).compile_cache)


def _run(tmp_path: Path, checkpoint: Path, spec: ModelSpec, **overrides: str) -> subprocess.CompletedProcess[str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    stand_in = bin_dir / "tritonft"
    stand_in.write_text(DOWNLOAD_STAND_IN)
    stand_in.chmod(0o755)
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(spec.to_json())
    ckpt, repo = _store(tmp_path, spec)
    env = {e["name"]: e["value"] for e in script_env(spec, model_paths(spec, VERSION))}
    env |= {
        "CHECKPOINT_DIR": str(ckpt),
        "REPOSITORY_DIR": str(repo),
        "COMPILE_CACHE_DIR": str(_compile_cache(tmp_path, spec)),
        "JUDGE_REFERENCE": str(_reference(tmp_path, spec)),
        "SPEC_PATH": str(spec_file),
        "SCRATCH": str(tmp_path / "scratch"),
        "HOME": str(tmp_path / "scratch"),
        "HF_HOME": str(tmp_path / "scratch" / ".cache" / "huggingface"),
        "TMPDIR": str(tmp_path),
        "HOSTNAME": "pod-1",
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "CALLS": str(tmp_path / "calls"),
        "CHECKPOINT_FIXTURE": str(checkpoint),
        "REAL_TRITONFT": str(REAL_TRITONFT),
        **overrides,
    }
    env.pop("XDG_CACHE_HOME", None)
    return subprocess.run(
        ["/bin/sh", "-c", script_for(spec)],
        check=False,
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _calls(tmp_path: Path) -> list[str]:
    path = tmp_path / "calls"
    return path.read_text().splitlines() if path.exists() else []


def test_a_vllm_model_is_downloaded_onto_the_store_and_rendered_without_conversion(
    tmp_path: Path, checkpoint: Path, spec: ModelSpec
) -> None:
    proc = _run(tmp_path, checkpoint, spec)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [c.split()[0] for c in _calls(tmp_path)] == ["prune-compile-cache", "download", "reference", "repo"]
    ckpt, repo = _store(tmp_path, spec)
    assert (ckpt / "model.safetensors").read_bytes() == (checkpoint / "model.safetensors").read_bytes()
    assert (ckpt / COMPLETE_MARKER).is_file() and (repo / COMPLETE_MARKER).is_file()
    assert check_repository(repo) == []
    assert not list(ckpt.parent.glob("*.partial-*")) and not list(repo.parent.glob("*.partial-*"))


def test_model_json_names_the_files_where_the_job_put_them_on_the_store(
    tmp_path: Path, checkpoint: Path, spec: ModelSpec
) -> None:
    assert _run(tmp_path, checkpoint, spec).returncode == 0
    ckpt, repo = _store(tmp_path, spec)
    args = json.loads((repo / "tiny-llama" / "1" / "model.json").read_text())
    assert args["model"] == str(ckpt)  # the Job's CHECKPOINT_DIR: in a pod, the store path below
    assert model_paths(spec, VERSION).checkpoint_dir == "/models/hf/tiny-llama/" + "1" * 40
    assert args["max_model_len"] == 256
    assert 'backend: "vllm"' in (repo / "tiny-llama" / "config.pbtxt").read_text()


def test_a_rerun_skips_what_is_complete(tmp_path: Path, checkpoint: Path, spec: ModelSpec) -> None:
    assert _run(tmp_path, checkpoint, spec).returncode == 0
    proc = _run(tmp_path, checkpoint, spec)
    assert proc.returncode == 0 and "is complete; nothing to do" in proc.stdout
    steps = ["prune-compile-cache", "download", "reference", "repo", "prune-compile-cache"]
    assert [c.split()[0] for c in _calls(tmp_path)] == steps, "only the compile cache's pruning ran again"


def test_the_reference_step_reads_the_files_on_the_store_not_a_second_download(
    tmp_path: Path, checkpoint: Path, spec: ModelSpec
) -> None:
    assert _run(tmp_path, checkpoint, spec).returncode == 0
    ckpt, _ = _store(tmp_path, spec)
    (reference,) = [c for c in _calls(tmp_path) if c.startswith("reference ")]
    assert f"--input {ckpt} " in reference
    assert f"--out {_reference(tmp_path, spec)}" in reference


def test_the_repository_carries_the_judges_reference_of_the_downloaded_weights(
    tmp_path: Path, checkpoint: Path, spec: ModelSpec
) -> None:
    assert _run(tmp_path, checkpoint, spec).returncode == 0
    _, repo = _store(tmp_path, spec)
    written = JudgeReference.from_json(_reference(tmp_path, spec).read_text())
    config = text_format.Parse((repo / "tiny-llama" / "config.pbtxt").read_text(), mc.ModelConfig())
    carried = JudgeReference.from_json(config.parameters[REFERENCE_PARAMETER].string_value)
    assert carried == written
    assert (repo / REFERENCE_FILE).read_text() == _reference(tmp_path, spec).read_text()
    assert written.family is Family.LLAMA and written.revision == spec.revision
    assert [p.prompt for p in written.prompts if not p.is_chat] == list(GPT_REFERENCE_PROMPTS)
    chats = [[dict(m) for m in p.messages] for p in written.prompts if p.is_chat]
    assert chats == [[dict(m) for m in c] for c in CHAT_CONVERSATIONS]  # the checkpoint has a chat template


def test_a_repository_rendered_before_references_is_rendered_again_without_downloading(
    tmp_path: Path, checkpoint: Path, spec: ModelSpec
) -> None:
    assert _run(tmp_path, checkpoint, spec, JUDGE_REFERENCE="").returncode == 0  # the Job as it was
    _, repo = _store(tmp_path, spec)
    assert not (repo / REFERENCE_FILE).exists()
    proc = _run(tmp_path, checkpoint, spec)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    steps = ["prune-compile-cache", "download", "repo", "prune-compile-cache", "reference", "repo"]
    assert [c.split()[0] for c in _calls(tmp_path)] == steps
    assert (repo / REFERENCE_FILE).is_file()


def test_an_architecture_without_a_cpu_forward_has_no_reference_step(spec: ModelSpec) -> None:
    assert spec.vllm is not None
    mistral = replace(spec, vllm=replace(spec.vllm, architecture="MistralForCausalLM"))
    assert model_paths(mistral, VERSION).judge_reference == ""
    env = {e["name"]: e["value"] for e in script_env(mistral, model_paths(mistral, VERSION))}
    assert env["JUDGE_REFERENCE"] == ""
    assert model_paths(spec, VERSION).judge_reference.startswith("/models/references/tiny-llama/")


def test_the_job_makes_the_models_compile_cache_directory_for_its_triton_pods(
    tmp_path: Path, checkpoint: Path, spec: ModelSpec
) -> None:
    assert _run(tmp_path, checkpoint, spec).returncode == 0
    cache = _compile_cache(tmp_path, spec)
    assert cache.is_dir() and not any(cache.iterdir())
    assert model_paths(spec, VERSION).compile_cache == "/models/compile-cache/tiny-llama"


def test_the_job_removes_the_models_compile_cache_directories_no_pod_used_for_a_day(
    tmp_path: Path, checkpoint: Path, spec: ModelSpec
) -> None:
    """A key's directory goes once neither it nor its lease (renewed by its pods) changed for a day: the stable
    version's pods keep theirs through a promotion, a key without a lease stays, and so does the old layout's
    ``<revision>`` directory that pods of before the key still mount, however old."""
    from tritonft.engines.vllm.compile_cache import LEASE, UNUSED_FOR_S

    cache = _compile_cache(tmp_path, spec)
    long_ago = time.time() - UNUSED_FOR_S - 3600
    unused, leased, new, revision = "0" * 16, "1" * 16, "2" * 16, spec.revision
    for name in (unused, leased, new, revision):
        (cache / name / "torch_compile_cache").mkdir(parents=True)
    for name in (unused, leased):
        (cache / name / LEASE).touch()
    for path in (cache / unused / LEASE, cache / unused, cache / leased, cache / new, cache / revision):
        os.utime(path, (long_ago, long_ago))  # only the leased key's lease was renewed (just now)
    proc = _run(tmp_path, checkpoint, spec)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(p.name for p in cache.iterdir()) == sorted([leased, new, revision])
    assert f"removed the compile cache {cache}/{unused} (unused for {UNUSED_FOR_S} s)" in proc.stdout


def test_a_rerun_after_a_complete_repository_still_makes_the_compile_cache_directory(
    tmp_path: Path, checkpoint: Path, spec: ModelSpec
) -> None:
    # A stack deployed before the cache existed: its Job is replaced (new environment) and finds the repository done.
    assert _run(tmp_path, checkpoint, spec).returncode == 0
    _compile_cache(tmp_path, spec).rmdir()
    proc = _run(tmp_path, checkpoint, spec)
    assert "nothing to do" in proc.stdout and _compile_cache(tmp_path, spec).is_dir()


def refused(tmp_path: Path, checkpoint: Path, spec: ModelSpec) -> str:
    """The Job's stderr, after checking that it failed and published no repository."""
    proc = _run(tmp_path, checkpoint, spec)
    assert proc.returncode != 0
    _, repo = _store(tmp_path, spec)
    assert not repo.exists()
    return proc.stderr


def test_a_checkpoint_that_is_not_the_specs_model_is_never_published_as_a_repository(
    tmp_path: Path, checkpoint: Path, spec: ModelSpec
) -> None:
    assert spec.vllm is not None
    wrong = replace(spec, vllm=replace(spec.vllm, num_kv_heads=4))
    assert "config.json num_kv_heads: 2, the spec says 4" in refused(tmp_path, checkpoint, wrong)


def test_a_max_model_len_beyond_the_downloaded_models_positions_is_refused_before_publishing(
    tmp_path: Path, checkpoint: Path, spec: ModelSpec
) -> None:
    assert spec.vllm is not None
    long = replace(spec, vllm=replace(spec.vllm, max_model_len=4096))
    assert "vllm.maxModelLen: 4096 exceeds the model's 512 positions" in refused(tmp_path, checkpoint, long)


def test_weights_cut_short_are_never_published_as_a_repository(
    tmp_path: Path, checkpoint: Path, spec: ModelSpec
) -> None:
    # What the Job checks instead of an answer (no vLLM in the tools image): the weights are whole and the model's.
    cut = tmp_path / "cut"
    shutil.copytree(checkpoint, cut)
    weights = cut / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    assert "model.safetensors is truncated or corrupt; re-download it" in refused(tmp_path, cut, spec)


def test_weights_of_another_model_than_the_spec_are_never_published(
    tmp_path: Path, checkpoint: Path, spec: ModelSpec
) -> None:
    wrong = replace(spec, architecture=replace(spec.architecture, num_layers=3))
    said = refused(tmp_path, checkpoint, wrong)
    assert "weights: decoder layers 0..1 (2), the spec says 3 (0..2)" in said


def test_the_job_runs_the_vllm_script_and_nothing_of_fastertransformers(spec: ModelSpec) -> None:
    pod = ConversionPod(
        image="tools@sha256:" + "0" * 64,
        claim_name="store",
        spec_config_map="cm",
        cpu_node_selector={},
        gpu_node_selector={},
        hf_token_secret="hf-token",
    )
    pod_spec = conversion_pod_spec(spec, model_paths(spec, VERSION), pod, job_sizing(spec))
    (container,) = pod_spec["containers"]
    assert container["command"] == ["/bin/sh", "-c", VLLM_SCRIPT]
    assert "tritonft convert" not in VLLM_SCRIPT and "tritonft verify" not in VLLM_SCRIPT
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["ENGINE"] == "vllm"
    assert env["HF_TOKEN_PATH"] == "/var/run/secrets/huggingface/token"
    assert {"name": "hf-token", "mountPath": "/var/run/secrets/huggingface", "readOnly": True} in container[
        "volumeMounts"
    ]


def _vllm_env(spec: ModelSpec) -> tuple[dict[str, str], str]:
    """The vLLM Job container's environment and CPU limit."""
    pod = ConversionPod(
        image="tools@sha256:" + "0" * 64,
        claim_name="store",
        spec_config_map="cm",
        cpu_node_selector={},
        gpu_node_selector={},
    )
    (container,) = conversion_pod_spec(spec, model_paths(spec, VERSION), pod, job_sizing(spec))["containers"]
    return {e["name"]: e["value"] for e in container["env"]}, container["resources"]["limits"]["cpu"]


BLAS_THREADS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def test_the_reference_steps_blas_threads_are_the_jobs_cpu_limit(spec: ModelSpec) -> None:
    assert model_paths(spec, VERSION).judge_reference
    env, limit = _vllm_env(spec)
    assert int(limit) >= 1
    assert [env.get(v) for v in BLAS_THREADS] == [limit] * 3
    assert spec.vllm is not None
    mistral = replace(spec, vllm=replace(spec.vllm, architecture="MistralForCausalLM"))
    assert not set(BLAS_THREADS) & set(_vllm_env(mistral)[0]), "no reference step, no BLAS"


def test_the_vllm_job_names_no_converter_dtype(spec: ModelSpec) -> None:
    # vLLM serves the spec's `dtype` (bf16 for Llama): the converters' DTYPE (fp16) would only mislead a reader.
    assert "DTYPE" not in _vllm_env(spec)[0] and "$DTYPE" not in VLLM_SCRIPT


def test_the_llama_job_is_sized_for_its_reference_step_not_a_conversion(spec: ModelSpec) -> None:
    from components.settings.catalog import KNOWN_VLLM

    entry = KNOWN_VLLM["meta-llama/Llama-3.1-8B-Instruct"]
    llama = replace(spec, architecture=entry.architecture, vllm=entry.facts, weight_dtype=WeightDType.FP16)
    sizing = job_sizing(llama)
    assert sizing.memory_request == quantity_mi(reference_memory_bytes(llama))  # every weight at fp32
    assert reference_memory_bytes(llama) > llama.parameters * 4
    assert sizing.cpu_request == "2"
    assert sizing.verify_generation is False
    # One retry, as a reference Job (its deadline covers the reference's greedy steps and branches): Pulumi waits
    # for both tries and a node's scale-up, no more.
    assert sizing.backoff_limit == 1
    assert sizing.pulumi_timeout_minutes == math.ceil((2 * sizing.active_deadline_seconds + NODE_SCALE_UP_SECONDS) / 60)
    mistral = replace(llama, vllm=replace(entry.facts, architecture="MistralForCausalLM"))
    assert job_sizing(mistral).backoff_limit == 2  # no reference step: the download's retries
    files_gib = llama.parameters * 2 / 2**30  # bfloat16 as published: 14.96 GiB
    assert sizing.scratch_size == f"{int(files_gib * 1.2 + 1) + 1}Gi"
