"""Turn a rendered FasterTransformer model into a Python-backend stand-in Triton can load here (no FT backend, no GPU).

The rendered ``config.pbtxt`` is kept as it is (inputs, outputs, dtypes, reshapes, batching, ragged input and its
``batch_input``, decoupled policy, parameters) except for what cannot run here: ``backend`` becomes ``python`` and
GPU instance groups become CPU ones. ``1/model.py`` is this package's ``model.py``. So every change to the FT
template is loaded and validated by Triton itself; only the computation is an echo (see ``model.py``).

The real answers come from the reference engine (``tritonft.repo.engine``); this echo is kept where a model step
must be made to fail, sleep or record what it receives (fault injection, the ensemble-wiring tests) and for the
benchmarks that measure Triton itself. Behaviour is injectable: :func:`set_behaviour` writes ``standin.json``
(``fail`` / ``sleep_s`` / ``record``), read by the model on its next batch.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from google.protobuf import text_format  # type: ignore[import-untyped]  # no types-protobuf in the lock
from tritonclient.grpc import model_config_pb2

MODEL_SOURCE = Path(__file__).with_name("model.py")
"""The Python-backend model (runs inside Triton's stub; never imported here)."""
END_ID_PARAMETER = "standin_end_id"
BEHAVIOUR_FILE = "standin.json"
RECORD_FILE = "standin-received.jsonl"
GENERATION_PARAMETER = "standin_generation"
"""Read by the model from its directory (``model.BEHAVIOUR_FILE``: the model file is copied alone)."""


def read_config(path: Path) -> model_config_pb2.ModelConfig:
    return text_format.Parse(path.read_text(encoding="utf-8"), model_config_pb2.ModelConfig())


def _end_id(model_dir: Path) -> int | None:
    """The end id the rendered postprocessing model of the same repository uses (FT reads it from config.ini)."""
    for config_path in sorted(model_dir.parent.glob("*/config.pbtxt")):
        config = read_config(config_path)
        if config.backend == "python" and "end_id" in config.parameters:
            ensemble_name = config.name.removesuffix("-postprocessing")
            if config.name.endswith("-postprocessing") and model_dir.name.startswith(ensemble_name):
                return int(config.parameters["end_id"].string_value)
    return None


def make_standin(
    model_dir: Path, *, end_id: int | None = None, generation: str = "echo"
) -> model_config_pb2.ModelConfig:
    """Rewrite the rendered FT model in ``model_dir`` (its ``config.pbtxt``) into the stand-in, in place.

    ``end_id`` defaults to the one the repository's postprocessing model was rendered with. ``generation``:
    ``echo`` (the prompt's tokens) or ``reverse`` (them reversed). Returns the new config.
    """
    config = read_config(model_dir / "config.pbtxt")
    if config.backend != "fastertransformer":
        raise ValueError(f"{model_dir} is not a rendered FasterTransformer model (backend {config.backend!r})")
    config.backend = "python"
    for group in config.instance_group:
        if group.kind == model_config_pb2.ModelInstanceGroup.KIND_GPU:
            group.kind = model_config_pb2.ModelInstanceGroup.KIND_CPU
            del group.gpus[:]
    chosen = end_id if end_id is not None else _end_id(model_dir)
    if chosen is not None:
        config.parameters[END_ID_PARAMETER].string_value = str(chosen)
    config.parameters[GENERATION_PARAMETER].string_value = generation
    (model_dir / "config.pbtxt").write_text(text_format.MessageToString(config), encoding="utf-8")
    version = model_dir / "1"
    version.mkdir(exist_ok=True)
    shutil.copyfile(MODEL_SOURCE, version / "model.py")
    return config


def standin_all(repository: Path, generation: str = "echo") -> list[str]:
    """Replace every FT model of ``repository`` by the stand-in; returns their names."""
    names = []
    for config_path in sorted(repository.glob("*/config.pbtxt")):
        if read_config(config_path).backend == "fastertransformer":
            make_standin(config_path.parent, generation=generation)
            names.append(config_path.parent.name)
    return names


def set_behaviour(
    model_dir: Path,
    *,
    fail: str | None = None,
    sleep_s: float | None = None,
    record: bool = False,
    token_interval_s: float | None = None,
) -> None:
    """Make the stand-in in ``model_dir`` fail every request with ``fail``, sleep ``sleep_s`` per batch, record
    what it receives (:func:`received`) and/or, decoupled, pause ``token_interval_s`` before each token; with
    none, restore the normal behaviour."""
    behaviour: dict[str, object] = {"record": True} if record else {}
    if fail is not None:
        behaviour["fail"] = fail
    if sleep_s is not None:
        behaviour["sleep_s"] = sleep_s
    if token_interval_s is not None:
        behaviour["token_interval_s"] = token_interval_s
    path = model_dir / BEHAVIOUR_FILE
    if behaviour:
        path.write_text(json.dumps(behaviour), encoding="utf-8")
    else:
        path.unlink(missing_ok=True)


def received(model_dir: Path) -> list[dict[str, tuple[str, list[int], Any]]]:
    """What the stand-in recorded, one entry per request: input name -> (numpy dtype, shape, values)."""
    path = model_dir / RECORD_FILE
    if not path.exists():
        return []
    return [
        {name: (dtype, shape, values) for name, (dtype, shape, values) in json.loads(line).items()}
        for line in path.read_text(encoding="utf-8").splitlines()
    ]
