"""What the CPU reference (``tritonft reference``, ``tritonft verify --generate``) holds in memory: every weight at
fp32 plus the shards of its largest tensor while they are merged, with headroom. The Jobs that run it are sized from
it (``components.common.sizing``), and a stack's rules check that such a Job fits the node it runs on
(``components.settings.capacity``)."""

from __future__ import annotations

import math

from tritonft.spec import ModelSpec, WeightDType

GIB = 1 << 30
BASE_MEMORY = GIB
"""Interpreter + numpy + safetensors + HF hub client (ft-format.md §8.3: 329 MiB for torch imports alone)."""
WEIGHT_FACTOR = 1.25
"""The reference holds every weight as fp32, plus the shards of one tensor while they are merged and the
activations and KV cache of the judged prompts (a few MiB at these lengths); measured peaks: 1.02 x (t5-3b's
shapes) and 1.19 x (gpt-j-6b's) the fp32 weights (benchmarks/BENCHMARKS.md, the judge's reference)."""


def largest_tensor_bytes(model: ModelSpec) -> int:
    """Bytes of the largest single tensor at fp32: the embedding (``vocab x d_model``) or an FFN matrix."""
    arch = model.architecture
    return max(arch.vocab_size * arch.d_model, arch.d_model * arch.d_ff) * WeightDType.FP32.nbytes


def reference_memory_bytes(model: ModelSpec) -> int:
    """Memory the CPU reference needs: the interpreter plus every weight at fp32, with headroom."""
    fp32 = model.parameters * WeightDType.FP32.nbytes
    return BASE_MEMORY + math.ceil(fp32 * WEIGHT_FACTOR) + largest_tensor_bytes(model)
