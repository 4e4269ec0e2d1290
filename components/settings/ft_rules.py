"""Model rules taken from FasterTransformer's own code: combinations it refuses when Triton loads the model.

Each rule below cites the check in FasterTransformer (``NVIDIA/FasterTransformer`` at ``FT_COMMIT``) or in its Triton
backend (``triton-inference-server/fastertransformer_backend`` at ``FT_BACKEND_COMMIT``, both pinned in
``tritonft/engines/fastertransformer/versions.py``) that makes the pod crash-loop (an ``FT_CHECK`` aborts the server
at model load) or throws on the first request. The paths are relative to those repositories; the line numbers are
those commits'.

Rules of the main table that come from FT too (cited here so the whole FT picture is in one place):

* ``int8-gpt2-only``: the backend passes ``int8_mode`` to the GPT model only (``src/libfastertransformer.cc:259-272``);
  GPT-J is built without it (``:273-284``) and T5 with ``0`` (``:291-302``), and FT's T5 refuses any other value
  (``src/fastertransformer/triton_backend/t5/T5TritonModel.cc:112``, ``FT_CHECK(int8_mode_ == 0)``).
* ``tp-divides-heads``: ``src/fastertransformer/layers/attention_layers/TensorParallelDecoderSelfAttentionLayer.cc:60``
  (``FT_CHECK(head_num % tensor_para_.world_size_ == 0)``).
* ``pp-divides-layers``: ``src/fastertransformer/models/multi_gpu_gpt/ParallelGptWeight.cc:49``,
  ``src/fastertransformer/models/gptj/GptJWeight.cc:45``, ``src/fastertransformer/models/t5/T5EncoderWeight.cc:62``
  (``FT_CHECK(num_layer_ % pipeline_para_size_ == 0)``); the T5 decoder's own count is checked below.
* ``bf16-needs-ampere``: the backend builds the bf16 models only with ``ENABLE_BF16``
  (``src/libfastertransformer.cc:263``); bf16 arithmetic needs sm >= 80.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from components.settings.facts import ModelFacts, Problem, StackFacts
from tritonft.spec import Family

FT_HEAD_SIZES = (32, 48, 64, 80, 96, 112, 128, 144, 160, 192, 224, 256)
"""Head sizes FT's decoder self-attention is built for: ``FT_CHECK(size_per_head_ == 32 || ... == 256)`` in
``src/fastertransformer/layers/attention_layers/DecoderSelfAttentionLayer.cc:280-282`` (the kernels of
``src/fastertransformer/kernels/decoder_masked_multihead_attention.cu:28-66`` exist for exactly these)."""

WEIGHT_ONLY_INT8_SM = range(70, 90)
"""SM versions FT's weight-only int8 GEMM (CUTLASS fpA_intB) dispatches to: ``sm_ >= 70 && sm_ < 90``; anything
else throws ``Arch unsupported for CUTLASS mixed type GEMM``
(``src/fastertransformer/kernels/cutlass_kernels/fpA_intB_gemm/fpA_intB_gemm_template.h:441-456``)."""


@dataclass(frozen=True)
class FtRule:
    """A model rule (see :class:`components.settings.rules.ModelRule`); ``reads_gpu``: it also reads the GPU
    node's keys (``gpuType``, ``gpusPerNode``, ``gpuInstanceType``)."""

    id: str
    keys: tuple[str, ...]
    doc: str
    check: Callable[[StackFacts, ModelFacts], Iterable[Problem]]
    reads_gpu: bool = False


def _int8_needs_16_bit_compute(_: StackFacts, m: ModelFacts) -> Iterable[Problem]:
    # src/fastertransformer/models/multi_gpu_gpt/ParallelGptDecoderLayerWeight.cc:40-41 and
    # src/fastertransformer/layers/attention_layers/DecoderSelfAttentionLayer.cc:283-284 abort with fp32 + int8.
    if m.get("int8Mode", 0) == 1 and m.family is Family.GPT2 and m.get("dataType") == "fp32":
        yield (
            "int8Mode",
            "1 with dataType fp32: FasterTransformer refuses weight-only int8 with fp32 compute at model load "
            '("Weight only quant does not work with FP32 compute."); use dataType fp16 or bf16, or int8Mode: 0',
        )


def _int8_needs_supported_gpu(f: StackFacts, m: ModelFacts) -> Iterable[Problem]:
    node = f.node
    if node is None or m.get("int8Mode", 0) != 1 or m.family is not Family.GPT2:
        return
    sm = node.gpu.compute_capability
    if sm not in WEIGHT_ONLY_INT8_SM:
        yield (
            "int8Mode",
            f"1 on {node.gpu.name} (sm_{sm}): FasterTransformer's weight-only int8 GEMM runs on sm_70 to sm_89 only "
            '(it throws "Arch unsupported for CUTLASS mixed type GEMM"); use int8Mode: 0 or a V100/T4/A10G/L4/'
            "L40S/A100 GPU",
        )


def _head_size_has_kernel(_: StackFacts, m: ModelFacts) -> Iterable[Problem]:
    arch = m.architecture
    if arch is None or (not arch.d_kv and arch.d_model % arch.num_heads):
        return  # heads-divide-width reports a width the heads do not divide
    head = arch.head_size
    if head not in FT_HEAD_SIZES:
        how = f"dKv={arch.d_kv}" if arch.d_kv else f"dModel {arch.d_model} / numHeads {arch.num_heads}"
        yield (
            "architecture",
            f"head size {head} ({how}) has no FasterTransformer attention kernel; FT aborts at model load unless the "
            f"head size is one of {', '.join(str(s) for s in FT_HEAD_SIZES)}",
        )


def _pp_divides_decoder_layers(_: StackFacts, m: ModelFacts) -> Iterable[Problem]:
    # src/fastertransformer/models/t5/T5DecodingWeight.cc:61: FT_CHECK(num_layer_ % pipeline_para_size_ == 0).
    arch, pp = m.architecture, m.get("pipelineParallel", 1)
    if arch is None or m.family is not Family.T5 or not arch.num_decoder_layers:
        return
    if arch.num_decoder_layers % pp:
        yield (
            "pipelineParallel",
            f"{pp} does not divide the T5 decoder's numDecoderLayers={arch.num_decoder_layers} (FasterTransformer "
            "gives each pipeline stage the same number of decoder layers)",
        )


FT_MODEL_RULES: tuple[FtRule, ...] = (
    FtRule(
        "ft-int8-needs-16-bit-compute",
        ("int8Mode", "dataType", "family", "hfRepo"),
        "`int8Mode: 1` needs `dataType` fp16 or bf16 (FT: `ParallelGptDecoderLayerWeight.cc:40`).",
        _int8_needs_16_bit_compute,
    ),
    FtRule(
        "ft-int8-needs-sm70-to-sm89",
        ("int8Mode", "family", "hfRepo"),
        "`int8Mode: 1` needs a GPU of sm_70 to sm_89, not H100/H200 (FT: `fpA_intB_gemm_template.h:441`).",
        _int8_needs_supported_gpu,
        reads_gpu=True,
    ),
    FtRule(
        "ft-head-size-has-kernel",
        ("architecture", "hfRepo"),
        "The head size (`dKv`, or `dModel` / `numHeads`) is one FT has attention kernels for: "
        f"{', '.join(str(s) for s in FT_HEAD_SIZES)} (FT: `DecoderSelfAttentionLayer.cc:280`).",
        _head_size_has_kernel,
    ),
    FtRule(
        "ft-pp-divides-decoder-layers",
        ("pipelineParallel", "architecture", "hfRepo", "family"),
        "T5: `pipelineParallel` divides `architecture.numDecoderLayers` too (FT: `T5DecodingWeight.cc:61`).",
        _pp_divides_decoder_layers,
    ),
)
