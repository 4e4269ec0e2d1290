"""vLLM behind the engine seam: the Llama family, served from the downloaded Hugging Face files (no conversion)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from tritonft.engines.base import ConvertOutcome, ConvertRequest, RenderedRepository, RepositorySources, ServerImage
from tritonft.engines.vllm.repository import repository_files, write_repository
from tritonft.engines.vllm.rules import DTYPE_BYTES, Checkpoint, VllmOptions, read_checkpoint
from tritonft.engines.vllm.rules import problems as rule_problems
from tritonft.engines.vllm.versions import SCHEDULER_GAUGES, SERVER_DOCKERFILE, TRITON_VERSION
from tritonft.engines.vllm.weights import weights_problems
from tritonft.errors import UserError
from tritonft.spec import Architecture, Family, ModelSpec, VllmSpec

MODEL_TYPES: Mapping[str, Family] = dict.fromkeys(
    ("llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "phi3"), Family.LLAMA
)
"""``config.json`` ``model_type`` of the architectures in :data:`tritonft.engines.vllm.rules.ARCHITECTURES`."""
HF_DIR = "hf"
"""The downloaded checkpoints live on the store under ``<model_root>/hf/<name>/<revision>``."""


def _vllm(spec: ModelSpec) -> VllmSpec:
    if spec.family is not Family.LLAMA or spec.vllm is None:
        raise UserError(f"model {spec.name!r} ({spec.family}) is not a Llama-family model served by vLLM")
    return spec.vllm


def options_from(vllm: VllmSpec, tensor_parallel: int) -> VllmOptions:
    """The engine arguments a ``vllm`` block sets (vLLM's ``tensor_parallel_size`` is the model's
    ``tensor_parallel``): one reading for the stack's rules (:mod:`components.settings.vllm_rules`) and the Job's."""
    return VllmOptions(
        max_model_len=vllm.max_model_len,
        gpu_memory_utilization=vllm.gpu_memory_utilization,
        max_num_seqs=vllm.max_num_seqs,
        dtype=vllm.dtype,
        enable_prefix_caching=vllm.enable_prefix_caching,
        tensor_parallel_size=tensor_parallel,
    )


def checkpoint_from(vllm: VllmSpec, arch: Architecture) -> Checkpoint:
    """The checkpoint's facts as a model states them (its ``architecture`` block and ``vllm`` block), in the shape
    :func:`tritonft.engines.vllm.rules.read_checkpoint` reads a downloaded ``config.json`` into: what the stack was
    sized with (:mod:`components.settings.vllm_rules`) and what the Job compares the download against
    (:func:`checkpoint_problems`)."""
    return Checkpoint(
        architecture=vllm.architecture,
        model_type="",
        hidden_size=arch.d_model,
        num_layers=arch.num_layers,
        num_heads=arch.num_heads,
        num_kv_heads=vllm.num_kv_heads or arch.num_heads,
        head_dim=arch.head_size,
        intermediate_size=arch.d_ff,
        vocab_size=arch.vocab_size,
        max_positions=arch.max_positions,
        torch_dtype=vllm.checkpoint_dtype,
        tied_embeddings=arch.tied_embeddings,
        qkv_bias=vllm.qkv_bias,
    )


def options_of(spec: ModelSpec) -> VllmOptions:
    """The engine arguments ``spec`` sets (its ``tensor_parallel`` is vLLM's ``tensor_parallel_size``)."""
    return options_from(_vllm(spec), spec.tensor_parallel)


def checkpoint_of(spec: ModelSpec) -> Checkpoint:
    """The checkpoint's facts as the spec states them (its ``architecture`` block and ``vllm`` block)."""
    return checkpoint_from(_vllm(spec), spec.architecture)


def model_path(spec: ModelSpec, model_root: str = "/models") -> str:
    """Where the download Job puts ``spec``'s Hugging Face files on the store (``model.json``'s ``model``)."""
    return f"{model_root.rstrip('/')}/{HF_DIR}/{spec.name}/{spec.revision}"


CHECKED_FACTS = (
    "architecture",
    "hidden_size",
    "num_layers",
    "num_heads",
    "num_kv_heads",
    "head_dim",
    "intermediate_size",
    "vocab_size",
    "tied_embeddings",
    "qkv_bias",
    "torch_dtype",
)
"""The checkpoint facts the spec states (and sized the stack with) that its downloaded ``config.json`` must agree
with before the repository is rendered."""


def checkpoint_problems(spec: ModelSpec, checkpoint_dir: Path) -> list[str]:
    """Where the downloaded checkpoint's ``config.json`` (and ``tokenizer_config.json``) disagrees with ``spec``, where
    its weights are not whole or not that model (:func:`tritonft.engines.vllm.weights.weights_problems`, headers
    only), or what vLLM would refuse in the spec's engine arguments for it (no GPU: the stack checked that); empty
    when the files are the model the stack was sized for. The conversion Job's check before the repository is
    published (the Job has no vLLM to ask for an answer: the integration probe judges that once Triton loaded it)."""
    config_file = checkpoint_dir / "config.json"
    try:
        config = json.loads(config_file.read_text())
        tokenizer_file = checkpoint_dir / "tokenizer_config.json"
        tokenizer = json.loads(tokenizer_file.read_text()) if tokenizer_file.is_file() else None
        found = read_checkpoint(config, tokenizer)
    except (OSError, ValueError) as exc:
        return [f"{config_file}: {exc}"]
    stated = checkpoint_of(spec)
    problems = [
        f"config.json {fact}: {getattr(found, fact)!r}, the spec says {getattr(stated, fact)!r}"
        for fact in CHECKED_FACTS
        if getattr(found, fact) != getattr(stated, fact)
    ]
    if found.max_positions != stated.max_positions:
        problems.append(
            f"config.json: the model's maximum length as vLLM derives it is {found.max_positions}, the spec says "
            f"{stated.max_positions} (architecture.maxPositions)"
        )
    problems += weights_problems(checkpoint_dir, stated)
    return problems + rule_problems(options_of(spec), found, None, key="vllm")


def require_spec_checkpoint(spec: ModelSpec, checkpoint_dir: Path) -> None:
    """``UserError`` listing :func:`checkpoint_problems` when the downloaded checkpoint is not ``spec``'s model."""
    disagreements = checkpoint_problems(spec, checkpoint_dir)
    if disagreements:
        raise UserError(
            f"{checkpoint_dir}: the downloaded checkpoint is not the model the spec describes (fix the stack's model "
            "entry, or pin the revision it describes)",
            disagreements,
        )


class Vllm:
    """The :class:`tritonft.engines.base.ServingEngine` of Triton's vLLM backend."""

    name = "vllm"
    families = frozenset({Family.LLAMA})
    model_types = MODEL_TYPES
    server_image = ServerImage.of_release(SERVER_DOCKERFILE, TRITON_VERSION, SCHEDULER_GAUGES)

    def convert(self, request: ConvertRequest) -> ConvertOutcome:
        raise UserError(
            f"{request.input_dir}: a vLLM model is not converted; vLLM loads the Hugging Face files as downloaded "
            "(`tritonft repo` renders its repository)"
        )

    def repository_files(self, spec: ModelSpec, model_root: str = "/models") -> dict[str, bytes]:
        return repository_files(spec.name, options_of(spec), model_path(spec, model_root), checkpoint_of(spec))

    def write_repository(
        self, spec: ModelSpec, out_dir: Path, sources: RepositorySources | None = None
    ) -> RenderedRepository:
        """``sources.checkpoint_path`` (else the store's path) becomes ``model.json``'s ``model``;
        ``cpu_stand_in`` changes nothing in the files: the CPU serves the same repository with the project's ``vllm``
        backend; ``sources.judge_reference`` (``tritonft reference``'s file) is carried by ``config.pbtxt``."""
        sources = sources or RepositorySources()
        path = sources.checkpoint_path or model_path(spec, sources.model_root)
        if sources.checkpoint_dir is not None:
            require_spec_checkpoint(spec, sources.checkpoint_dir)
        reference = None
        if sources.judge_reference is not None:
            from tritonft.repo.render import judge_reference_text

            reference = judge_reference_text(sources.judge_reference)
        files = repository_files(spec.name, options_of(spec), path, checkpoint_of(spec), judge_reference=reference)
        models = write_repository(files, out_dir)
        return RenderedRepository(
            root=out_dir, models=tuple(models), files=tuple(sorted(files)), config_source=None, tokenizer=()
        )

    def converted_bytes(self, spec: ModelSpec) -> int:
        """The Hugging Face weights as downloaded (their ``torch_dtype``)."""
        return spec.parameters * DTYPE_BYTES.get(_vllm(spec).checkpoint_dtype, 2)


ENGINE = Vllm()
