"""The conversion Job's pod, as a pure function of the model (no Pulumi).

Why one container running a short POSIX script rather than three init containers: the Job must be idempotent
across retries *and* across re-creation. A finished Job is kept (no ``ttlSecondsAfterFinished``: a Job deleted
behind Pulumi's back is a diff on every ``refresh``), but one deleted by hand, or re-created after a
``pulumi refresh``, runs again; the script then sees the completion markers in the store and exits in seconds
instead of downloading and converting again. Init containers cannot skip themselves. Each step writes
into a ``.partial-<pod>`` directory that is renamed into place only when complete, so Triton never sees a
half-written model (a crash leaves only a partial directory that the next attempt replaces). Every value reaches
the script through environment variables, never by string interpolation, so a model name cannot inject shell.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Any

from components.common.layout import STORE_MOUNT, ModelPaths
from components.common.netpol import dns_egress
from components.common.placement import away_from_gpu_nodes
from components.common.podsec import container_security_context, pod_security_context
from components.common.sizing import JobSizing
from tritonft.engines import engine_for
from tritonft.probe.judge_reference import REFERENCE_FILE
from tritonft.repo.tokenization import TOKENIZER_FILE_SETS
from tritonft.spec import SPEC_JSON, ModelSpec

COMPLETE_MARKER = ".tritonft-complete"
SCRATCH_MOUNT = "/work"
SPEC_MOUNT = "/spec"
SPEC_FILE = SPEC_JSON
HF_TOKEN_MOUNT = "/var/run/secrets/huggingface"
HF_TOKEN_KEY = "token"

TOKENIZER_FILES = (*(name for names in TOKENIZER_FILE_SETS for name in names), "tokenizer_config.json")
"""Tokenizer files kept beside the weights (the download scratch is deleted): what ``tritonft repo`` ships."""

RENDER_JUDGED = """\
render_judged() {
  partial="$REPOSITORY_DIR.partial-$HOSTNAME"
  rm -rf "$partial" && mkdir -p "$(dirname "$REPOSITORY_DIR")"
  echo "triton-ft: render repository $REPOSITORY_DIR with the judge's reference"
  tritonft repo --spec "$SPEC_PATH" --checkpoint "$CHECKPOINT_DIR" --out "$partial" \\
    --tokenizer "$CHECKPOINT_DIR/tokenizer" --model-root "$REPOSITORY_DIR" \\
    --checkpoint-path "$CHECKPOINT_DIR/$TP-gpu" --judge-reference "$JUDGE_REFERENCE"
  cp "$JUDGE_REFERENCE" "$partial/@REFERENCE@"
  touch "$partial/MARKER"
  if [ -f "$REPOSITORY_DIR/MARKER" ] && [ -f "$REPOSITORY_DIR/@REFERENCE@" ]; then
    rm -rf "$partial"
    echo "triton-ft: $REPOSITORY_DIR was published by the other Job meanwhile"
    return 0
  fi
  rm -rf "$REPOSITORY_DIR"
  if ! mv -T "$partial" "$REPOSITORY_DIR"; then
    # The other Job renamed its copy into place between the check and the rename (never into it: -T).
    [ -f "$REPOSITORY_DIR/MARKER" ] && [ -f "$REPOSITORY_DIR/@REFERENCE@" ] || return 1
    rm -rf "$partial"
    echo "triton-ft: $REPOSITORY_DIR was published by the other Job meanwhile"
  fi
}"""
"""A FasterTransformer generator's repository, rendered with the judge's reference by whichever of its two Jobs
(conversion, reference) finishes second: the one that finds both the checkpoint and the reference in the store. Both
render the same files; if both get there at once, the rename (``mv -T``: onto the directory, never into it) lets
exactly one copy in, and the other Job finds it complete and drops its own."""

CONVERT_SCRIPT = (
    """\
set -eu
publish() { touch "$1/MARKER" && rm -rf "$2" && mv "$1" "$2"; }
judged() { [ "$ENGINE" != "fastertransformer" ] || [ -f "$1/@REFERENCE@" ]; }
RENDER_JUDGED
if [ -f "$REPOSITORY_DIR/MARKER" ] && judged "$REPOSITORY_DIR"; then
  echo "triton-ft: $REPOSITORY_DIR is complete; nothing to do"
  exit 0
fi
if [ -f "$CHECKPOINT_DIR/MARKER" ]; then
  echo "triton-ft: checkpoint $CHECKPOINT_DIR is complete; skipping download and conversion"
else
  partial="$CHECKPOINT_DIR.partial-$HOSTNAME"
  rm -rf "$partial" && mkdir -p "$(dirname "$CHECKPOINT_DIR")"
  echo "triton-ft: [1/3] download $HF_REPO@$HF_REVISION"
  tritonft download --repo "$HF_REPO" --revision "$HF_REVISION" --dest "$SCRATCH/hf"
  if [ "$ENGINE" = "onnxruntime" ]; then
    echo "triton-ft: [2/3] convert to ONNX ($TASK, dtype=$DTYPE, max_seq_length=$MAX_SEQ_LENGTH)"
    tritonft convert --input "$SCRATCH/hf" --output "$partial" --dtype "$DTYPE" --task "$TASK" \\
      --pooling "$POOLING" "--$NORMALIZE" --max-seq-length "$MAX_SEQ_LENGTH"
  else
    echo "triton-ft: [2/3] convert (tp=$TP, dtype=$DTYPE)"
    tritonft convert --input "$SCRATCH/hf" --output "$partial" --tp "$TP" --dtype "$DTYPE"
  fi
  mkdir -p "$partial/tokenizer"
  for f in TOKENIZER_FILES; do
    if [ -f "$SCRATCH/hf/$f" ]; then cp "$SCRATCH/hf/$f" "$partial/tokenizer/"; fi
  done
  if [ "$VERIFY_GENERATE" = "1" ] && [ "$ENGINE" = "onnxruntime" ]; then
    echo "triton-ft: [2/3] check what the converted model answers (ONNX Runtime, the probe's judgement)"
    tritonft verify "$partial/onnx" --generate --tokenizer "$partial/tokenizer"
  elif [ "$VERIFY_GENERATE" = "1" ]; then
    echo "triton-ft: [2/3] check what the converted files generate (CPU reference, the probe's judgement)"
    tritonft verify "$partial/$TP-gpu" --generate --tokenizer "$partial/tokenizer" --bleu-threshold "$BLEU_THRESHOLD"
  fi
  publish "$partial" "$CHECKPOINT_DIR"
  rm -rf "$SCRATCH/hf"
fi
if [ "$ENGINE" = "onnxruntime" ]; then
  partial="$REPOSITORY_DIR.partial-$HOSTNAME"
  rm -rf "$partial" && mkdir -p "$(dirname "$REPOSITORY_DIR")"
  echo "triton-ft: [3/3] render repository $REPOSITORY_DIR"
  tritonft repo --spec "$SPEC_PATH" --checkpoint "$CHECKPOINT_DIR" --out "$partial" \\
    --tokenizer "$CHECKPOINT_DIR/tokenizer" --require-checkpoint
  publish "$partial" "$REPOSITORY_DIR"
elif [ -f "$JUDGE_REFERENCE" ]; then
  render_judged
else
  echo "triton-ft: [3/3] the judge's reference is not there yet: Job $REFERENCE_JOB renders $REPOSITORY_DIR with it"
fi
echo "triton-ft: done"
""".replace("RENDER_JUDGED", RENDER_JUDGED)
    .replace("MARKER", COMPLETE_MARKER)
    .replace("TOKENIZER_FILES", " ".join(TOKENIZER_FILES))
    .replace("@REFERENCE@", REFERENCE_FILE)
)
"""The Job's program: download -> convert (-> generation check) -> repo, each skipped when its output is already
complete. The generation check runs before the checkpoint is published, so a conversion that generates garbage
never reaches the store.

A FasterTransformer generator's repository carries the judge's reference of its revision: its reference Job
(:data:`REFERENCE_SCRIPT`), running beside this one from its own download, writes it to ``JUDGE_REFERENCE``. The
repository (``tritonft repo --judge-reference``: the ensemble carries it, so the judge of this version reads this
version's reference from the server it judges; a copy stays beside it) is rendered by whichever Job finishes second
(:data:`RENDER_JUDGED`): this one, when the reference is already there, else the reference Job. A complete repository
without a reference (a store written before the judge had references) is rendered again.

``ENGINE`` picks the model's engine steps. FasterTransformer (``fastertransformer``): ``convert --tp``, the
``<TP>-gpu`` weights stay in the checkpoint directory and the repository points at them. ONNX Runtime
(``onnxruntime``, the encoders): ``convert`` with the spec's task, pooling, normalisation and sequence limit given
explicitly (so the conversion's manifest is the spec's, whatever sentence-transformers files the download has or
lacks), no ``--tp``, and as its check ``verify OUT/onnx --generate`` (ONNX Runtime answers the probe's texts:
width, unit norm, similarity order, a classifier's labels); the repository holds its own copy of ``model.onnx`` and
the tokenizer, which ``repo --require-checkpoint`` checks are there."""


REFERENCE_SCRIPT = (
    """\
set -eu
RENDER_JUDGED
if [ -f "$JUDGE_REFERENCE" ]; then
  echo "triton-ft: the judge's reference $JUDGE_REFERENCE is complete"
else
  echo "triton-ft: [1/3] download $HF_REPO@$HF_REVISION"
  tritonft download --repo "$HF_REPO" --revision "$HF_REVISION" --dest "$SCRATCH/hf"
  echo "triton-ft: [2/3] the judge's reference: what the original weights answer (CPU, fp32)"
  mkdir -p "$(dirname "$JUDGE_REFERENCE")"
  tritonft reference --input "$SCRATCH/hf" --spec "$SPEC_PATH" --out "$JUDGE_REFERENCE" --work "$SCRATCH/reference"
  rm -rf "$SCRATCH/hf"
fi
if [ -f "$REPOSITORY_DIR/MARKER" ] && [ -f "$REPOSITORY_DIR/@REFERENCE@" ]; then
  echo "triton-ft: $REPOSITORY_DIR is complete; nothing to do"
elif [ -f "$CHECKPOINT_DIR/MARKER" ]; then
  echo "triton-ft: [3/3] the checkpoint is converted"
  render_judged
else
  echo "triton-ft: [3/3] the checkpoint is not converted yet: Job $CONVERSION_JOB renders $REPOSITORY_DIR with it"
fi
echo "triton-ft: done"
""".replace("RENDER_JUDGED", RENDER_JUDGED)
    .replace("MARKER", COMPLETE_MARKER)
    .replace("@REFERENCE@", REFERENCE_FILE)
)
"""A FasterTransformer generator's reference Job: download -> ``tritonft reference`` (skipped when the reference is
already there) -> the repository, when the checkpoint is converted (:data:`RENDER_JUDGED`). It runs beside the
conversion Job (its own download of the same pinned, verified revision; its own memory, sized for the original
weights at fp32: :func:`components.common.sizing.judge_reference_job_sizing`); neither waits for the other, so the
reference step adds nothing to ``up`` unless it outlasts the conversion. ``tritonft reference`` writes the file under
a temporary name and renames it into place: the conversion Job never reads half of one."""


VLLM_SCRIPT = """\
set -eu
publish() { touch "$1/MARKER" && rm -rf "$2" && mv "$1" "$2"; }
judged() { [ -z "$JUDGE_REFERENCE" ] || [ -f "$1/@REFERENCE@" ]; }
mkdir -p "$COMPILE_CACHE_DIR"
tritonft prune-compile-cache "$COMPILE_CACHE_DIR"
if [ -f "$REPOSITORY_DIR/MARKER" ] && judged "$REPOSITORY_DIR"; then
  echo "triton-ft: $REPOSITORY_DIR is complete; nothing to do"
  exit 0
fi
if [ -f "$CHECKPOINT_DIR/MARKER" ]; then
  echo "triton-ft: checkpoint $CHECKPOINT_DIR is complete; skipping the download"
else
  partial="$CHECKPOINT_DIR.partial-$HOSTNAME"
  rm -rf "$partial" && mkdir -p "$(dirname "$CHECKPOINT_DIR")"
  echo "triton-ft: [1/3] download $HF_REPO@$HF_REVISION (vLLM serves the Hugging Face files as they are: no conversion)"
  tritonft download --repo "$HF_REPO" --revision "$HF_REVISION" --dest "$partial"
  publish "$partial" "$CHECKPOINT_DIR"
  rm -rf "$HF_HOME"
fi
partial="$REPOSITORY_DIR.partial-$HOSTNAME"
rm -rf "$partial" && mkdir -p "$(dirname "$REPOSITORY_DIR")"
if [ -z "$JUDGE_REFERENCE" ]; then
  echo "triton-ft: [3/3] check config.json against the spec, render repository $REPOSITORY_DIR (backend vllm)"
  tritonft repo --spec "$SPEC_PATH" --checkpoint "$CHECKPOINT_DIR" --out "$partial" --checkpoint-path "$CHECKPOINT_DIR"
else
  if [ -f "$JUDGE_REFERENCE" ]; then
    echo "triton-ft: the judge's reference $JUDGE_REFERENCE is complete"
  else
    echo "triton-ft: [2/3] the judge's reference: what the original weights answer (CPU, fp32)"
    mkdir -p "$(dirname "$JUDGE_REFERENCE")"
    tritonft reference --input "$CHECKPOINT_DIR" --spec "$SPEC_PATH" --out "$JUDGE_REFERENCE"
  fi
  echo "triton-ft: [3/3] check config.json against the spec, render repository $REPOSITORY_DIR (backend vllm)"
  tritonft repo --spec "$SPEC_PATH" --checkpoint "$CHECKPOINT_DIR" --out "$partial" \\
    --checkpoint-path "$CHECKPOINT_DIR" --judge-reference "$JUDGE_REFERENCE"
  cp "$JUDGE_REFERENCE" "$partial/@REFERENCE@"
fi
publish "$partial" "$REPOSITORY_DIR"
echo "triton-ft: done"
""".replace("MARKER", COMPLETE_MARKER).replace("@REFERENCE@", REFERENCE_FILE)
"""A vLLM model's Job (``ENGINE=vllm``): download -> the judge's reference -> repo, each skipped when its output is
already complete; first it makes the model's compile cache directory (``COMPILE_CACHE_DIR``, ``compile-cache/<model>``),
owned by the workloads' user, which its Triton pods mount writable by ``subPath`` (a directory the kubelet made for a
missing ``subPath`` could be root's), and removes the key directories in it whose lease no pod has renewed for a
day (``tritonft prune-compile-cache``: :mod:`tritonft.engines.vllm.compile_cache`; a running pod renews its key's
lease every minute, so the stable version's stays through a promotion; a directory without a lease, such as the
old layout's ``<revision>``, is never removed).

No conversion: ``tritonft download`` (pinned revision, every file hashed and each LFS weight compared with the sha256
the Hub published, the token of a gated repo read from the mounted Secret through ``HF_TOKEN_PATH``) writes the
Hugging Face files into a partial directory on the store that is renamed into place, ``/models/hf/<model>/<revision>``
(what ``model.json`` names); the Hub's cache on the scratch volume is then dropped.

The judge's reference (``JUDGE_REFERENCE`` set: a Llama/Qwen2 architecture,
:func:`tritonft.probe.judge_reference.has_reference`): ``tritonft reference`` reads those very files from the store
(no second download) into the CPU forward of the architecture (:mod:`tritonft.reference.llama`, every weight at fp32)
and follows the judge's prompts greedily; the file is written under a temporary name and renamed into place, so a
rerun after a crash redoes only what is missing. The repository carries it (``config.pbtxt``'s
``tritonft_judge_reference``: the judge of this version reads this version's reference from the server it judges; a
copy stays beside it), and a complete repository without it (rendered before references existed) is rendered again.
One Job, not a second one beside it as for FasterTransformer: nothing here converts, so the reference step is the
only long step and the Job's memory and deadline are sized for it
(:func:`components.common.sizing.vllm_job_sizing`).

Before the repository is published, ``tritonft repo --checkpoint`` checks the downloaded ``config.json`` against the
spec the stack was sized with (architecture, heads, KV heads, sizes, dtype, the maximum length as vLLM derives it,
and what vLLM refuses of the engine arguments: :func:`tritonft.engines.vllm.engine.checkpoint_problems`) and the
rendered ``config.pbtxt`` + ``1/model.json`` against NVIDIA's backend contract (:mod:`tritonft.engines.vllm.check`).
The tools image has no vLLM (its CPU engine is a 5.9 GB environment of its own): what the served model answers is
judged against the reference once Triton loaded it."""


def script_for(model: ModelSpec, *, reference: bool = False) -> str:
    """The Job's program for ``model``'s engine: FasterTransformer's and ONNX Runtime's download -> convert -> repo,
    or vLLM's download -> repo; with ``reference``, a FasterTransformer generator's reference Job's."""
    if reference:
        if not model.family.is_fastertransformer:
            raise ValueError(f"{model.name} is a {model.family} model: no judge's reference Job")
        return REFERENCE_SCRIPT
    return VLLM_SCRIPT if model.family.is_vllm else CONVERT_SCRIPT


@dataclass(frozen=True)
class ConversionPod:
    """Inputs of the conversion pod that are not the model itself."""

    image: Any
    """Tools image reference (a str or a Pulumi Output of one), pinned by digest."""
    claim_name: str
    spec_config_map: str
    cpu_node_selector: dict[str, str]
    gpu_node_selector: dict[str, str]
    hf_token_secret: str | None = None
    bleu_threshold: float = 15.0
    """BLEU the generation check requires of T5 (the probe's threshold)."""
    priority_class: str | None = None
    """The stack's batch PriorityClass (``components.common.priority``); None: the cluster's default priority."""
    reference_job: str = ""
    """The name of the model's reference Job (a FasterTransformer generator's), named in the conversion's log."""
    conversion_job: str = ""
    """The name of the model's conversion Job, named in the reference Job's log."""
    writable: tuple[str, ...] = ()
    """The store's directories (relative to its root) the Job mounts writable, the rest of the store read-only;
    empty: the whole store writable (a storage class that could leave a kubelet-made directory to root)."""


def writable_dirs(paths: ModelPaths) -> tuple[str, ...]:
    """The store's directories one model's Job writes in: the parents of its checkpoint and repository (each
    output is written beside its target as ``.partial-<pod>`` and renamed into place), e.g.
    ``checkpoints/<model>`` and ``repositories/<model>`` (``hf/<model>`` and ``compile-cache/<model>`` for a vLLM
    model), and a FasterTransformer generator's ``references/<model>`` (its reference Job writes the judge's
    reference there). Another model's files, its ``model.py`` included, are out of the Job's reach."""
    parents: tuple[str, ...] = (posixpath.dirname(paths.checkpoint_dir), posixpath.dirname(paths.repository_dir))
    if paths.compile_cache:  # compile-cache/<model>: the Job makes it for the Triton pods and prunes inside it
        parents += (paths.compile_cache,)
    if paths.judge_reference:  # references/<model>/<key>/judge-reference.json: its reference Job writes <model>
        parents += (posixpath.dirname(posixpath.dirname(paths.judge_reference)),)
    return tuple(p.removeprefix(f"{STORE_MOUNT}/") for p in parents)


def store_mounts(writable: tuple[str, ...]) -> list[dict[str, Any]]:
    """The store's mounts: all of it writable, or read-only with only ``writable`` writable (by ``subPath``)."""
    if not writable:
        return [{"name": "store", "mountPath": STORE_MOUNT}]
    return [
        {"name": "store", "mountPath": STORE_MOUNT, "readOnly": True},
        *({"name": "store", "mountPath": f"{STORE_MOUNT}/{d}", "subPath": d} for d in writable),
    ]


def script_env(
    model: ModelSpec,
    paths: ModelPaths,
    verify_generation: bool = False,
    bleu_threshold: float = 15.0,
    *,
    reference_job: str = "",
    conversion_job: str = "",
) -> list[dict[str, str]]:
    """The script's inputs as environment variables (plus writable HOME/cache/tmp for a read-only root).

    An encoder's conversion options come from its spec (``TASK``, ``POOLING``, ``NORMALIZE`` as the flag's name
    ``normalize``/``no-normalize``, ``MAX_SEQ_LENGTH``); its ``VERIFY_GENERATE`` check is the answer check
    (``tritonft verify OUT/onnx --generate``)."""
    encoder = model.encoder
    values = {
        "ENGINE": engine_for(model.family).name,
        "VERIFY_GENERATE": "1" if verify_generation else "0",
        "BLEU_THRESHOLD": str(bleu_threshold),
        "HF_REPO": model.hf_repo,
        "HF_REVISION": model.revision,
        "TP": str(model.tensor_parallel),
        "DTYPE": str(model.weight_dtype),
        "CHECKPOINT_DIR": paths.checkpoint_dir,
        "REPOSITORY_DIR": paths.repository_dir,
        "JUDGE_REFERENCE": paths.judge_reference,
        "REFERENCE_JOB": reference_job,
        "CONVERSION_JOB": conversion_job,
        "SPEC_PATH": f"{SPEC_MOUNT}/{SPEC_FILE}",
        "SCRATCH": SCRATCH_MOUNT,
        "HOME": SCRATCH_MOUNT,
        "HF_HOME": f"{SCRATCH_MOUNT}/.cache/huggingface",
        "XDG_CACHE_HOME": f"{SCRATCH_MOUNT}/.cache",
        "TMPDIR": "/tmp",
        "HF_HUB_DISABLE_TELEMETRY": "1",
    }
    if model.family.is_vllm:  # DTYPE is the converters' dtype: vLLM serves the spec's own `dtype` (bf16 for Llama)
        del values["DTYPE"]
    if paths.compile_cache:  # a vLLM model's (VLLM_SCRIPT makes it)
        values["COMPILE_CACHE_DIR"] = paths.compile_cache
    if encoder is not None:
        values |= {
            "TASK": str(encoder.task),
            "POOLING": str(encoder.pooling),
            "NORMALIZE": "normalize" if encoder.normalize else "no-normalize",
            "MAX_SEQ_LENGTH": str(encoder.max_seq_length),
        }
    return [{"name": k, "value": v} for k, v in values.items()]


BLAS_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
"""numpy's BLAS thread pools: unset, each sizes itself from the node's vCPUs, not the container's CPU limit."""


def blas_threads(cpu_limit: str) -> int:
    """The BLAS threads of a container limited to ``cpu_limit`` (``"4"``, ``"2500m"``): its whole CPUs, at least
    one, so the judge's reference (numpy at fp32) is not throttled by the CFS quota of a few-CPU limit."""
    cpus = int(cpu_limit[:-1]) / 1000 if cpu_limit.endswith("m") else float(cpu_limit)
    return max(1, int(cpus))


def conversion_pod_spec(
    model: ModelSpec, paths: ModelPaths, pod: ConversionPod, sizing: JobSizing, *, reference: bool = False
) -> dict[str, Any]:
    """The Job's pod template spec: CPU nodes only, no GPU toleration, sized from the model, hardened; with
    ``reference``, the reference Job's (:data:`REFERENCE_SCRIPT`, same store, scratch and token)."""
    mounts = [
        *store_mounts(pod.writable),
        {"name": "scratch", "mountPath": SCRATCH_MOUNT},
        {"name": "tmp", "mountPath": "/tmp"},
        {"name": "spec", "mountPath": SPEC_MOUNT, "readOnly": True},
    ]
    volumes: list[dict[str, Any]] = [
        {"name": "store", "persistentVolumeClaim": {"claimName": pod.claim_name}},
        {"name": "scratch", "emptyDir": {"sizeLimit": sizing.scratch_size}},
        {"name": "tmp", "emptyDir": {"sizeLimit": "1Gi"}},
        {"name": "spec", "configMap": {"name": pod.spec_config_map}},
    ]
    env = script_env(
        model,
        paths,
        sizing.verify_generation,
        pod.bleu_threshold,
        reference_job=pod.reference_job,
        conversion_job=pod.conversion_job,
    )
    if reference or (model.family.is_vllm and paths.judge_reference):
        # The judge's reference step (a reference Job, a vLLM Job's reference step): BLAS threads = the CPU limit.
        threads = str(blas_threads(str(sizing.cpu_limit)))
        env.extend({"name": var, "value": threads} for var in BLAS_THREAD_VARS)
    if pod.hf_token_secret:
        # A file, not an env var: huggingface_hub reads HF_TOKEN_PATH, and the token never shows in `describe`.
        mounts.append({"name": "hf-token", "mountPath": HF_TOKEN_MOUNT, "readOnly": True})
        volumes.append(
            {
                "name": "hf-token",
                "secret": {
                    "secretName": pod.hf_token_secret,
                    "defaultMode": 0o440,
                    "items": [{"key": HF_TOKEN_KEY, "path": HF_TOKEN_KEY}],
                },
            }
        )
        env.append({"name": "HF_TOKEN_PATH", "value": f"{HF_TOKEN_MOUNT}/{HF_TOKEN_KEY}"})
    container = {
        "name": "reference" if reference else "convert",
        "image": pod.image,
        "imagePullPolicy": "Always",
        "command": ["/bin/sh", "-c", script_for(model, reference=reference)],
        "env": env,
        "resources": {
            "requests": {
                "cpu": sizing.cpu_request,
                "memory": sizing.memory_request,
                "ephemeral-storage": sizing.ephemeral_request,
            },
            "limits": {
                "cpu": sizing.cpu_limit,
                "memory": sizing.memory_limit,
                "ephemeral-storage": sizing.ephemeral_limit,
            },
        },
        "securityContext": container_security_context(),
        "volumeMounts": mounts,
    }
    return {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        **({"priorityClassName": pod.priority_class} if pod.priority_class else {}),
        "securityContext": pod_security_context(),
        "nodeSelector": dict(pod.cpu_node_selector),
        "affinity": away_from_gpu_nodes(pod.gpu_node_selector),
        "containers": [container],
        "volumes": volumes,
    }


NON_PUBLIC_CIDRS = (
    "10.0.0.0/8",
    "172.16.0.0/12",
    "192.168.0.0/16",
    "100.64.0.0/10",
    "169.254.0.0/16",
)
"""What the Job's HTTPS never reaches: the private ranges (RFC 1918: the VPC, its pods and Services, the EKS API
server's private endpoint, every Triton's and the gateway's pods), shared address space (RFC 6598: some clusters' pod
networks) and link-local (RFC 3927: the node's instance-metadata endpoint, 169.254.169.254, among them). The
Hugging Face Hub and its CDNs are public addresses, which change: a NetworkPolicy cannot name a host."""


def conversion_network_policy_spec(selector_labels: dict[str, str]) -> dict[str, Any]:
    """No inbound traffic; outbound only DNS (the cluster's) and HTTPS to public addresses (the Hugging Face Hub and
    its CDN): nothing of the cluster or its network (:data:`NON_PUBLIC_CIDRS`), so a Job running a bad checkpoint's
    tokenizer or a compromised tool cannot call a Triton, the gateway, the API server's private endpoint or the
    node's credentials."""
    return {
        "podSelector": {"matchLabels": dict(selector_labels)},
        "policyTypes": ["Ingress", "Egress"],
        "ingress": [],
        "egress": [
            dns_egress(),
            {
                "to": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": list(NON_PUBLIC_CIDRS)}}],
                "ports": [{"port": 443, "protocol": "TCP"}],
            },
        ],
    }
