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
    """Model families served through Triton: the generators by FasterTransformer, the encoders by ONNX Runtime
    (:mod:`tritonft.engines` says which engine serves which)."""

    T5 = "t5"
    GPT2 = "gpt2"
    GPTJ = "gptj"
    BERT = "bert"
    """BERT-architecture encoders (MiniLM, all-MiniLM, BGE, E5, RoBERTa, ...): sentence embeddings or classification."""
    LLAMA = "llama"
    """Llama-family decoder-only LMs (Llama 2/3.x, Mistral, Qwen2/2.5/3, Gemma, Phi-3): served by vLLM through Triton's
    vLLM backend from their own Hugging Face files (no conversion); the ``vllm`` block says which and how."""

    @property
    def is_encoder(self) -> bool:
        return self is Family.BERT

    @property
    def is_vllm(self) -> bool:
        return self is Family.LLAMA

    @property
    def is_fastertransformer(self) -> bool:
        return not self.is_encoder and not self.is_vllm

    @property
    def ft_model_type(self) -> str:
        """The FasterTransformer backend's ``model_type`` parameter for this family."""
        return {Family.T5: "T5", Family.GPT2: "GPT", Family.GPTJ: "GPT-J"}[self._ft()]

    @property
    def ini_section(self) -> str:
        """The section of FT's ``config.ini`` that holds the model's hyper-parameters."""
        return {Family.T5: "encoder", Family.GPT2: "gpt", Family.GPTJ: "gptj"}[self._ft()]

    def _ft(self) -> Family:
        if not self.is_fastertransformer:
            raise ValueError(f"family {self.value!r} is not served by FasterTransformer (it has no FT model type)")
        return self


class EncoderTask(StrEnum):
    """What a served encoder answers."""

    EMBED = "embed"
    """A sentence embedding (pooled, optionally L2-normalised)."""
    CLASSIFY = "classify"
    """The sequence-classification head: logits, softmax scores and the top label."""


class Pooling(StrEnum):
    """How an embedding model turns token vectors into one sentence vector."""

    MEAN = "mean"
    """Average of the token vectors under the attention mask (sentence-transformers' ``pooling_mode_mean_tokens``)."""
    CLS = "cls"
    """The first token's vector (``pooling_mode_cls_token``: BGE and the like)."""


@dataclass(frozen=True)
class EncoderSpec:
    """What an encoder (``family: bert``) is served as; required for encoders, absent for the generators.

    The values are the conversion's (``tritonft convert`` reads them from the checkpoint; its manifest records
    them): the repository rendered from the spec is checked against that manifest when it is written.
    """

    task: EncoderTask = EncoderTask.EMBED
    pooling: Pooling = Pooling.MEAN
    """``task: embed`` only."""
    normalize: bool = True
    """L2-normalised embeddings (``task: embed`` only)."""
    labels: tuple[str, ...] = ()
    """Class names by logit index (``id2label``), ``task: classify`` only: at least two."""
    max_seq_length: int = 512
    """Longest input in tokens (special tokens included); longer texts are refused, not truncated."""
    type_vocab_size: int = 2
    """Rows of the token-type embedding (``config.json`` ``type_vocab_size``; 0 for DistilBERT, which has none): part
    of the parameter count."""

    @property
    def output_width(self) -> int:
        """Width of the answer: the embedding (``hidden_size``) or one score per label."""
        return len(self.labels)

    def problems(self, architecture: Architecture) -> list[str]:
        """What is wrong with this encoder spec for ``architecture`` (empty when it is consistent)."""
        found = []
        if self.task is EncoderTask.CLASSIFY:
            if len(self.labels) < 2:
                found.append(f"encoder.labels: task classify needs at least two labels, got {list(self.labels)}")
            if len(set(self.labels)) != len(self.labels) or not all(self.labels):
                found.append(f"encoder.labels: must be distinct non-empty names, got {list(self.labels)}")
        elif self.labels:
            found.append(f"encoder.labels: only for task classify, not {self.task} (drop them)")
        if self.max_seq_length < 2:
            found.append(f"encoder.max_seq_length: {self.max_seq_length} must be at least 2 ([CLS] and [SEP])")
        elif architecture.max_positions and self.max_seq_length > architecture.max_positions:
            found.append(
                f"encoder.max_seq_length: {self.max_seq_length} exceeds the model's position table "
                f"(architecture.max_positions = {architecture.max_positions})"
            )
        if self.type_vocab_size < 0:
            found.append(f"encoder.type_vocab_size: {self.type_vocab_size} must not be negative (DistilBERT: 0)")
        return found


DEFAULT_TIME_PER_OUTPUT_TOKEN_S = 0.05
"""20 tokens/s per stream: what an 8B model's decode step takes at most on an A10G at vLLM's full batch (each step
reads the 16 GB of weights once, 27 ms at 600 GB/s, plus the batch's KV cache, at most the ~5 GiB left for it: 9 ms),
with room to spare."""


@dataclass(frozen=True)
class VllmSpec:
    """How a Llama-family model (``family: llama``) is served by vLLM; required there, absent elsewhere.

    The checkpoint's facts the ``architecture`` block lacks (``config.json`` ``architectures``, KV heads, QKV bias, the
    file dtype) and the engine arguments a stack sets (vLLM's names in ``model.json``); the tensor-parallel size is
    the spec's ``tensor_parallel``. Checked against vLLM's own rules by :mod:`tritonft.engines.vllm.rules`.
    """

    architecture: str = "LlamaForCausalLM"
    num_kv_heads: int = 0
    """KV heads (grouped-query attention); 0: as many as attention heads."""
    qkv_bias: bool = False
    checkpoint_dtype: str = "bfloat16"
    """``config.json`` ``torch_dtype``: what the weights take on the model store."""
    max_model_len: int | None = None
    gpu_memory_utilization: float = 0.9
    max_num_seqs: int = 64
    dtype: str = "auto"
    enable_prefix_caching: bool = True
    time_per_output_token_s: float = DEFAULT_TIME_PER_OUTPUT_TOKEN_S
    """The slowest a stream may generate (seconds per token, under the engine's full batch): the gateway gives a
    request for this model its ``--deadline`` plus the model's context times this
    (:func:`tritonft.gateway.config.request_deadline_s`), so an answer as long as the context is not cut. Not an
    engine argument: the repository does not depend on it (:meth:`ModelSpec.repository_json`)."""


class Device(StrEnum):
    """Where one replica of a model runs."""

    GPU = "gpu"
    """On GPU nodes, ``tensor_parallel x pipeline_parallel`` GPUs per replica (every family)."""
    CPU = "cpu"
    """On CPU nodes, no GPU (encoders only: a small encoder often belongs there; FasterTransformer needs GPUs)."""


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


def parameter_count(
    family: Family, arch: Architecture, encoder: EncoderSpec | None = None, vllm: VllmSpec | None = None
) -> int:
    """Exact parameter count of the served model (the tensors the converter writes, ties counted once).

    T5: shared embedding (+ untied LM head), encoder blocks (q,k,v,o + FFN + 2 norms), decoder blocks (self q,k,v,o +
    cross q,k,v,o + FFN + 3 norms), relative bias tables in block 0, two final norms.
    GPT-2: wte + wpe + per layer (fused qkv w+b, proj w+b, fc w+b, proj w+b, 2 LN w+b) + final LN.
    GPT-J: wte + per layer (q,k,v,o without bias, fc_in w+b, fc_out w+b, one LN w+b) + final LN + LM head w+b.
    BERT (``encoder`` required): word + position + token-type embeddings + their LN, per layer (q,k,v,o w+b, 2 LN,
    intermediate w+b, output w+b); ``task: classify`` adds the pooler (w+b) and the classifier (w+b) — the
    tensors the ONNX graph holds (:func:`tritonft.encoder.graph.required_tensors`).
    """
    d, inner, f, v = arch.d_model, arch.inner_size, arch.d_ff, arch.vocab_size
    if family is Family.LLAMA:
        kv_heads = (vllm.num_kv_heads if vllm else 0) or arch.num_heads
        kv = kv_heads * arch.head_size
        attention = 2 * d * inner + 2 * d * kv + ((inner + 2 * kv) if vllm and vllm.qkv_bias else 0)
        per_layer = attention + 3 * d * f + 2 * d
        return v * d * (1 if arch.tied_embeddings else 2) + arch.num_layers * per_layer + d
    if family is Family.BERT:
        if encoder is None:
            raise ValueError("the parameter count of a bert model needs its encoder spec (task, labels)")
        per_layer = 4 * (d * inner + inner) + (d * f + f) + (f * d + d) + 4 * d
        embeddings = (v + arch.max_positions + encoder.type_vocab_size) * d + 2 * d
        head = 0
        if encoder.task is EncoderTask.CLASSIFY:
            head = (d * d + d) + len(encoder.labels) * (d + 1)
        return embeddings + arch.num_layers * per_layer + head
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
    max_queue_delay_us: int = 0
    """0: no lone request waits; requests that queue while the step is busy still go in one batch (measured on
    tritonserver 2.33.0 against 1000 us: benchmarks/batching_2330.py)."""
    preferred_batch_sizes: tuple[int, ...] = ()


SPEC_JSON = "spec.json"
"""The file a conversion Job reads its ``ModelSpec`` from: the key of its spec ConfigMap, mounted read-only."""


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
    encoder: EncoderSpec | None = None
    """The encoder's task (``family: bert`` only; required there). Absent from the JSON of the generators."""
    device: Device = Device.GPU
    """GPU or CPU nodes (``cpu``: encoders only). Absent from the JSON when ``gpu``."""
    vllm: VllmSpec | None = None
    """How vLLM serves the model (``family: llama`` only; required there). Absent from the JSON of the others."""

    def __post_init__(self) -> None:
        problems = self.problems()
        if problems:
            raise ValueError(f"model spec {self.name!r} is inconsistent: " + "; ".join(problems))

    def problems(self) -> list[str]:
        """What makes this spec inconsistent (family vs encoder spec, the encoder's own rules)."""
        try:
            family = Family(self.family)
        except ValueError:
            return [f"family: {self.family!r} is not one of {', '.join(f.value for f in Family)}"]
        if self.device not in tuple(Device):
            return [f"device: {self.device!r} is not one of {', '.join(d.value for d in Device)}"]
        if family.is_vllm:
            return self._vllm_problems()
        if self.vllm is not None:
            return [f"vllm: only for family llama (served by vLLM), not {family}"]
        if not family.is_encoder:
            found = [] if self.encoder is None else [f"encoder: only for encoder families (bert), not {family}"]
            if self.device == Device.CPU:
                found.append(f"device: cpu is for encoders only; {family} runs on FasterTransformer, which needs GPUs")
            return found
        if self.encoder is None:
            return [f"encoder: required for family {family} (task embed or classify)"]
        found = self.encoder.problems(self.architecture)
        if self.tensor_parallel != 1 or self.pipeline_parallel != 1:
            found.append("tensor_parallel/pipeline_parallel: an encoder is not split across GPUs (both must be 1)")
        if self.decoupled or self.int8_mode:
            found.append("decoupled/int8_mode: generator options, not for an encoder")
        if not self.architecture.max_positions:
            found.append("architecture.max_positions: required for an encoder (its position table)")
        return found

    def _vllm_problems(self) -> list[str]:
        found = []
        if self.vllm is None:
            found.append("vllm: required for family llama (at least its architecture and KV heads)")
        if self.encoder is not None:
            found.append("encoder: only for encoder families (bert), not llama")
        if self.device == Device.CPU:
            found.append("device: cpu is for encoders only; vLLM's Llama-family models run on GPUs")
        if self.pipeline_parallel != 1:
            found.append("pipeline_parallel: vLLM models are split by tensor_parallel only (set it to 1)")
        if self.int8_mode:
            found.append("int8_mode: a FasterTransformer option, not for a vLLM model")
        if self.vllm is not None and not self.vllm.time_per_output_token_s > 0:
            found.append(
                f"vllm.time_per_output_token_s: {self.vllm.time_per_output_token_s!r} must be a positive number of "
                f"seconds (default {DEFAULT_TIME_PER_OUTPUT_TOKEN_S:g})"
            )
        return found

    @property
    def gpus(self) -> int:
        """GPUs one model replica occupies (0 on CPU nodes)."""
        if self.device == Device.CPU:
            return 0
        return self.tensor_parallel * self.pipeline_parallel

    @property
    def on_cpu(self) -> bool:
        """Served on CPU nodes, without a GPU."""
        return self.device == Device.CPU

    @property
    def parameters(self) -> int:
        return parameter_count(self.family, self.architecture, self.encoder, self.vllm)

    @property
    def output_width(self) -> int:
        """An encoder's answer width: the embedding's (``d_model``) or one score per label."""
        if self.encoder is None:
            raise ValueError(f"model {self.name!r} ({self.family}) is not an encoder")
        return self.encoder.output_width or self.architecture.d_model

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

        key: dict[str, Any] = {
            "repo": self.hf_repo,
            "revision": self.revision,
            "weight_dtype": str(self.weight_dtype),
            "tp": self.tensor_parallel,
            "family": str(self.family),
            "converter": converter_version,
        }
        if self.encoder is not None:  # the encoder's task, pooling and limits are in its converted graph
            key["encoder"] = _plain(asdict(self.encoder))
        if self.vllm is not None:  # vLLM serves the downloaded files: only what names them keys them
            key = {"repo": self.hf_repo, "revision": self.revision, "family": str(self.family), "engine": "vllm"}
        material = json.dumps(key, sort_keys=True)
        return hashlib.sha256(material.encode()).hexdigest()[:10]

    def to_json(self) -> str:
        """Canonical JSON (sorted keys) for Job arguments and ``--spec`` files (no ``encoder`` key without one)."""
        plain = _plain(asdict(self))
        if self.encoder is None:
            del plain["encoder"]
        if self.vllm is None:
            del plain["vllm"]
        if self.device == Device.GPU:
            del plain["device"]
        return json.dumps(plain, sort_keys=True, separators=(",", ":"))

    def repository_json(self) -> str:
        """:meth:`to_json` without what only the gateway reads (a vLLM model's ``time_per_output_token_s``, its
        requests' deadline): what the rendered repository and the serving version depend on, so a changed deadline
        re-renders no repository and starts no judged rollout."""
        if self.vllm is None:
            return self.to_json()
        plain = json.loads(self.to_json())
        del plain["vllm"]["time_per_output_token_s"]
        return json.dumps(plain, sort_keys=True, separators=(",", ":"))

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
            base = {k: v for k, v in raw.items() if k not in ("architecture", "batching", "encoder", "vllm")}
            spec = cls(
                **base,
                architecture=arch,
                batching=Batching(**batching_raw),
                encoder=_encoder_from_dict(raw.get("encoder")),
                vllm=_vllm_from_dict(raw.get("vllm")),
            )
            return replace(
                spec,
                family=Family(spec.family),
                weight_dtype=WeightDType(spec.weight_dtype),
                data_type=DataType(spec.data_type),
                device=Device(spec.device),
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"model spec is incomplete or mistyped: {exc}") from exc


def _encoder_from_dict(raw: Any) -> EncoderSpec | None:
    if raw is None:
        return None
    known = {f.name for f in fields(EncoderSpec)}
    if not isinstance(raw, dict):
        raise ValueError(f"model spec encoder must be an object with the fields {sorted(known)}")
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ValueError(f"model spec encoder has unknown field(s) {unknown}; known: {sorted(known)}")
    values = dict(raw)
    if "task" in values:
        values["task"] = EncoderTask(values["task"])
    if "pooling" in values:
        values["pooling"] = Pooling(values["pooling"])
    if "labels" in values:
        if not isinstance(values["labels"], list | tuple) or not all(isinstance(x, str) for x in values["labels"]):
            raise ValueError(f"model spec encoder.labels must be a list of names, got {values['labels']!r}")
        values["labels"] = tuple(values["labels"])
    for key in ("max_seq_length", "type_vocab_size"):
        if key in values and (not isinstance(values[key], int) or isinstance(values[key], bool)):
            raise ValueError(f"model spec encoder.{key} must be an integer, got {values[key]!r}")
    if "normalize" in values and not isinstance(values["normalize"], bool):
        raise ValueError(f"model spec encoder.normalize must be true or false, got {values['normalize']!r}")
    return EncoderSpec(**values)


def _vllm_from_dict(raw: Any) -> VllmSpec | None:
    if raw is None:
        return None
    known = {f.name for f in fields(VllmSpec)}
    if not isinstance(raw, dict):
        raise ValueError(f"model spec vllm must be an object with the fields {sorted(known)}")
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ValueError(f"model spec vllm has unknown field(s) {unknown}; known: {sorted(known)}")
    return VllmSpec(**raw)


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
    "EncoderSpec",
    "EncoderTask",
    "Family",
    "ModelSpec",
    "Pooling",
    "VllmSpec",
    "WeightDType",
    "ceil_div",
    "parameter_count",
]
