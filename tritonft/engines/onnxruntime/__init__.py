"""ONNX Runtime behind the engine seam: BERT-architecture encoders (embeddings, classification) on Triton's ONNX
Runtime backend.

The engine object delegates to :mod:`tritonft.encoder`, which stays where it is:

* :mod:`tritonft.encoder.convert` — Hugging Face safetensors -> ``OUT/onnx/{model.onnx, manifest.json}`` (a graph
  built from the weights with the ``onnx`` package, no torch);
* :mod:`tritonft.encoder.repo` — the tokenizer model, the ``onnxruntime_onnx`` model and the ensemble;
* :mod:`tritonft.encoder.triton_onnx_model` — the CPU stand-in: a Python-backend model running the same
  ``model.onnx`` with the ``onnxruntime`` package (a Triton without the ONNX Runtime backend, like this project's
  CPU test server).

Server image: its own, not FasterTransformer's (whose Triton 23.04 no security fix reaches): NGC's current
``tritonserver:<version>-py3`` release (:mod:`tritonft.engines.onnxruntime.versions`), which ships Triton's ONNX
Runtime backend next to the Python backend, with every other backend removed (``images/triton-onnx/Dockerfile``).
A stack serving generators and encoders builds both images; each model's pods run its engine's.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tritonft.encoder.checkpoint import MODEL_TYPES as ENCODER_MODEL_TYPES
from tritonft.engines.base import ConvertOutcome, ConvertRequest, RenderedRepository, RepositorySources, ServerImage
from tritonft.engines.onnxruntime.versions import SERVER_DOCKERFILE, SERVER_REQUIREMENTS, TRITON_VERSION
from tritonft.errors import UserError
from tritonft.spec import EncoderSpec, EncoderTask, Family, ModelSpec

if TYPE_CHECKING:
    from tritonft.encoder.repo import EncoderServing

CONVERT_OPTIONS = ("task", "pooling", "normalize", "max_seq_length", "optimize")
"""The encoder options of ``tritonft convert`` (``ConvertRequest.options``)."""
MODEL_TYPES: Mapping[str, Family] = dict.fromkeys(ENCODER_MODEL_TYPES, Family.BERT)
"""config.json ``model_type`` values converted, all served as family ``bert`` (BERT, MiniLM, all-MiniLM, BGE and E5
checkpoints are ``bert``; RoBERTa ones ``roberta``: the same body, see :mod:`tritonft.encoder.checkpoint`)."""


CPU_THREADS_PER_INSTANCE = 1
"""ONNX Runtime's intra-op threads per instance of a ``device: cpu`` encoder: the CPU its pod requests for each
(``components.common.sizing.cpu_server_sizing``). Unset, ONNX Runtime starts one thread per core of the *node*,
which the pod's CPU limit then throttles: every instance contends for the same few cores."""


def serving_of(spec: ModelSpec, *, cpu_stand_in: bool = False) -> EncoderServing:
    """How ``spec`` is served: batching and instances from the spec; the ONNX model on the GPU with the TensorRT
    accelerator (``device: gpu``, one GPU per replica) or on the CPU (``device: cpu``, :data:`CPU_THREADS_PER_INSTANCE`
    intra-op threads each) in Triton's ONNX Runtime backend, or on the CPU as the Python-backend stand-in."""
    from tritonft.encoder.repo import EncoderServing, OnnxEngine

    return EncoderServing(
        spec.name,
        max_batch_size=spec.batching.max_batch_size,
        max_queue_delay_us=spec.batching.max_queue_delay_us,
        instances=spec.instances,
        gpu=not cpu_stand_in and not spec.on_cpu,
        engine=OnnxEngine.PYTHON if cpu_stand_in else OnnxEngine.ONNXRUNTIME,
        intra_op_threads=CPU_THREADS_PER_INSTANCE if spec.on_cpu else 0,
    )


def expected_manifest(spec: ModelSpec) -> dict[str, Any]:
    """The manifest fields the repository's configs are rendered from, as the spec states them (the conversion's
    manifest must agree: :func:`manifest_problems`)."""
    encoder = _encoder(spec)
    return {
        "family": str(spec.family),
        "task": str(encoder.task),
        "dtype": str(spec.weight_dtype),
        "max_seq_length": encoder.max_seq_length,
        "output_width": spec.output_width,
        **({"labels": list(encoder.labels)} if encoder.task is EncoderTask.CLASSIFY else {}),
        **(
            {"pooling": str(encoder.pooling), "normalize": encoder.normalize}
            if encoder.task is EncoderTask.EMBED
            else {}
        ),
    }


def manifest_problems(spec: ModelSpec, manifest: Mapping[str, Any]) -> list[str]:
    """Where a conversion's manifest differs from what ``spec`` says the model is (empty when they agree)."""
    return [
        f"{key}: the spec says {value!r}, the conversion {manifest.get(key)!r}"
        for key, value in expected_manifest(spec).items()
        if manifest.get(key) != value
    ]


def converted_bytes(spec: ModelSpec) -> int:
    """Bytes of ``model.onnx``'s weights: every parameter at the conversion's dtype (the graph holds each tensor
    once, in ``weight_dtype``; its few constants and the graph itself are a few kilobytes more)."""
    return spec.parameters * spec.weight_dtype.nbytes


def _encoder(spec: ModelSpec) -> EncoderSpec:
    if spec.encoder is None or spec.family not in ENGINE.families:
        raise UserError(f"model {spec.name!r} ({spec.family}) is not an encoder served by ONNX Runtime")
    return spec.encoder


def _converted(checkpoint_dir: Path | None) -> Path:
    from tritonft.encoder.convert import MANIFEST, OUTPUT_DIR

    if checkpoint_dir is None:
        raise UserError("an encoder's repository is written from its conversion: pass the OUT/onnx directory")
    if not (checkpoint_dir / MANIFEST).is_file() and (checkpoint_dir / OUTPUT_DIR / MANIFEST).is_file():
        return checkpoint_dir / OUTPUT_DIR
    return checkpoint_dir


class OnnxRuntime:
    """The :class:`tritonft.engines.base.ServingEngine` of Triton's ONNX Runtime backend."""

    name = "onnxruntime"
    families = frozenset({Family.BERT})
    model_types = MODEL_TYPES
    server_image = ServerImage.of_release(SERVER_DOCKERFILE, TRITON_VERSION, SERVER_REQUIREMENTS)

    def convert(self, request: ConvertRequest) -> ConvertOutcome:
        """``OUT/onnx/{model.onnx, manifest.json}``; ``request.options`` override what the checkpoint says
        (:data:`CONVERT_OPTIONS`)."""
        from tritonft.convert.model import load_config
        from tritonft.convert.sources import SourceHash
        from tritonft.encoder.convert import EncoderRequest, convert_encoder
        from tritonft.spec import Pooling

        config = load_config(request.input_dir)
        if config.get("model_type") not in MODEL_TYPES:
            raise UserError(
                f"--family bert contradicts config.json model_type = {config.get('model_type')!r}; "
                "drop --family or fix the input directory"
            )
        unknown = sorted(set(request.options) - set(CONVERT_OPTIONS))
        if unknown:
            raise UserError(f"unknown encoder conversion option(s) {unknown}; known: {list(CONVERT_OPTIONS)}")
        if request.tp != 1:
            raise UserError(f"--tp {request.tp}: encoders are not split across GPUs; drop --tp")
        options = request.options
        limit = options.get("max_seq_length")
        if limit is not None and limit < 2:
            raise UserError(f"--max-seq-length {limit} must be at least 2 ([CLS] and [SEP])")
        result = convert_encoder(
            EncoderRequest(
                input_dir=request.input_dir,
                output_dir=request.output_dir,
                dtype=request.dtype,
                task=EncoderTask(options["task"]) if options.get("task") else None,
                pooling=Pooling(options["pooling"]) if options.get("pooling") else None,
                normalize=options.get("normalize"),
                max_seq_length=limit,
                fsync=request.fsync,
                source_hash=SourceHash(request.source_hash),
                optimize=bool(options.get("optimize", False)),
            ),
            dict(config),
        )
        manifest = result.manifest
        summary = f"{manifest['task']}, {manifest['model']['size']} bytes"
        if result.skipped:
            line = f"up to date: {result.target} already holds this conversion ({summary}); nothing written"
        else:
            line = (
                f"converted bert {manifest['dtype']} -> {result.target}/model.onnx ({summary}, verified with "
                "ONNX Runtime)"
            )
        return ConvertOutcome(summary=line, notes=tuple(result.notes), skipped=result.skipped)

    def repository_files(self, spec: ModelSpec, model_root: str = "/models") -> dict[str, bytes]:
        """Every file except ``model.onnx``, ``tokenizer.json`` and the copy of the conversion's manifest (the
        configs are rendered from the spec, which the manifest must agree with when the repository is written).
        ``model_root`` is unused: the ONNX model is copied into the repository, not read from the store."""
        from tritonft.encoder.repo import PROVENANCE_FILE, EncoderNames, render_encoder_files

        files = render_encoder_files(serving_of(spec), expected_manifest(spec))
        del files[f"{EncoderNames.of(spec.name).onnx}/{PROVENANCE_FILE}"]
        return files

    def write_repository(
        self, spec: ModelSpec, out_dir: Path, sources: RepositorySources | None = None
    ) -> RenderedRepository:
        """Write the tokenizer, ONNX and ensemble models. ``sources.checkpoint_dir``: the conversion's output
        (``OUT`` or ``OUT/onnx``), whose manifest must describe the model ``spec`` does; ``sources.tokenizer_dir``:
        the checkpoint directory with ``tokenizer.json``. ``model_root``/``checkpoint_path`` are unused
        (``model.onnx`` is copied into the repository)."""
        from tritonft.encoder.convert import MANIFEST, read_manifest
        from tritonft.encoder.repo import write_encoder_repository

        _encoder(spec)
        sources = sources or RepositorySources()
        converted = _converted(sources.checkpoint_dir)
        tokenizer_dir = sources.tokenizer_dir
        if tokenizer_dir is None:
            raise UserError("an encoder's repository needs the checkpoint directory with tokenizer.json (--tokenizer)")
        problems = manifest_problems(spec, read_manifest(converted))
        if problems:
            raise UserError(f"{converted} is not the conversion of model {spec.name!r}; convert it again", problems)
        models = write_encoder_repository(
            serving_of(spec, cpu_stand_in=sources.cpu_stand_in), converted, tokenizer_dir, out_dir
        )
        files = sorted(
            str(path.relative_to(out_dir))
            for model in models
            for path in (out_dir / model).rglob("*")
            if path.is_file()
        )
        return RenderedRepository(
            root=out_dir,
            models=tuple(models),
            files=tuple(files),
            config_source=converted / MANIFEST,
            tokenizer=("tokenizer.json",),
        )

    def converted_bytes(self, spec: ModelSpec) -> int:
        return converted_bytes(spec)


ENGINE = OnnxRuntime()

__all__ = [
    "CONVERT_OPTIONS",
    "ENGINE",
    "MODEL_TYPES",
    "OnnxRuntime",
    "converted_bytes",
    "expected_manifest",
    "manifest_problems",
]
