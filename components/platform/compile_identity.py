"""What a server image compiles with, as one digest the plan knows before any build (pure but for reading files).

The vLLM pods' compile cache is keyed by it (``tritonft.engines.vllm.compile_cache.cache_key``), not by the pushed
image's digest: the builds are not reproducible (every CI run pushes a new digest for the same base and files), so a
key on the digest started every deploy cold and left a directory behind on the store each time. What decides the
compiled code is NGC's base image (its vLLM, torch, Triton and CUDA) and what the project's Dockerfile adds to it:
the base as the Dockerfile pulls it (``repository:tag``, with the digest the stack's ``baseImageDigests`` pins it by,
as the build uses it) and the bytes of the Dockerfile and of every file it copies (``ServerImage.inputs``).

A prebuilt image (``engineImages``, what CI promotes) is taken to be built from this repository's Dockerfile, as
CI's are; inside one key vLLM's own hashes still keep apart what another vLLM or torch would compile.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path

from components.platform.base_images import dockerfile_bases, pinned_base_args
from tritonft.engines.base import ServerImage


def compile_identity(bases: tuple[str, ...], files: Mapping[str, bytes]) -> str:
    """A digest of the base images ``bases`` (references as pulled) and the build's ``files`` (path -> bytes)."""
    if not bases:
        raise ValueError("a server image's compile identity needs the base image it is built on")
    material = {
        "bases": list(bases),
        "files": {path: hashlib.sha256(data).hexdigest() for path, data in sorted(files.items())},
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()


def image_compile_identity(root: Path, image: ServerImage, base_digests: Mapping[str, str]) -> str:
    """:func:`compile_identity` of ``image`` as built from the repository at ``root`` with the stack's
    ``base_digests``."""
    text = (root / image.dockerfile).read_text()
    bases = dockerfile_bases(text, image.build_args)
    pins = pinned_base_args(bases, base_digests)
    pulled = tuple(pins.get(base.arg, base.ref) if base.arg else base.ref for base in bases)
    return compile_identity(pulled, {path: (root / path).read_bytes() for path in image.inputs})
