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
from components.common.placement import away_from_gpu_nodes
from components.common.podsec import container_security_context, pod_security_context
from components.common.sizing import JobSizing
from tritonft.engines import engine_for
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

CONVERT_SCRIPT = """\
set -eu
publish() { touch "$1/MARKER" && rm -rf "$2" && mv "$1" "$2"; }
if [ -f "$REPOSITORY_DIR/MARKER" ]; then
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
partial="$REPOSITORY_DIR.partial-$HOSTNAME"
rm -rf "$partial" && mkdir -p "$(dirname "$REPOSITORY_DIR")"
echo "triton-ft: [3/3] render repository $REPOSITORY_DIR"
if [ "$ENGINE" = "onnxruntime" ]; then
  tritonft repo --spec "$SPEC_PATH" --checkpoint "$CHECKPOINT_DIR" --out "$partial" \\
    --tokenizer "$CHECKPOINT_DIR/tokenizer" --require-checkpoint
else
  tritonft repo --spec "$SPEC_PATH" --checkpoint "$CHECKPOINT_DIR" --out "$partial" \\
    --tokenizer "$CHECKPOINT_DIR/tokenizer" --model-root "$REPOSITORY_DIR" --checkpoint-path "$CHECKPOINT_DIR/$TP-gpu"
fi
publish "$partial" "$REPOSITORY_DIR"
echo "triton-ft: done"
""".replace("MARKER", COMPLETE_MARKER).replace("TOKENIZER_FILES", " ".join(TOKENIZER_FILES))
"""The Job's program: download -> convert (-> generation check) -> repo, each skipped when its output is already
complete. The generation check runs before the checkpoint is published, so a conversion that generates garbage
never reaches the store.

``ENGINE`` picks the model's engine steps. FasterTransformer (``fastertransformer``): ``convert --tp``, the
``<TP>-gpu`` weights stay in the checkpoint directory and the repository points at them. ONNX Runtime
(``onnxruntime``, the encoders): ``convert`` with the spec's task, pooling, normalisation and sequence limit given
explicitly (so the conversion's manifest is the spec's, whatever sentence-transformers files the download has or
lacks), no ``--tp``, and as its check ``verify OUT/onnx --generate`` (ONNX Runtime answers the probe's texts:
width, unit norm, similarity order, a classifier's labels); the repository holds its own copy of ``model.onnx`` and
the tokenizer, which ``repo --require-checkpoint`` checks are there."""


VLLM_SCRIPT = """\
set -eu
publish() { touch "$1/MARKER" && rm -rf "$2" && mv "$1" "$2"; }
if [ -f "$REPOSITORY_DIR/MARKER" ]; then
  echo "triton-ft: $REPOSITORY_DIR is complete; nothing to do"
  exit 0
fi
if [ -f "$CHECKPOINT_DIR/MARKER" ]; then
  echo "triton-ft: checkpoint $CHECKPOINT_DIR is complete; skipping the download"
else
  partial="$CHECKPOINT_DIR.partial-$HOSTNAME"
  rm -rf "$partial" && mkdir -p "$(dirname "$CHECKPOINT_DIR")"
  echo "triton-ft: [1/2] download $HF_REPO@$HF_REVISION (vLLM serves the Hugging Face files as they are: no conversion)"
  tritonft download --repo "$HF_REPO" --revision "$HF_REVISION" --dest "$partial"
  publish "$partial" "$CHECKPOINT_DIR"
  rm -rf "$HF_HOME"
fi
partial="$REPOSITORY_DIR.partial-$HOSTNAME"
rm -rf "$partial" && mkdir -p "$(dirname "$REPOSITORY_DIR")"
echo "triton-ft: [2/2] check config.json against the spec, render repository $REPOSITORY_DIR (backend vllm)"
tritonft repo --spec "$SPEC_PATH" --checkpoint "$CHECKPOINT_DIR" --out "$partial" --checkpoint-path "$CHECKPOINT_DIR"
publish "$partial" "$REPOSITORY_DIR"
echo "triton-ft: done"
""".replace("MARKER", COMPLETE_MARKER)
"""A vLLM model's Job (``ENGINE=vllm``): download -> repo, each skipped when its output is already complete.

No conversion: ``tritonft download`` (pinned revision, every file hashed and each LFS weight compared with the sha256
the Hub published, the token of a gated repo read from the mounted Secret through ``HF_TOKEN_PATH``) writes the
Hugging Face files into a partial directory on the store that is renamed into place, ``/models/hf/<model>/<revision>``
(what ``model.json`` names); the Hub's cache on the scratch volume is then dropped. Before the repository is
published, ``tritonft repo --checkpoint`` checks the downloaded ``config.json`` against the spec the stack was sized
with (architecture, heads, KV heads, sizes, dtype, the maximum length as vLLM derives it, and what vLLM refuses of
the engine arguments: :func:`tritonft.engines.vllm.engine.checkpoint_problems`) and the rendered ``config.pbtxt`` +
``1/model.json`` against NVIDIA's backend contract (:mod:`tritonft.engines.vllm.check`). What the model answers is
not checked here: the tools image has no vLLM (its CPU engine is a 5.9 GB environment of its own); the integration
probe judges the served model after the rollout."""


def script_for(model: ModelSpec) -> str:
    """The Job's program for ``model``'s engine: FasterTransformer's and ONNX Runtime's download -> convert -> repo,
    or vLLM's download -> repo."""
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
    writable: tuple[str, ...] = ()
    """The store's directories (relative to its root) the Job mounts writable, the rest of the store read-only;
    empty: the whole store writable (a storage class that could leave a kubelet-made directory to root)."""


def writable_dirs(paths: ModelPaths) -> tuple[str, ...]:
    """The store's directories one model's Job writes in: the parents of its checkpoint and repository (each
    output is written beside its target as ``.partial-<pod>`` and renamed into place), e.g.
    ``checkpoints/<model>`` and ``repositories/<model>`` (``hf/<model>`` for a vLLM model). Another model's
    files, its ``model.py`` included, are out of the Job's reach."""
    parents = (posixpath.dirname(paths.checkpoint_dir), posixpath.dirname(paths.repository_dir))
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
    model: ModelSpec, paths: ModelPaths, verify_generation: bool = False, bleu_threshold: float = 15.0
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
        "SPEC_PATH": f"{SPEC_MOUNT}/{SPEC_FILE}",
        "SCRATCH": SCRATCH_MOUNT,
        "HOME": SCRATCH_MOUNT,
        "HF_HOME": f"{SCRATCH_MOUNT}/.cache/huggingface",
        "XDG_CACHE_HOME": f"{SCRATCH_MOUNT}/.cache",
        "TMPDIR": "/tmp",
        "HF_HUB_DISABLE_TELEMETRY": "1",
    }
    if encoder is not None:
        values |= {
            "TASK": str(encoder.task),
            "POOLING": str(encoder.pooling),
            "NORMALIZE": "normalize" if encoder.normalize else "no-normalize",
            "MAX_SEQ_LENGTH": str(encoder.max_seq_length),
        }
    return [{"name": k, "value": v} for k, v in values.items()]


def conversion_pod_spec(model: ModelSpec, paths: ModelPaths, pod: ConversionPod, sizing: JobSizing) -> dict[str, Any]:
    """The Job's pod template spec: CPU nodes only, no GPU toleration, sized from the model, hardened."""
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
    env = script_env(model, paths, sizing.verify_generation, pod.bleu_threshold)
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
        "name": "convert",
        "image": pod.image,
        "imagePullPolicy": "Always",
        "command": ["/bin/sh", "-c", script_for(model)],
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


CLOUD_METADATA_CIDR = "169.254.169.254/32"
"""Instance metadata endpoint (node credentials): never reachable from the Job."""


def conversion_network_policy_spec(selector_labels: dict[str, str]) -> dict[str, Any]:
    """No inbound traffic; outbound only DNS and HTTPS (the Hugging Face Hub and its CDN), never the node's
    instance-metadata endpoint."""
    return {
        "podSelector": {"matchLabels": dict(selector_labels)},
        "policyTypes": ["Ingress", "Egress"],
        "ingress": [],
        "egress": [
            {
                "to": [
                    {
                        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
                        "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
                    }
                ],
                "ports": [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}],
            },
            {
                "to": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": [CLOUD_METADATA_CIDR]}}],
                "ports": [{"port": 443, "protocol": "TCP"}],
            },
        ],
    }
