"""FasterTransformer behind the engine seam: T5, GPT-2 and GPT-J on FT's Triton backend.

The engine object delegates to the FT-specific packages, which stay where they are:

* :mod:`tritonft.convert` — Hugging Face safetensors -> FT's ``<TP>-gpu/`` layout (``reference/ft-format.md``);
* :mod:`tritonft.repo` — the FT model's ``config.pbtxt``, the tokenizer pre/post-processing models and the ensemble;
* :mod:`tritonft.reference` — the numpy reference of FT's model step that runs it on CPU (the CPU stand-in);
* :mod:`tritonft.standin` — an echo stand-in with FT's config, for fault injection;
* :mod:`tritonft.engines.fastertransformer.versions` — the Triton release and FT commits the server image builds
  (``images/triton-ft/Dockerfile``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from tritonft.engines.base import ConvertOutcome, ConvertRequest, RenderedRepository, RepositorySources, ServerImage
from tritonft.engines.fastertransformer.versions import DEFAULT_CUDA_ARCHS, FT_BACKEND_COMMIT, FT_COMMIT, TRITON_VERSION
from tritonft.spec import Family, ModelSpec

SERVER_DOCKERFILE = "images/triton-ft/Dockerfile"
SERVER_REQUIREMENTS = "images/triton-ft/requirements.txt"


def server_build_args(
    triton_version: str = TRITON_VERSION,
    ft_backend_commit: str = FT_BACKEND_COMMIT,
    ft_commit: str = FT_COMMIT,
    cuda_archs: tuple[str, ...] = DEFAULT_CUDA_ARCHS,
) -> dict[str, str]:
    """The Dockerfile's build arguments for these pins."""
    return {
        "TRITON_VERSION": triton_version,
        "FT_BACKEND_COMMIT": ft_backend_commit,
        "FT_COMMIT": ft_commit,
        "CUDA_ARCHS": ";".join(cuda_archs),
    }


def converted_bytes(spec: ModelSpec) -> int:
    """Bytes of the FT checkpoint in the store: ``weight_bytes``, plus T5's extra embedding copies.

    The T5 converter writes the embedding three times (``shared.weight``, ``shared.weight_T``, ``lm_head.weight``;
    ft-format.md §8.3: 1.089 GB out for 0.89 GB in), so two extra ``vocab x d_model`` tensors are counted.
    """
    extra = 0
    if spec.family is Family.T5:
        arch = spec.architecture
        extra = 2 * arch.vocab_size * arch.d_model * spec.weight_dtype.nbytes
    return spec.weight_bytes + extra


class FasterTransformer:
    """The :class:`tritonft.engines.base.ServingEngine` of FT's Triton backend."""

    name = "fastertransformer"
    families = frozenset({Family.T5, Family.GPT2, Family.GPTJ})
    server_image = ServerImage(
        dockerfile=SERVER_DOCKERFILE,
        inputs=(SERVER_DOCKERFILE, SERVER_REQUIREMENTS),
        build_args=server_build_args(),
    )

    @property
    def model_types(self) -> Mapping[str, Family]:
        from tritonft.convert.model import MODEL_TYPES

        return MODEL_TYPES

    def convert(self, request: ConvertRequest) -> ConvertOutcome:
        from tritonft.convert.progress import Progress
        from tritonft.convert.sources import SourceHash
        from tritonft.convert.writer import Request, convert

        result = convert(
            Request(
                input_dir=request.input_dir,
                output_dir=request.output_dir,
                tp=request.tp,
                dtype=request.dtype,
                family=request.family,
                workers=request.workers,
                fsync=request.fsync,
                source_hash=SourceHash(request.source_hash),
            ),
            progress=lambda total, files: Progress("convert", total, files),
        )
        manifest = result.manifest
        summary = f"{len(manifest['files'])} files + config.ini, {manifest['total_bytes']} bytes"
        if result.skipped:
            line = f"up to date: {result.target} already holds this conversion ({summary}); nothing written"
        else:
            line = (
                f"converted {manifest['family']} TP={manifest['tensor_parallel']} {manifest['weight_data_type']} "
                f"-> {result.target} ({summary})"
            )
        return ConvertOutcome(summary=line, notes=tuple(result.notes), skipped=result.skipped)

    def repository_files(self, spec: ModelSpec, model_root: str = "/models") -> dict[str, bytes]:
        from tritonft.repo.render import render_repository_files

        return render_repository_files(spec, model_root=model_root)

    def write_repository(
        self, spec: ModelSpec, out_dir: Path, sources: RepositorySources | None = None
    ) -> RenderedRepository:
        from tritonft.repo import write_repository
        from tritonft.repo.engine import Engine

        sources = sources or RepositorySources()
        return write_repository(
            spec,
            out_dir,
            sources.checkpoint_dir,
            tokenizer_dir=sources.tokenizer_dir,
            model_root=sources.model_root,
            checkpoint_path=sources.checkpoint_path,
            engine=Engine.REFERENCE if sources.cpu_stand_in else Engine.FASTERTRANSFORMER,
            judge_reference=sources.judge_reference,
        )

    def converted_bytes(self, spec: ModelSpec) -> int:
        return converted_bytes(spec)


ENGINE = FasterTransformer()
