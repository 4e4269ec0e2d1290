"""FasterTransformer's GEMM autotuning (seed 000's ``03_kernel_autotuning_t5.sh``), as pure functions.

FT's ``t5_gemm`` and ``gpt_gemm`` time every cuBLAS / cuBLASLt algorithm for the model's GEMM shapes on the GPU at
hand and write the fastest into ``gemm_config.in`` in their working directory; the FT Triton models open that file
by its relative name when they build the model (``cublasAlgoMap("gemm_config.in")``), so it must sit in the
directory ``tritonserver`` starts in. Without it FT warns ``gemm_config.in is not found; using default GEMM algo``
and uses cuBLAS's heuristics. The argument lists below are FT's, read at the commit the server image builds
(``tests/tritonft/engines/fastertransformer/ft_gemm_args.json`` has every ``file:line``):

* ``t5_gemm batch_size beam_width max_mem_seq_len encoder_d_model encoder_head_num encoder_size_per_head
  encoder_inter_size decoder_d_model decoder_head_num decoder_size_per_head decoder_inter_size decoder_vocab_size
  data_type tensor_para_size is_append`` (``src/fastertransformer/models/t5/t5_gemm.cc:45-63``);
* ``gpt_gemm batch_size beam_width max_input_len head_num size_per_head inter_size vocab_size data_type
  tensor_para_size is_append`` (``src/fastertransformer/models/multi_gpu_gpt/gpt_gemm.cc:39-48``; FT's GPT-J
  guide tunes GPT-J with it too);
* ``data_type`` is FT's ``CublasDataType``: fp32 0, fp16 1, bf16 2 (``src/fastertransformer/utils/cuda_utils.h:49``).

FT looks a GEMM up by its exact ``(batchCount, m, n, k, dtype)``, so a config covers the shapes it was tuned at:
the model's batch sizes (``maxBatchSize`` and the preferred sizes, several runs appended into one file with
``is_append``) at beam width 1 and the longest prompt (``maxInputLen``). Other shapes keep cuBLAS's heuristics, as
they would without the file.

The tuning runs in an init container of the Triton pod (same GPUs, same node) through :data:`TUNE_SCRIPT`, which
reuses a config cached on the model store under ``<cache dir>/<GPU product>/gemm_config.in`` (the cache dir is
keyed by :func:`cache_key`: model shape, data type, TP/PP, tuned batch and beam sizes, FT commit, Triton release),
so a second replica or a restart on the same GPU product skips the tuning. Any failure is logged and falls back to
FT's defaults: serving is never blocked by the optimisation.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tritonft.spec import DataType, Family, ModelSpec

GEMM_CONFIG = "gemm_config.in"
"""FT's ``GEMM_CONFIG`` (``src/fastertransformer/utils/cublasAlgoMap.h:30``): written by the tuners, read by the
Triton models from the working directory."""
STATUS_FILE = "gemm_tuning.json"
"""What the tuning step did (``tuned``, ``cached`` or ``fallback``), one JSON line beside ``gemm_config.in``; the
same line is the init container's termination message."""

INIT_CONTAINER = "gemm-tuning"
"""Name of the Triton pod's init container that runs :data:`TUNE_SCRIPT`."""

PROGRAMS: dict[Family, str] = {Family.T5: "t5_gemm", Family.GPT2: "gpt_gemm", Family.GPTJ: "gpt_gemm"}
"""The tuner FT's guide runs for each family (docs/t5_guide.md:298, docs/gpt_guide.md:405, docs/gptj_guide.md:237)."""
FT_DATA_TYPES: dict[DataType, int] = {DataType.FP32: 0, DataType.FP16: 1, DataType.BF16: 2}
"""``CublasDataType`` (``src/fastertransformer/utils/cuda_utils.h:49``)."""

TUNED_BEAM_WIDTH = 1
"""Beam width the shapes are tuned at: what every request without ``n > 1`` (beam search) runs."""
MAX_TUNING_POINTS = 4
"""At most this many batch sizes are tuned (the largest): each run costs start-up time, and FT keeps at most
``MAX_CONFIG_NUM`` (20) x 6 lines when appending (``src/fastertransformer/utils/cuda_utils.h:36``)."""
DEFAULT_TIMEOUT_SECONDS = 900
"""Default bound on the whole tuning step; past it the step falls back to FT's defaults."""


@dataclass(frozen=True)
class TuningPoint:
    """One tuner run: the batch and beam sizes its GEMM shapes are built from."""

    batch_size: int
    beam_width: int = TUNED_BEAM_WIDTH


def tuning_points(model: ModelSpec) -> tuple[TuningPoint, ...]:
    """The batch sizes to tune, largest first: ``maxBatchSize`` and the preferred batch sizes, at most
    :data:`MAX_TUNING_POINTS` of them (the largest, where GEMM choice matters most)."""
    sizes = {model.batching.max_batch_size, *model.batching.preferred_batch_sizes}
    sizes = {s for s in sizes if 0 < s <= model.batching.max_batch_size}
    return tuple(TuningPoint(b) for b in sorted(sizes, reverse=True)[:MAX_TUNING_POINTS])


def program(model: ModelSpec) -> str:
    """``t5_gemm`` or ``gpt_gemm``."""
    return PROGRAMS[model.family]


def gemm_args(model: ModelSpec, point: TuningPoint, *, append: bool) -> list[str]:
    """The tuner's ``argv[1:]`` for ``model`` at ``point``, in FT's order (see the module docstring).

    Raises ``ValueError`` when FT's tuner would abort: heads not divisible by the tensor-parallel size
    (``FT_CHECK(head_num % tensor_para_size == 0)`` in ``*_gemm_func.cc``).
    """
    arch = model.architecture
    tp = model.tensor_parallel
    if arch.num_heads % tp:
        raise ValueError(
            f"model {model.name!r}: tensorParallel {tp} does not divide num_heads {arch.num_heads}; "
            f"{program(model)} would abort (FT_CHECK(head_num % tensor_para_size == 0))"
        )
    shape = [point.batch_size, point.beam_width, model.max_input_len]
    if model.family is Family.T5:
        # T5 in FT has one shape for both stacks (the converter writes the same d_model/heads/d_kv/d_ff to both).
        stack = [arch.d_model, arch.num_heads, arch.head_size, arch.d_ff]
        values = [*shape, *stack, *stack, arch.vocab_size]
    else:
        values = [*shape, arch.num_heads, arch.head_size, arch.d_ff, arch.vocab_size]
    values += [FT_DATA_TYPES[model.data_type], tp, int(append)]
    return [str(v) for v in values]


def gemm_commands(model: ModelSpec) -> list[list[str]]:
    """Every tuner run, in order: the first writes a new ``gemm_config.in``, the others append to it."""
    return [[program(model), *gemm_args(model, point, append=i > 0)] for i, point in enumerate(tuning_points(model))]


def cache_key(model: ModelSpec, *, ft_commit: str, triton_version: str) -> str:
    """Content key of the tuned config, short of the GPU product (found on the node at run time).

    Everything the tuner's output depends on: the family and the GEMM dimensions, data type, TP and PP, the tuned
    batch and beam sizes and sequence length, the FT commit (the tuner's code) and the Triton release (the CUDA
    and cuBLAS libraries whose algorithms are timed). Not the model's name, revision or replica count.
    """
    arch = model.architecture
    material = {
        "family": str(model.family),
        "d_model": arch.d_model,
        "num_heads": arch.num_heads,
        "head_size": arch.head_size,
        "d_ff": arch.d_ff,
        "vocab_size": arch.vocab_size,
        "data_type": str(model.data_type),
        "tp": model.tensor_parallel,
        "pp": model.pipeline_parallel,
        "points": [[p.batch_size, p.beam_width] for p in tuning_points(model)],
        "max_input_len": model.max_input_len,
        "ft_commit": ft_commit,
        "triton": triton_version,
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:12]


def cache_dir(store_root: str, model: ModelSpec, key: str) -> str:
    """``<store>/gemm/<family>-<data type>-tp<TP>/<key>``; the script adds ``/<GPU product>/gemm_config.in``."""
    return f"{store_root}/gemm/{model.family}-{model.data_type}-tp{model.tensor_parallel}/{key}"


TUNE_SCRIPT = r"""
set -u
say() { echo "triton-ft gemm: $*"; }
started=$(date +%s)
gpu=""
cached=""
report() {
  line=$(printf '{"status":"%s","detail":"%s","gpu":"%s","cache":"%s","seconds":%s}' \
    "$1" "$2" "$gpu" "$cached" "$(( $(date +%s) - started ))")
  printf '%s\n' "$line" > "$WORKDIR/STATUS_FILE" || say "cannot write $WORKDIR/STATUS_FILE"
  printf '%s\n' "$line" > "${TERMINATION_LOG:-/dev/termination-log}" 2>/dev/null || true
  say "$1: $2"
}
fallback() {
  rm -f "$WORKDIR/GEMM_CONFIG"
  cached=""
  report fallback "$1; Triton starts without GEMM_CONFIG and FasterTransformer uses cuBLAS's default GEMM algorithms"
  exit 0
}
usable() { [ -s "$1" ] && [ "$(wc -l < "$1")" -ge 2 ] && grep -q ' ### ' "$1"; }
install_config() {
  cp "$1" "$WORKDIR/.GEMM_CONFIG.tmp" && mv "$WORKDIR/.GEMM_CONFIG.tmp" "$WORKDIR/GEMM_CONFIG"
}

gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1 | tr -d '"\\')
if [ -n "$gpu" ]; then
  slug=$(printf '%s' "$gpu" | tr '[:upper:]' '[:lower:]' | tr -cs 'a-z0-9' '-' | sed -e 's/^-*//' -e 's/-*$//')
  cached="$CACHE_DIR/$slug/GEMM_CONFIG"
  if usable "$cached"; then
    if install_config "$cached"; then
      report cached "reused $cached, tuned earlier for this GPU product and model shape"
      exit 0
    fi
    say "cannot copy $cached into $WORKDIR; tuning instead"
  elif [ -e "$cached" ]; then
    say "ignoring $cached: not a usable GEMM_CONFIG"
  fi
else
  say "nvidia-smi named no GPU: tuning anyway, but the result is not cached (its key needs the GPU product)"
fi

rm -rf "$SCRATCH" && mkdir -p "$SCRATCH" && cd "$SCRATCH" || fallback "cannot prepare the scratch directory $SCRATCH"
runs=0
while IFS= read -r args; do
  [ -n "$args" ] || continue
  runs=$((runs + 1))
  left=$(( TIMEOUT_SECONDS - ($(date +%s) - started) ))
  [ "$left" -gt 0 ] || fallback "the tuning budget of ${TIMEOUT_SECONDS}s ran out before run $runs"
  say "[$runs] $GEMM_PROGRAM $args (at most ${left}s)"
  # shellcheck disable=SC2086  # $args: integers rendered by gemm_commands, split on purpose
  timeout "$left" "$GEMM_PROGRAM" $args
  rc=$?
  if [ "$rc" -eq 124 ]; then fallback "$GEMM_PROGRAM did not finish within the ${TIMEOUT_SECONDS}s tuning budget"; fi
  if [ "$rc" -ne 0 ]; then fallback "$GEMM_PROGRAM $args exited with status $rc"; fi
done <<RUNS
$GEMM_RUNS
RUNS
usable "$SCRATCH/GEMM_CONFIG" || fallback "$GEMM_PROGRAM exited 0 but wrote no usable $SCRATCH/GEMM_CONFIG"
install_config "$SCRATCH/GEMM_CONFIG" || fallback "cannot copy the tuned GEMM_CONFIG into $WORKDIR"
rm -rf "$SCRATCH"
if [ -z "$cached" ]; then
  report tuned "tuned $runs batch size(s); not cached (GPU product unknown)"
  exit 0
fi
partial="$cached.partial-${HOSTNAME:-pod}"
if mkdir -p "$(dirname "$cached")" && cp "$WORKDIR/GEMM_CONFIG" "$partial" && mv "$partial" "$cached"; then
  report tuned "tuned $runs batch size(s); cached at $cached for the next replica on this GPU product"
else
  rm -f "$partial"
  cached=""
  report tuned "tuned $runs batch size(s); could not write the cache on the model store (next start tunes again)"
fi
""".replace("GEMM_CONFIG", GEMM_CONFIG).replace("STATUS_FILE", STATUS_FILE)
"""The init container's program (POSIX sh; every input comes from :func:`script_env`, never by interpolation).

Cache hit: copy, report ``cached``. Otherwise run each tuner command in a fresh scratch directory under one time
budget, check the file is one FT can load (a header plus ``... ### ...`` lines: FT exits on an empty file,
``cublasAlgoMap.cc:57``, and ``t5_gemm`` exits 0 without writing when its arguments are short), install it into the
working directory, then publish it to the store cache by an atomic rename (two replicas tuning at once both publish
a valid file). On any failure: no ``gemm_config.in``, report ``fallback``, exit 0 so Triton starts."""


def script_env(
    model: ModelSpec,
    *,
    cache_directory: str,
    workdir: str,
    scratch: str,
    timeout_seconds: int = DEFAULT_TIMEOUT_SECONDS,
) -> list[dict[str, str]]:
    """The script's inputs as container environment variables."""
    if timeout_seconds < 1:
        raise ValueError(f"GEMM tuning timeout must be at least 1 second (got {timeout_seconds})")
    runs = [" ".join(command[1:]) for command in gemm_commands(model)]
    values = {
        "GEMM_PROGRAM": program(model),
        "GEMM_RUNS": "\n".join(runs),
        "CACHE_DIR": cache_directory,
        "WORKDIR": workdir,
        "SCRATCH": scratch,
        "TIMEOUT_SECONDS": str(timeout_seconds),
    }
    return [{"name": k, "value": v} for k, v in values.items()]


def tuning_report(pod: Mapping[str, Any]) -> dict[str, Any] | None:
    """What a pod's tuning step reported (its termination message, :data:`STATUS_FILE`'s line), or None when the
    pod has no tuning step or it has not finished. A message that is not the script's JSON (e.g. the log tail
    Kubernetes substitutes when the container crashed before writing one) is reported as ``unknown`` with that
    text."""
    statuses = pod.get("status", {}).get("initContainerStatuses") or []
    for status in statuses:
        if status.get("name") != INIT_CONTAINER:
            continue
        state = status.get("state", {}).get("terminated") or status.get("lastState", {}).get("terminated")
        if not state:
            return None
        message = str(state.get("message") or "").strip()
        try:
            report = json.loads(message)
        except ValueError:
            report = None
        if isinstance(report, dict) and "status" in report:
            return report
        exit_code = state.get("exitCode")
        return {"status": "unknown", "detail": message[-300:] or f"exited {exit_code} without a report"}
    return None


def tuning_summary(pods: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Pod name -> ``<status>: <detail>`` of every pod whose tuning step finished (what ``pulumi up`` reports)."""
    out: dict[str, str] = {}
    for pod in pods:
        report = tuning_report(pod)
        if report is not None:
            out[str(pod["metadata"]["name"])] = f"{report['status']}: {report.get('detail', '')}"
    return out


__all__ = [
    "DEFAULT_TIMEOUT_SECONDS",
    "FT_DATA_TYPES",
    "GEMM_CONFIG",
    "INIT_CONTAINER",
    "PROGRAMS",
    "STATUS_FILE",
    "TUNE_SCRIPT",
    "TuningPoint",
    "cache_dir",
    "cache_key",
    "gemm_args",
    "gemm_commands",
    "program",
    "script_env",
    "tuning_points",
    "tuning_report",
    "tuning_summary",
]
