"""The GEMM tuning init container of the Triton pod (seed 000's step 3), as pure functions (no Pulumi).

The init container runs :data:`tritonft.engines.fastertransformer.gemm.TUNE_SCRIPT` in the server image (which
ships FT's ``t5_gemm`` and ``gpt_gemm``) with the same GPUs, CPU and memory as Triton, on the node Triton will run
on: Kubernetes starts the ``triton`` container only after it has exited, and an init container's requests do not
add to the pod's (the pod asks for the larger of the init and app containers), so the tuning costs no extra GPU.
It writes ``gemm_config.in`` into a small emptyDir that is Triton's working directory (FT opens the file by its
relative name), and keeps it on the model store under a per-key directory so the next replica or restart copies it
instead of tuning. Its time is bounded (``gemmTuningTimeoutSeconds``) and counted in the Deployment's progress
deadline and ``pulumi up``'s rollout wait; a failure or a timeout falls back to FT's defaults and says so in the
log, in ``gemm_tuning.json`` beside the config and in the init container's termination message (what
``kubectl describe pod`` shows).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from components.common.layout import STORE_MOUNT
from components.common.podsec import container_security_context
from tritonft.engines.fastertransformer.gemm import (
    DEFAULT_TIMEOUT_SECONDS,
    INIT_CONTAINER,
    PROGRAMS,
    TUNE_SCRIPT,
    cache_dir,
    cache_key,
    script_env,
)
from tritonft.engines.fastertransformer.versions import FT_COMMIT, TRITON_VERSION
from tritonft.spec import ModelSpec

WORKDIR = "/var/run/triton-ft"
"""Triton's working directory in the pod: holds ``gemm_config.in`` (an emptyDir shared with the init container)."""
WORKDIR_VOLUME = "ft-workdir"
STORE_RW_VOLUME = "store-cache"
"""The model-store claim mounted read-write, in the init container only (Triton mounts it read-only), and there only
its model's own GEMM cache directory (:meth:`GemmTuning.cache_directory`, by ``subPath``): the weights, the
repositories and the other models' tuned configs (the rest of :data:`CACHE_SUBPATH`) stay read-only to the tuning."""
CACHE_SUBPATH = "gemm"
"""The store's GEMM cache tree (``tritonft.engines.fastertransformer.gemm.cache_dir``), relative to the claim."""
STORE_VOLUME = "store"
"""The Triton pod's read-only mount of the claim (``components.serving.server_spec``)."""
SCRATCH = "/tmp/gemm-tuning"
"""Where the tuners run (they write into their working directory); on the pod's ``tmp`` emptyDir."""


@dataclass(frozen=True)
class GemmTuning:
    """The stack's ``gemmTuning`` knobs and the image build the cache key depends on."""

    enabled: bool = True
    timeout_seconds: int = DEFAULT_TIMEOUT_SECONDS
    ft_commit: str = FT_COMMIT
    """FasterTransformer commit of the server image (its tuners' code)."""
    triton_version: str = TRITON_VERSION
    """Triton release of the server image (its CUDA and cuBLAS)."""

    def applies(self, model: ModelSpec) -> bool:
        """Whether ``model``'s pods run the tuning: on, and a FasterTransformer family with a tuner (never an
        encoder, on GPU or CPU)."""
        return self.enabled and model.family in PROGRAMS

    def budget_seconds(self) -> int:
        """Seconds the tuning may add to a pod's start: the script's own bound, plus a minute to start the
        container and copy the file (0 when off)."""
        return self.timeout_seconds + 60 if self.enabled else 0

    def cache_directory(self, model: ModelSpec) -> str:
        """The model's cache directory on the store (the script adds ``/<GPU product>/gemm_config.in``)."""
        key = cache_key(model, ft_commit=self.ft_commit, triton_version=self.triton_version)
        return cache_dir(STORE_MOUNT, model, key)


def gemm_tuning_container(
    model: ModelSpec, image: Any, triton: dict[str, Any], tuning: GemmTuning, claim_volume: str = STORE_RW_VOLUME
) -> dict[str, Any]:
    """The init container: the server image, Triton's resources (GPUs included), the tuning script.

    ``triton`` is the Triton container as :func:`components.serving.server_spec.server_pod_spec` renders it; its
    resources are copied so the tuning sees exactly the GPUs (count and kind) FT will use.
    """
    cache_root = f"{STORE_MOUNT}/{CACHE_SUBPATH}"
    cache_directory = tuning.cache_directory(model)
    if not cache_directory.startswith(f"{cache_root}/"):
        raise ValueError(f"GEMM cache directory {cache_directory} is outside {cache_root}, the GEMM cache tree")
    env = script_env(
        model,
        cache_directory=cache_directory,
        workdir=WORKDIR,
        scratch=SCRATCH,
        timeout_seconds=tuning.timeout_seconds,
    )
    return {
        "name": INIT_CONTAINER,
        "image": image,
        "imagePullPolicy": triton.get("imagePullPolicy", "Always"),
        "command": ["/bin/sh", "-c", TUNE_SCRIPT],
        "env": [{"name": "HOME", "value": "/tmp"}, *env],
        "resources": {kind: dict(amounts) for kind, amounts in triton["resources"].items()},
        "securityContext": container_security_context(),
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "volumeMounts": [
            {"name": STORE_VOLUME, "mountPath": STORE_MOUNT, "readOnly": True},
            # Only this model's key directory is writable (the kubelet makes it when missing, as it made `gemm`);
            # the script writes `<GPU product>/gemm_config.in` inside it and nothing beside it.
            {
                "name": claim_volume,
                "mountPath": cache_directory,
                "subPath": cache_directory.removeprefix(f"{STORE_MOUNT}/"),
            },
            {"name": WORKDIR_VOLUME, "mountPath": WORKDIR},
            {"name": "tmp", "mountPath": "/tmp"},
        ],
    }


def with_gemm_tuning(
    pod_spec: dict[str, Any], model: ModelSpec, image: Any, claim_name: str, tuning: GemmTuning
) -> dict[str, Any]:
    """``pod_spec`` with the tuning init container, Triton started in :data:`WORKDIR`, and their volumes.

    Unchanged when tuning is off: Triton then starts in the image's directory, where FT finds no ``gemm_config.in``
    and uses cuBLAS's default algorithms (FT's own behaviour without the step).
    """
    if not tuning.applies(model):  # only FT's families have a tuner
        return pod_spec
    # New dicts and lists where anything changes (no deepcopy: the image may be a Pulumi Output, which cannot be
    # copied outside serialization); the caller's spec is left as it was.
    (triton,) = [c for c in pod_spec["containers"] if c["name"] == "triton"]
    started_in_workdir = {
        **triton,
        "workingDir": WORKDIR,
        "volumeMounts": [*triton["volumeMounts"], {"name": WORKDIR_VOLUME, "mountPath": WORKDIR}],
    }
    return {
        **pod_spec,
        "initContainers": [*pod_spec.get("initContainers", []), gemm_tuning_container(model, image, triton, tuning)],
        "containers": [started_in_workdir if c is triton else c for c in pod_spec["containers"]],
        "volumes": [
            *pod_spec["volumes"],
            {"name": WORKDIR_VOLUME, "emptyDir": {"sizeLimit": "16Mi"}},
            {"name": STORE_RW_VOLUME, "persistentVolumeClaim": {"claimName": claim_name}},
        ],
    }


__all__ = [
    "CACHE_SUBPATH",
    "INIT_CONTAINER",
    "SCRATCH",
    "STORE_RW_VOLUME",
    "TUNE_SCRIPT",
    "WORKDIR",
    "WORKDIR_VOLUME",
    "GemmTuning",
    "gemm_tuning_container",
    "with_gemm_tuning",
]
