"""The typed facts every settings rule checks: a stack and its model entries after per-key validation.

The rule table (:mod:`components.settings.rules`) and the rule modules it gathers (``ft_rules``,
``built_cluster_rules``) all read these; keeping them here lets those modules import them without a circle.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from components.settings.catalog import KNOWN_VLLM, EncoderDefaults, VllmCatalogEntry
from components.settings.gpus import GpuNodeType
from components.settings.schema import VLLM_FIELDS
from tritonft.spec import Architecture, Device, EncoderSpec, EncoderTask, Family, Pooling, VllmSpec, WeightDType

ACME_ISSUER = "letsencrypt-prod"
"""The ClusterIssuer a stack with ``acmeEmail`` makes, in every environment (Let's Encrypt's production directory)."""

Problem = tuple[str, str]
"""(key path as written in the stack file, message)."""


@dataclass(frozen=True)
class ModelFacts:
    """One entry of ``models`` after per-key validation: typed values (defaults applied, None where invalid)."""

    index: int
    values: Mapping[str, Any]
    present: frozenset[str]
    catalog: tuple[Family, Architecture] | None
    """The catalog's (family, architecture) of ``hfRepo``, when it is a known repository."""
    architecture: Architecture | None
    """The stated ``architecture`` block when valid, else the catalog's; None when neither."""
    encoder_defaults: EncoderDefaults | None = None
    """The catalog's embedding defaults (pooling, normalize, maxSeqLength) of a known encoder repository."""

    def get(self, key: str, fallback: Any = None) -> Any:
        value = self.values.get(key)
        return fallback if value is None else value

    @property
    def family(self) -> Family | None:
        stated = self.values.get("family")
        if stated is not None:
            return Family(stated)
        return self.catalog[0] if self.catalog else None

    @property
    def is_encoder(self) -> bool:
        family = self.family
        return family is not None and family.is_encoder

    @property
    def is_vllm(self) -> bool:
        family = self.family
        return family is not None and family.is_vllm

    @property
    def vllm_catalog(self) -> VllmCatalogEntry | None:
        """The catalog's entry of a known Llama-family repository (its checkpoint facts, whether it is gated)."""
        repo = self.values.get("hfRepo")
        return KNOWN_VLLM.get(repo) if isinstance(repo, str) else None

    def vllm_spec(self) -> VllmSpec | None:
        """The entry's ``vllm`` block over the catalog's checkpoint facts (or vLLM's defaults); None for the other
        families. The block's keys are checked one by one before (``schema.VLLM_FIELDS``)."""
        if not self.is_vllm:
            return None
        catalog = self.vllm_catalog
        base = catalog.facts if catalog is not None and "architecture" not in self.present else VllmSpec()
        stated = {VLLM_FIELDS[k][0]: v for k, v in self.get("vllm", {}).items() if k in VLLM_FIELDS}
        for number in ("gpu_memory_utilization", "time_per_output_token_s"):  # 1 and 1.0 are the same JSON number
            if number in stated:
                stated[number] = float(stated[number])
        return dataclasses.replace(base, **stated)

    @property
    def device(self) -> Device:
        return Device(self.get("device", "gpu"))

    @property
    def weight_dtype(self) -> WeightDType:
        """``weightDtype``, else fp16 on a GPU and fp32 on a CPU."""
        return WeightDType(self.get("weightDtype", "fp32" if self.device is Device.CPU else "fp16"))

    @property
    def task(self) -> EncoderTask:
        return EncoderTask(self.get("task", "embed"))

    def max_seq_length(self) -> int | None:
        """``maxSeqLength``, else the catalog's, else min(512, maxPositions); None without a position table."""
        stated = self.values.get("maxSeqLength")
        if stated is not None:
            return int(stated)
        if self.encoder_defaults is not None and "architecture" not in self.present:
            return self.encoder_defaults.max_seq_length
        arch = self.architecture
        return min(512, arch.max_positions) if arch is not None and arch.max_positions else None

    def encoder_spec(self) -> EncoderSpec | None:
        """The entry's encoder spec with every default applied (None for a generator or without a position table)."""
        seq = self.max_seq_length()
        if not self.is_encoder or seq is None:
            return None
        defaults = self.encoder_defaults
        task = self.task
        if task is EncoderTask.CLASSIFY:
            return EncoderSpec(task=task, labels=tuple(self.get("labels", [])), max_seq_length=seq)
        pooling = Pooling(self.get("pooling", defaults.pooling if defaults else "mean"))
        normalize = bool(self.get("normalize", defaults.normalize if defaults else True))
        return EncoderSpec(task=task, pooling=pooling, normalize=normalize, max_seq_length=seq)


@dataclass(frozen=True)
class StackFacts:
    """The whole stack after per-key validation."""

    stack: str
    values: Mapping[str, Any]
    present: frozenset[str]
    secret_keys: frozenset[str]
    platform: str | None
    """``kubernetes`` or ``aws``; None when missing or invalid (platform-bound rules then do not run)."""
    node: GpuNodeType | None
    """The GPU node shape; None when the keys that name it are missing or invalid."""
    models: tuple[ModelFacts, ...]

    def get(self, key: str, fallback: Any = None) -> Any:
        value = self.values.get(key)
        return fallback if value is None else value

    @property
    def addons(self) -> frozenset[str]:
        """Add-ons this stack installs or the existing cluster already runs."""
        return frozenset(self.get("addons", [])) | frozenset(self.get("existingAddons", []))

    @property
    def environment(self) -> str:
        return str(self.get("environment", "dev"))

    @property
    def tls(self) -> bool:
        tls = self.values.get("ingressTls")
        return self.environment != "local" if tls is None else bool(tls)

    @property
    def edge(self) -> str:
        """``edge``, else ``gateway`` on aws and ``ingress`` on an existing cluster."""
        return str(self.get("edge") or ("gateway" if self.platform == "aws" else "ingress"))

    @property
    def auth(self) -> str:
        default = "none" if self.environment == "local" else "apiKey" if self.edge == "gateway" else "basic"
        return str(self.get("ingressAuth") or default)

    @property
    def issuer(self) -> str | None:
        """``tlsIssuer``, else with ``acmeEmail`` the issuer the stack makes: ``letsencrypt-prod`` in every
        environment (Let's Encrypt's production directory: the probes verify TLS, staging's roots are trusted by no
        client)."""
        stated = self.get("tlsIssuer")
        if stated or not self.get("acmeEmail"):
            return str(stated) if stated else None
        return ACME_ISSUER

    @property
    def gemm_tuning(self) -> bool:
        stated = self.values.get("gemmTuning")
        return self.environment != "local" if stated is None else bool(stated)

    @property
    def scale_to_zero(self) -> bool:
        return bool(self.get("scaleToZero", False))

    @property
    def monitoring(self) -> bool:
        stated = self.values.get("monitoring")
        return "kube-prometheus-stack" in self.addons if stated is None else bool(stated)

    @property
    def ingress_host(self) -> str:
        return str(self.get("ingressHost") or f"{self.stack}.triton.local")
