"""The real Triton with the real vLLM engine that the vLLM tests share (``test_vllm_engine.py``,
``test_gateway_vllm.py``): one server per test session, started once by the ``vllm_triton`` fixture of this folder's
``conftest.py`` (a vLLM engine takes ~1-2 min to start on this machine's CPU, so each module starting its own cost
CI one start more).

It serves the stack's rendered ``backend: "vllm"`` repository (:func:`tritonft.engines.vllm.local.render`) of the
seeded random Llama and Qwen2 checkpoints (:data:`NAMES`, loaded at start) and of two models loaded only when a test
asks (explicit model control): :data:`BROKEN`, a Llama whose weights were cut short (a model that cannot load), and
:data:`LATE`, a copy of the Llama (a model that is still loading).
"""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

from tests.tritonft.engines.vllm.checkpoints import VARIANTS, write
from tritonft.engines.vllm import local
from tritonft.engines.vllm.rules import VllmOptions
from tritonft.local_triton import LocalTriton

MAX_MODEL_LEN = 256
OPTIONS: VllmOptions = replace(local.CPU_OPTIONS, max_model_len=MAX_MODEL_LEN)
"""The engine arguments every model of the shared server is rendered with."""
NAMES = [v.name for v in VARIANTS]
"""The seeded checkpoints the goldens were made from, loaded when the server starts."""
LLAMA = NAMES[0]
BROKEN = "broken-llama"
"""The Llama with its ``model.safetensors`` cut in half (a download cut short): loading it fails in vLLM's words."""
LATE = "late-llama"
"""A copy of the Llama, loaded only when a test asks: a model that is still loading."""
VICTIM = "victim-llama"
"""A copy of the Llama whose engine a test kills (loaded only by that test; a model whose stub died is never unloaded:
Triton waits on the dead stub)."""


def write_checkpoints(root: Path) -> dict[str, Path]:
    """Every checkpoint the shared server's repository names, under ``root``."""
    made = {v.name: write(v, root / v.name) for v in VARIANTS}
    broken = write(VARIANTS[0], root / BROKEN)
    weights = (broken / "model.safetensors").read_bytes()
    (broken / "model.safetensors").write_bytes(weights[: len(weights) // 2])
    late = root / LATE
    shutil.copytree(made[LLAMA], late)
    victim = root / VICTIM
    shutil.copytree(made[LLAMA], victim)
    return {**made, BROKEN: broken, LATE: late, VICTIM: victim}


def server(checkpoints: dict[str, Path], work: Path) -> LocalTriton:
    """The server (not started): the repository of every checkpoint, :data:`NAMES` loaded at start."""
    repository = local.render(checkpoints, work / "repository", OPTIONS)
    return local.server(
        repository,
        work / "tritonserver.log",
        extra_args=["--model-control-mode=explicit", *(f"--load-model={name}" for name in NAMES)],
    )
