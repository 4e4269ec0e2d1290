"""Names, labels and model-store paths shared by the Kubernetes components (pure, no Pulumi).

The store is content-addressed: the FT checkpoint of a model lives under its *conversion key* (repo, revision,
file dtype, TP, family, converter version) and the rendered Triton repository under a *repository key* that adds
every serving knob the repository files depend on. A changed model gets new directories and a new Job; an
unchanged one maps onto what is already there, so nothing is redone.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

from tritonft.engines.vllm.engine import model_path as vllm_model_path
from tritonft.probe.judge_reference import REFERENCE_FILE, has_reference
from tritonft.spec import ModelSpec

STORE_MOUNT = "/models"
"""Where every pod mounts the model-store claim."""
MANAGED_BY = "triton-ft"
SKIP_AWAIT = "pulumi.com/skipAwait"
"""Annotation: the Kubernetes provider applies the object without waiting for it to become ready."""
SERVICE_ANNOTATIONS = {SKIP_AWAIT: "true"}
"""Every Service of the stack's own pods: applied without the provider's await, which waits (10 minutes, then fails
``up``) for endpoints that target ready pods. A model's pods are ready only after its Job and its start-up budget
(often longer), a candidate's after its own start, the gateway's after every model: what waits for them is the
rollout watch, the judge and the gateway Deployment's own await (``tritonft.synth.budget`` counts each)."""
DNS_LABEL_MAX = 63

_NOT_DNS = re.compile(r"[^a-z0-9-]+")


def dns_label(text: str, max_len: int = DNS_LABEL_MAX) -> str:
    """``text`` as an RFC 1123 label: lower case, ``[a-z0-9-]``, starts and ends alphanumeric, at most ``max_len``.

    Raises ``ValueError`` when nothing usable is left (an empty or all-symbol name).
    """
    label = _NOT_DNS.sub("-", text.lower()).strip("-")
    label = re.sub(r"-{2,}", "-", label)[:max_len].rstrip("-")
    if not label:
        raise ValueError(f"{text!r} has no letters or digits to build a Kubernetes name from")
    return label


def repository_key(model: ModelSpec, converter_version: str) -> str:
    """Content key of the rendered repository: the conversion key plus the whole spec (batching, lengths, ...) but
    what only the gateway reads (:meth:`tritonft.spec.ModelSpec.repository_json`)."""
    material = f"{model.conversion_key(converter_version)}\n{model.repository_json()}\n{converter_version}"
    return hashlib.sha256(material.encode()).hexdigest()[:10]


COMPILE_CACHE = "compile-cache"
"""The store's directory of the vLLM models' compile caches: ``<model>/<key>`` inside
(:mod:`tritonft.engines.vllm.compile_cache`)."""


def compile_cache_root(model_dir: str, key: str) -> str:
    """vLLM's ``VLLM_CACHE_ROOT`` in a pod compiling under ``key`` (``tritonft.engines.vllm.compile_cache.cache_key``:
    the server image's identity, the revision and the engine arguments that shape the graphs): a directory of the
    model's compile cache (``ModelPaths.compile_cache``, the one its pods mount writable), which vLLM makes."""
    if not key or "/" in key or key.startswith("."):
        raise ValueError(f"{key!r} is not a compile cache key (one path segment, not hidden)")
    return f"{model_dir}/{key}"


@dataclass(frozen=True)
class ModelPaths:
    """Where one model's artifacts live in the store (all absolute, under :data:`STORE_MOUNT`)."""

    checkpoint_dir: str
    """``convert --output``: FT writes ``<TP>-gpu/`` inside."""
    repository_dir: str
    """``repo --out``: a complete Triton model repository for this model (ensemble + FT + tokenizer models)."""
    judge_reference: str = ""
    """The judge's reference of the revision (a generator's: :func:`tritonft.probe.judge_reference.has_reference`;
    empty otherwise), written by a FasterTransformer generator's reference Job or a vLLM model's Job:
    ``/models/references/<model>/<reference key>/judge-reference.json``."""
    compile_cache: str = ""
    """A vLLM model's compile cache directory (empty otherwise): ``/models/compile-cache/<model>``, made by its Job
    (which prunes the directories inside that no pod has used for a day) and mounted writable by ``subPath`` in its
    Triton pods, whose ``VLLM_CACHE_ROOT`` is their key's directory inside it (:func:`compile_cache_root`)."""

    @property
    def checkpoint_subpath(self) -> str:
        """:attr:`checkpoint_dir` relative to the store's root: the ``subPath`` a pod mounts it by (a vLLM model's
        ``hf/<model>/<revision>``)."""
        return self.checkpoint_dir.removeprefix(f"{STORE_MOUNT}/")

    @property
    def compile_cache_subpath(self) -> str:
        """:attr:`compile_cache` relative to the store's root (the Triton pods' ``subPath``)."""
        return self.compile_cache.removeprefix(f"{STORE_MOUNT}/")

    @property
    def ft_checkpoint(self) -> str:
        """The directory ``model_checkpoint_path`` points at."""
        return self.checkpoint_dir


def model_paths(model: ModelSpec, converter_version: str) -> ModelPaths:
    """Store layout: ``/models/checkpoints/<model>/<conversion key>`` and
    ``/models/repositories/<model>/<repository key>``; a vLLM model's checkpoint is its Hugging Face files as
    downloaded, at ``/models/hf/<model>/<revision>`` (the path its ``model.json`` names: the engine's
    ``model_path``), and its compile cache at ``/models/compile-cache/<model>``."""
    ckey = model.conversion_key(converter_version)
    rkey = repository_key(model, converter_version)
    base = dns_label(model.name)
    reference = ""
    if has_reference(model):
        reference = f"{STORE_MOUNT}/references/{base}/{reference_key(model, converter_version)}/{REFERENCE_FILE}"
    if model.family.is_vllm:
        # No conversion: the downloaded Hugging Face files are what vLLM loads, where its model.json names them.
        return ModelPaths(
            checkpoint_dir=vllm_model_path(model, STORE_MOUNT),
            repository_dir=f"{STORE_MOUNT}/repositories/{base}/{rkey}",
            judge_reference=reference,
            compile_cache=f"{STORE_MOUNT}/{COMPILE_CACHE}/{base}",
        )
    return ModelPaths(
        checkpoint_dir=f"{STORE_MOUNT}/checkpoints/{base}/{ckey}",
        repository_dir=f"{STORE_MOUNT}/repositories/{base}/{rkey}",
        judge_reference=reference,
    )


def reference_key(model: ModelSpec, converter_version: str) -> str:
    """Content key of the judge's reference: the conversion key (the original weights), the served precision whose
    tolerance it records (FT: the files' dtype and the compute type; vLLM: its dtypes), plus the lengths it depends
    on (the prompts' tokenization, the steps it follows), so a serving knob that leaves them alone keeps the
    reference and its finished Job."""
    material = f"{model.conversion_key(converter_version)}\n{model.max_input_len}\n{model.max_output_len}"
    if model.vllm is None:  # FT computes in data_type: with the files' dtype it sets the tolerance
        material += f"\n{model.data_type}"
    else:  # its conversion key names only the files; the served dtype sets the tolerance
        material += f"\n{converter_version}\n{model.vllm.dtype}\n{model.vllm.checkpoint_dtype}"
    return hashlib.sha256(material.encode()).hexdigest()[:10]


def conversion_job_name(model: ModelSpec, converter_version: str) -> str:
    """``<model>-<conversion key>-<repository key[:6]>``, at most 63 characters.

    Changes exactly when the store content would change (revision, dtype, TP, converter, serving knobs), and not
    with replicas, autoscaling or server resources.
    """
    suffix = f"-{model.conversion_key(converter_version)}-{repository_key(model, converter_version)[:6]}"
    return dns_label(model.name, DNS_LABEL_MAX - len(suffix)) + suffix


def reference_job_name(model: ModelSpec, converter_version: str) -> str:
    """``<model>-ref-<reference key>``, at most 63 characters: the judge's reference Job, changed exactly when its
    reference would change (:func:`reference_key`)."""
    suffix = f"-ref-{reference_key(model, converter_version)}"
    return dns_label(model.name, DNS_LABEL_MAX - len(suffix)) + suffix


def labels(component: str, instance: str, model: str | None = None) -> dict[str, str]:
    """Recommended ``app.kubernetes.io/*`` labels (plus the model name when there is one)."""
    out = {
        "app.kubernetes.io/name": "triton-ft",
        "app.kubernetes.io/component": component,
        "app.kubernetes.io/instance": instance,
        "app.kubernetes.io/managed-by": MANAGED_BY,
    }
    if model is not None:
        out["triton-ft/model"] = dns_label(model)
    return out


def selector(component: str, instance: str) -> dict[str, str]:
    """The immutable subset of :func:`labels` used in selectors."""
    return {"app.kubernetes.io/component": component, "app.kubernetes.io/instance": instance}


def object_meta(name: str, namespace: Any, labels: dict[str, str], annotations: dict[str, str] | None = None) -> Any:
    """``metadata`` with an explicit name and namespace (``namespace`` may be a str or a Pulumi Output of one).

    Names are always explicit: deterministic across runs, readable in ``kubectl``, and what the mock engine sees.
    Typed ``Any`` because the dict is camelCase, as the API takes it, where the SDK types its ``*ArgsDict``.
    """
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": dict(labels)}
    if annotations:
        meta["annotations"] = dict(annotations)
    return meta


def as_input(value: dict[str, Any]) -> Any:
    """A plain manifest dict (camelCase, as the API takes it) passed where the SDK types its ``*ArgsDict``."""
    return value
