"""The seam between the pipeline and the software that runs a model's step in Triton (an *engine*).

Everything that depends on the engine sits behind :class:`ServingEngine`: which families it serves and how a
checkpoint's ``config.json`` names them, the conversion of a Hugging Face checkpoint into the engine's files, the
rendered Triton model repository (with the engine's step stood in for on CPU where the engine needs a GPU), the
bytes the converted model takes on the model store, and the server image that carries the engine's backend. The
callers (``tritonft convert``, ``tritonft repo``, the conversion Job, ``tritonft synth``, the stack's sizing and
image build) ask :func:`tritonft.engines.engine_for` for the engine of a model's family and never name one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from tritonft.spec import Family, ModelSpec, WeightDType


@dataclass(frozen=True)
class ServerImage:
    """How the Triton server image that carries an engine's backend is built from this repository."""

    dockerfile: str
    """The Dockerfile, relative to the repository root."""
    inputs: tuple[str, ...]
    """Every repository path the Dockerfile copies: their content decides the image's tag."""
    build_args: Mapping[str, str]
    """The default build arguments (pinned versions); a stack may override them."""

    @classmethod
    def of_release(cls, dockerfile: str, triton_version: str, *inputs: str) -> ServerImage:
        """An image on NGC's Triton release ``triton_version`` (the ``TRITON_VERSION`` build argument) built from
        ``dockerfile``, which also copies ``inputs``."""
        return cls(dockerfile=dockerfile, inputs=(dockerfile, *inputs), build_args={"TRITON_VERSION": triton_version})


@dataclass(frozen=True)
class ConvertRequest:
    """What ``tritonft convert`` asks of an engine (the command's options, engine-neutral)."""

    input_dir: Path
    output_dir: Path
    tp: int
    dtype: WeightDType
    family: Family | None = None
    """None: from ``config.json`` ``model_type``."""
    workers: int = 2
    fsync: bool = False
    source_hash: str = "sha256"
    options: Mapping[str, Any] = field(default_factory=dict)
    """The engine's own options, by name (ONNX Runtime: ``task``, ``pooling``, ``normalize``, ``max_seq_length``,
    ``optimize``; an unset one is absent). An engine refuses options it does not know."""


@dataclass(frozen=True)
class ConvertOutcome:
    """What a conversion did, in words for the command's output."""

    summary: str
    """One line: what was converted where (or that the target was already up to date)."""
    notes: tuple[str, ...] = ()
    skipped: bool = False


@dataclass(frozen=True)
class RepositorySources:
    """What ``tritonft repo`` hands an engine to write a model's repository from (the command's options); an engine
    reads the fields it needs and names a missing one."""

    checkpoint_dir: Path | None = None
    """The conversion's output (FT: ``OUT/<TP>-gpu``; ONNX Runtime: ``OUT`` or ``OUT/onnx``)."""
    tokenizer_dir: Path | None = None
    """The checkpoint directory holding the tokenizer files."""
    model_root: str = "/models"
    """Where the model store is mounted in Triton's pod."""
    checkpoint_path: str | None = None
    """The checkpoint's path as Triton's pod sees it (else derived from ``model_root``)."""
    cpu_stand_in: bool = False
    """The engine's step runs in a Python-backend model on CPU with the same config and I/O (for a machine without
    the engine's backend or GPU: tests, the quick start)."""
    judge_reference: Path | None = None
    """The judge's reference of the revision (``tritonft reference``), carried by the served model (the generators:
    FT's ensemble, a vLLM model's ``config.pbtxt``)."""


@dataclass(frozen=True)
class RenderedRepository:
    """A Triton model repository written for one model."""

    root: Path
    models: tuple[str, ...]
    """The repository's model directories in the order they were written (the ensemble last)."""
    files: tuple[str, ...]
    config_source: Path | None
    """The converted file the repository was checked against (FT: ``config.ini``), if any."""
    tokenizer: tuple[str, ...]


Progress = Callable[[int, int], object]


class ServingEngine(Protocol):
    """One engine: the families it serves and everything the pipeline needs it to do for them."""

    @property
    def name(self) -> str:
        """Short name, e.g. ``fastertransformer``."""
        ...

    @property
    def families(self) -> frozenset[Family]:
        """The model families this engine serves (a family belongs to exactly one engine)."""
        ...

    @property
    def model_types(self) -> Mapping[str, Family]:
        """``config.json`` ``model_type`` values this engine converts, and the family each one is."""
        ...

    @property
    def server_image(self) -> ServerImage:
        """The server image that carries the engine's Triton backend."""
        ...

    def convert(self, request: ConvertRequest) -> ConvertOutcome:
        """Convert ``request.input_dir`` into ``request.output_dir``: atomic, idempotent and verified."""
        ...

    def repository_files(self, spec: ModelSpec, model_root: str = "/models") -> dict[str, bytes]:
        """Every file of ``spec``'s Triton repository except weights and tokenizer files, by relative path (pure:
        what ``tritonft synth`` shows and the probe reads the served contract from)."""
        ...

    def write_repository(
        self, spec: ModelSpec, out_dir: Path, sources: RepositorySources | None = None
    ) -> RenderedRepository:
        """Render and write ``spec``'s Triton model repository into ``out_dir`` (atomic per model) from
        ``sources`` (:class:`RepositorySources`, None: its defaults; what each engine reads of it, it says)."""
        ...

    def converted_bytes(self, spec: ModelSpec) -> int:
        """Bytes the converted model occupies on the model store."""
        ...
