"""Client side of the real-Triton tests: text requests to an ensemble over HTTP or gRPC, model statistics."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.grpc import model_config_pb2

from tritonft.local_triton import LocalTriton
from tritonft.standin import read_config

PROTOCOLS = ("http", "grpc")
NUMPY_OF = {
    "BYTES": np.object_,
    "UINT32": np.uint32,
    "UINT64": np.uint64,
    "FP32": np.float32,
    "INT32": np.int32,
    "BOOL": np.bool_,
}
V2_OF = {
    "TYPE_STRING": "BYTES",
    "TYPE_UINT32": "UINT32",
    "TYPE_UINT64": "UINT64",
    "TYPE_FP32": "FP32",
    "TYPE_BOOL": "BOOL",
}


def client(server: LocalTriton, protocol: str) -> Any:
    if protocol == "http":
        return httpclient.InferenceServerClient(server.http_url, concurrency=4)
    return grpcclient.InferenceServerClient(server.grpc_url)


def tensor(protocol: str, name: str, datatype: str, rows: list[Any]) -> Any:
    module = httpclient if protocol == "http" else grpcclient
    values = [[v.encode() if isinstance(v, str) else v] for v in rows]
    array: np.ndarray = np.array(values, dtype=NUMPY_OF[datatype])
    infer_input = module.InferInput(name, list(array.shape), datatype)
    infer_input.set_data_from_numpy(array)
    return infer_input


def ask(
    server: LocalTriton, model: str, prompts: list[str], protocol: str = "http", **optional: tuple[str, list[Any]]
) -> list[list[str]]:
    """Send ``prompts`` (one per row) and ``optional`` inputs (name -> (V2 datatype, one value per row)) to the
    ensemble ``model``; the answers as text, one list (per beam) per row."""
    inputs = [tensor(protocol, "text_input", "BYTES", list(prompts))]
    inputs += [tensor(protocol, name, datatype, values) for name, (datatype, values) in optional.items()]
    result = client(server, protocol).infer(model, inputs)
    return [[value.decode() for value in row] for row in result.as_numpy("text_output")]


def optional_inputs(config: model_config_pb2.ModelConfig) -> dict[str, str]:
    """A model's optional inputs: name -> V2 datatype."""
    return {t.name: V2_OF[model_config_pb2.DataType.Name(t.data_type)] for t in config.input if t.optional}


def ensemble_routes(model_dir: Path) -> dict[str, tuple[str, str]]:
    """Ensemble input -> (step model, that model's input name) for every ensemble input."""
    config = read_config(model_dir / "config.pbtxt")
    routes: dict[str, tuple[str, str]] = {}
    for step in config.ensemble_scheduling.step:
        for key, value in step.input_map.items():
            if value in {t.name for t in config.input}:
                routes[value] = (step.model_name, key)
    return routes


def execution_stats(server: LocalTriton, model: str, settle_s: float = 0.3) -> tuple[int, int]:
    """(inference_count, execution_count) of ``model``: rows inferred and model executions (batches) run.

    Triton may count an execution after its response has reached the client, so the counts are read until two
    reads ``settle_s`` apart agree (at most 20 reads): an earlier test's last request is then counted.
    """
    client = httpclient.InferenceServerClient(server.http_url)

    def read() -> tuple[int, int]:
        entry = client.get_inference_statistics(model)["model_stats"][0]
        return int(entry.get("inference_count", 0)), int(entry.get("execution_count", 0))

    last = read()
    for _ in range(20):
        time.sleep(settle_s)
        now = read()
        if now == last:
            break
        last = now
    return last
