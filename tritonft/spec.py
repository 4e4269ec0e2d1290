"""The shared vocabulary of both halves: what a model *is* and how it is served.

Components serialise a :class:`ModelSpec` into a Job's arguments (``--spec-json``); the Job's ``tritonft`` CLI
parses the same type back with :meth:`ModelSpec.from_json`. One definition, no drift.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass, field, fields, replace
from enum import Enum
from typing import Any

if sys.version_info >= (3, 11):  # noqa: UP036  (see the else branch)
    from enum import StrEnum
else:  # the server image's Python 3.10 imports this module with the reference engine (tritonft.repo.engine)

    class StrEnum(str, Enum):  # noqa: UP042
        """``enum.StrEnum`` of Python 3.11: members are their values, also as ``str()`` and in f-strings."""

        def __str__(self) -> str:
            return str(self.value)

        def __format__(self, format_spec: str) -> str:
            return str(self.value).__format__(format_spec)


class Family(StrEnum):
    """Model families FasterTransformer serves through Triton."""

    T5 = "t5"
    GPT2 = "gpt2"
    GPTJ = "gptj"

    @property
    def ft_model_type(self) -> str:
        """The backend's ``model_type`` parameter for this family."""
        return {Family.T5: "T5", Family.GPT2: "GPT", Family.GPTJ: "GPT-J"}[self]

    @property
    def ini_section(self) -> str:
        """The section of FT's ``config.ini`` that holds the model's hyper-parameters."""
        return {Family.T5: "encoder", Family.GPT2: "gpt", Family.GPTJ: "gptj"}[self]


class WeightDType(StrEnum):
    """Element type of the converted ``.bin`` files (``weight_data_type`` in ``config.ini``)."""

    FP32 = "fp32"
    FP16 = "fp16"

    @property
    def nbytes(self) -> int:
        return 4 if self is WeightDType.FP32 else 2


class DataType(StrEnum):
    """Runtime compute type on the GPU (``data_type`` in ``config.pbtxt``); independent of the file type."""

    FP32 = "fp32"
    FP16 = "fp16"
    BF16 = "bf16"

    @property
    def nbytes(self) -> int:
        return 4 if self is DataType.FP32 else 2


@dataclass(frozen=True)
class Architecture:
    """The hyper-parameters that size a model: enough to validate TP and estimate memory before any download.

    ``d_kv`` is the per-head size (T5's ``d_kv``; for GPT models ``d_model // num_heads``). ``num_decoder_layers``
    is only meaningful for T5 (encoder-decoder); GPT models use ``num_layers``.
    """

    d_model: int
    num_heads: int
    num_layers: int
    d_ff: int
    vocab_size: int
    d_kv: int = 0
    num_decoder_layers: int = 0
    max_positions: int = 0
    gated_ffn: bool = False
    tied_embeddings: bool = True

    @property
    def head_size(self) -> int:
        return self.d_kv or self.d_model // self.num_heads

    @property
    def inner_size(self) -> int:
        """Attention width ``num_heads * head_size`` (T5 allows it to differ from ``d_model``)."""
        return self.num_heads * self.head_size


def parameter_count(family: Family, arch: Architecture) -> int:
    """Exact parameter count of the FT-served model (the tensors the converter writes, ties counted once).

    T5: shared embedding (+ untied LM head), encoder blocks (q,k,v,o + FFN + 2 norms), decoder blocks (self q,k,v,o +
    cross q,k,v,o + FFN + 3 norms), relative bias tables in block 0, two final norms.
    GPT-2: wte + wpe + per layer (fused qkv w+b, proj w+b, fc w+b, proj w+b, 2 LN w+b) + final LN.
    GPT-J: wte + per layer (q,k,v,o without bias, fc_in w+b, fc_out w+b, one LN w+b) + final LN + LM head w+b.
    """
    d, inner, f, v = arch.d_model, arch.inner_size, arch.d_ff, arch.vocab_size
    if family is Family.T5:
        ffn = (3 if arch.gated_ffn else 2) * d * f
        buckets = 32
        enc = arch.num_layers * (4 * d * inner + ffn + 2 * d)
        dec_layers = arch.num_decoder_layers or arch.num_layers
        dec = dec_layers * (8 * d * inner + ffn + 3 * d)
        emb = v * d * (1 if arch.tied_embeddings else 2)
        return emb + enc + dec + 2 * buckets * arch.num_heads + 2 * d
    if family is Family.GPT2:
        per_layer = (3 * d * d + 3 * d) + (d * d + d) + (d * f + f) + (f * d + d) + 4 * d
        return v * d + arch.max_positions * d + arch.num_layers * per_layer + 2 * d
    per_layer = 4 * d * d + (d * f + f) + (f * d + d) + 2 * d
    return v * d + arch.num_layers * per_layer + 2 * d + v * d + v


@dataclass(frozen=True)
class Batching:
    """Triton dynamic batching for the FT model."""

    max_batch_size: int = 8
    max_queue_delay_us: int = 1000
    preferred_batch_sizes: tuple[int, ...] = ()


@dataclass(frozen=True)
class ModelSpec:
    """One served model, as both the infrastructure and the in-cluster Jobs understand it."""

    name: str
    """Triton/Kubernetes name of the model (the ensemble is served under this name)."""
    family: Family
    hf_repo: str
    """Hugging Face repository id, e.g. ``t5-small`` or ``EleutherAI/gpt-j-6b``."""
    revision: str
    """Pinned revision (commit sha or tag): part of the conversion key."""
    architecture: Architecture
    weight_dtype: WeightDType = WeightDType.FP32
    data_type: DataType = DataType.FP16
    tensor_parallel: int = 1
    pipeline_parallel: int = 1
    batching: Batching = field(default_factory=Batching)
    max_input_len: int = 512
    max_output_len: int = 128
    decoupled: bool = False
    """Streaming mode: one response per generated step."""
    int8_mode: int = 0
    """Weight-only int8 (GPT-2 only)."""
    instances: int = 1
    """Triton model instances (``instance_group.count``)."""

    @property
    def gpus(self) -> int:
        """GPUs one model replica occupies."""
        return self.tensor_parallel * self.pipeline_parallel

    @property
    def parameters(self) -> int:
        return parameter_count(self.family, self.architecture)

    @property
    def weight_bytes(self) -> int:
        """Bytes of the converted ``.bin`` files (what the store holds and Triton reads at load)."""
        return self.parameters * self.weight_dtype.nbytes

    @property
    def gpu_weight_bytes(self) -> int:
        """Bytes of weights resident on the GPUs at the runtime dtype (all ranks together)."""
        return self.parameters * self.data_type.nbytes

    @property
    def checkpoint_dir(self) -> str:
        """Directory name FT expects under the model's version directory: ``<TP>-gpu``."""
        return f"{self.tensor_parallel}-gpu"

    def conversion_key(self, converter_version: str) -> str:
        """Content key of the converted weights: changes exactly when the conversion output would change."""
        import hashlib

        material = json.dumps(
            {
                "repo": self.hf_repo,
                "revision": self.revision,
                "weight_dtype": str(self.weight_dtype),
                "tp": self.tensor_parallel,
                "family": str(self.family),
                "converter": converter_version,
            },
            sort_keys=True,
        )
        return hashlib.sha256(material.encode()).hexdigest()[:10]

    def to_json(self) -> str:
        """Canonical JSON (sorted keys) for Job arguments and ``--spec`` files."""
        return json.dumps(_plain(asdict(self)), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> ModelSpec:
        """Inverse of :meth:`to_json`; raises ``ValueError`` naming the bad field."""
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"model spec is not valid JSON: {exc}") from exc
        return cls.from_dict(raw)

    @classmethod
    def from_dict(cls, raw: Any) -> ModelSpec:
        known = {f.name for f in fields(cls)}
        if not isinstance(raw, dict):
            kind = type(raw).__name__
            raise ValueError(f"model spec must be a JSON object with the fields {sorted(known)}, not {kind}")
        unknown = sorted(set(raw) - known)
        if unknown:
            raise ValueError(f"model spec has unknown field(s) {unknown}; known: {sorted(known)}")
        try:
            arch = Architecture(**raw["architecture"])
            batching_raw = dict(raw.get("batching") or {})
            if "preferred_batch_sizes" in batching_raw:
                batching_raw["preferred_batch_sizes"] = tuple(batching_raw["preferred_batch_sizes"])
            base = {k: v for k, v in raw.items() if k not in ("architecture", "batching")}
            spec = cls(
                **base,
                architecture=arch,
                batching=Batching(**batching_raw),
            )
            return replace(
                spec,
                family=Family(spec.family),
                weight_dtype=WeightDType(spec.weight_dtype),
                data_type=DataType(spec.data_type),
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"model spec is incomplete or mistyped: {exc}") from exc


def _plain(value: Any) -> Any:
    if isinstance(value, StrEnum):
        return str(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


__all__ = [
    "Architecture",
    "Batching",
    "DataType",
    "Family",
    "ModelSpec",
    "WeightDType",
    "ceil_div",
    "parameter_count",
]
