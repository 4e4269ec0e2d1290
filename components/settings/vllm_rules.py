"""Model rules of the Llama-family models vLLM serves (``family: llama``), taken from vLLM's own code.

The checks themselves live with the engine (:mod:`tritonft.engines.vllm.rules`, each cited file:line in the pinned
vLLM): this module feeds them a stack entry's facts (the ``vllm`` block over the catalog's checkpoint facts, the
entry's ``tensorParallel``, the stack's GPU node) and names each refusal by the key as written in the stack file.
Which keys a vLLM model takes at all is decided here too: FasterTransformer's batching, lengths and dtypes are not
vLLM's (vLLM batches itself, bounds a request by ``vllm.maxModelLen``, computes in ``vllm.dtype``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from components.settings.facts import ModelFacts, Problem, StackFacts
from components.settings.gpus import GIB
from tritonft.engines.vllm.engine import checkpoint_from, options_from
from tritonft.engines.vllm.rules import Checkpoint, Gpu, VllmOptions, problems
from tritonft.spec import VllmSpec

FT_ONLY_KEYS: dict[str, str] = {
    "weightDtype": "vLLM serves the checkpoint's own files (no conversion); set `vllm.dtype` for the compute type",
    "dataType": "vLLM's compute type is `vllm.dtype` (auto, float16, bfloat16, ...): write it there",
    "maxBatchSize": "vLLM batches itself: `vllm.maxNumSeqs` is how many requests run at once",
    "maxQueueDelayUs": "vLLM schedules requests itself (continuous batching): remove it",
    "preferredBatchSizes": "vLLM schedules requests itself (continuous batching): remove it",
    "maxInputLen": "vLLM bounds prompt + answer together by `vllm.maxModelLen`: write that instead",
    "maxOutputLen": "vLLM bounds prompt + answer together by `vllm.maxModelLen`; a request sets its own max_tokens",
    "streaming": "NVIDIA's vLLM backend is decoupled (it streams) by design: remove it",
    "int8Mode": "FasterTransformer's weight-only int8 is not vLLM's: remove it",
    "instances": "one vLLM engine serves a replica (scale with replicasMax): remove it",
}
"""FasterTransformer's keys a ``family: llama`` entry refuses, each with what to write instead."""

FAMILY_KEYS = ("family", "hfRepo")


@dataclass(frozen=True)
class VllmRule:
    """A model rule (see :class:`components.settings.rules.ModelRule`); ``reads_gpu``: it also reads the GPU node's
    keys."""

    id: str
    keys: tuple[str, ...]
    doc: str
    check: Callable[[StackFacts, ModelFacts], Iterable[Problem]]
    reads_gpu: bool = False


def _vllm_block_for_llama(_: StackFacts, m: ModelFacts) -> Iterable[Problem]:
    family = m.family
    if family is not None and not family.is_vllm and "vllm" in m.present:
        yield "vllm", f"is for family llama (served by vLLM); {family} is not: remove it"


def _ft_keys_not_for_vllm(_: StackFacts, m: ModelFacts) -> Iterable[Problem]:
    if not m.is_vllm:
        return
    for key, fix in FT_ONLY_KEYS.items():
        if key in m.present:
            yield key, f"is a FasterTransformer setting, not for family llama: {fix}"
    if m.get("pipelineParallel", 1) > 1:
        yield (
            "pipelineParallel",
            f"{m.get('pipelineParallel')}: a vLLM model is split by tensorParallel only here; remove it",
        )


STATED_FACTS: dict[str, str] = {
    "architecture": "`architectures[0]` of its config.json (one vLLM serves, e.g. Qwen2ForCausalLM)",
    "numKvHeads": "`num_key_value_heads` of its config.json (the attention heads' count when absent there)",
    "qkvBias": "whether its q/k/v projections have a bias (true for Qwen2, `attention_bias` of a Llama config.json)",
    "checkpointDtype": "`torch_dtype` of its config.json (float16, bfloat16 or float32)",
}
"""The checkpoint facts vLLM's rules read that an ``architecture`` block does not hold: the catalog knows them for
its models; any other model states each in its ``vllm`` block (none is guessed)."""


def _facts_stated_outside_the_catalog(_: StackFacts, m: ModelFacts) -> Iterable[Problem]:
    if not m.is_vllm or (m.vllm_catalog is not None and "architecture" not in m.present):
        return
    block = m.get("vllm", {})
    stated = block if isinstance(block, dict) else {}
    for key, what in STATED_FACTS.items():
        if key not in stated:
            yield (
                f"vllm.{key}",
                f"required for a model outside the catalog (or with its own architecture block): {what}; the memory "
                "check and the download's comparison need it",
            )


def options(m: ModelFacts, vllm: VllmSpec) -> VllmOptions:
    """The engine arguments of the entry (vLLM's ``tensor_parallel_size`` is the entry's ``tensorParallel``)."""
    return options_from(vllm, m.get("tensorParallel", 1))


def checkpoint(m: ModelFacts, vllm: VllmSpec) -> Checkpoint | None:
    """The checkpoint's facts: the entry's (or the catalog's) architecture and the ``vllm`` block's facts, as the
    download Job compares them with the downloaded ``config.json`` (one reading: :func:`checkpoint_from`)."""
    arch = m.architecture
    return None if arch is None else checkpoint_from(vllm, arch)


def _engine_rules(f: StackFacts, m: ModelFacts) -> Iterable[Problem]:
    vllm = m.vllm_spec()
    if vllm is None:
        return
    unstated = list(_facts_stated_outside_the_catalog(f, m))
    if unstated:  # vLLM's rules on guessed head counts or dtype would pass or refuse the wrong model
        yield from unstated
        return
    found = checkpoint(m, vllm)
    if found is None:
        return  # unknown-repo-needs-architecture reports it
    if not found.max_positions:
        yield (
            "architecture.maxPositions",
            "required for family llama: vLLM bounds maxModelLen by the model's positions (max_position_embeddings "
            "in config.json, times the rope_scaling factor where vLLM applies it)",
        )
        return
    node = f.node
    gpu = None if node is None else Gpu(node.gpu.memory_gib * GIB, divmod(node.gpu.compute_capability, 10))
    for problem in problems(options(m, vllm), found, gpu, key="vllm", tp_key="tensorParallel"):
        path, message = problem.split(": ", 1)
        yield path, message


VLLM_MODEL_RULES: tuple[VllmRule, ...] = (
    VllmRule(
        "vllm-block-for-llama",
        ("vllm", *FAMILY_KEYS),
        "`vllm` only for family `llama` (served by vLLM).",
        _vllm_block_for_llama,
    ),
    VllmRule(
        "ft-keys-not-for-llama",
        (*FAMILY_KEYS, *FT_ONLY_KEYS, "pipelineParallel"),
        f"`{'`, `'.join(FT_ONLY_KEYS)}` and `pipelineParallel` above 1 are FasterTransformer's, not for family "
        "`llama` (vLLM batches, bounds lengths and picks its dtype in the `vllm` block).",
        _ft_keys_not_for_vllm,
    ),
    VllmRule(
        "vllm-engine-rules",
        ("vllm", "tensorParallel", "architecture", *FAMILY_KEYS),
        "`llama`: what the pinned vLLM refuses at start-up (tritonft/engines/vllm/rules.py, each cited in vLLM "
        "0.27.1): `tensorParallel` divides the attention heads and divides (or is divided by) the KV heads; "
        "`vllm.maxModelLen` within the model's positions (RoPE scaling as vLLM applies it); "
        "`vllm.gpuMemoryUtilization` in (0, 1]; `vllm.maxNumSeqs` >= 1; `vllm.dtype` bfloat16 only on a GPU of "
        "compute capability >= 8.0; the weights per GPU (over `tensorParallel`) plus the KV cache of one "
        "`maxModelLen`-token request fit `gpuMemoryUtilization` x the GPU's memory.",
        _engine_rules,
        reads_gpu=True,
    ),
)


def gated_repos_need_token(f: StackFacts) -> Iterable[Problem]:
    """A catalog repository the Hub gates (Meta's Llama) downloads only with a token: the stack's ``hfToken`` or the
    model's ``hfTokenSecret``."""
    if "hfToken" in f.present:
        return
    for m in f.models:
        catalog = m.vllm_catalog
        if catalog is not None and catalog.gated and not m.get("hfTokenSecret"):
            yield (
                "hfToken",
                f"models[{m.index}] ({m.get('hfRepo')}) is gated on the Hugging Face Hub: accept its licence there "
                "with an account, then store that account's token: `pulumi config set --secret hfToken hf_...` (in "
                "CI: the HF_TOKEN repository secret, which .github/scripts/stack-config.sh sets), or, on an existing "
                "cluster, name an existing Secret with key `token` in the model's `hfTokenSecret` (the download Job "
                "mounts it as a file; `tritonft preflight` checks it is there)",
            )
