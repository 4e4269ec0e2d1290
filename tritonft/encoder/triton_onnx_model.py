"""The ONNX step run by ONNX Runtime inside Triton's Python backend (``<NAME>-onnx/1/model.py``).

Production serves ``<NAME>-onnx`` with Triton's ONNX Runtime backend (``platform: onnxruntime_onnx``). A Triton
without that backend (this project's CPU test server has the Python backend only) serves the *same* directory —
same ``1/model.onnx``, same inputs, outputs, batching — through this model, which runs the file with the
``onnxruntime`` Python package (the library the backend embeds) on the CPU. Requests handed over together whose
tensors have the same width (the tokenizer pads each batch to one width) run as one ONNX Runtime call.

Parameters (``config.pbtxt``): ``tritonft_engine: onnxruntime-python`` (marks the stand-in),
``intra_op_threads`` (ONNX Runtime's intra-op thread count; ``0`` = one per core), ``allow_spinning`` (``1`` lets
ONNX Runtime's idle workers spin; default ``0``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args: dict[str, str]) -> None:
        config = json.loads(args["model_config"])
        parameters = {k: v.get("string_value", "") for k, v in config.get("parameters", {}).items()}
        path = Path(args["model_repository"]) / args["model_version"] / "model.onnx"
        options = ort.SessionOptions()
        options.intra_op_num_threads = int(parameters.get("intra_op_threads", "0") or 0)
        # ONNX Runtime's workers spin between ops by default: beside Triton, the tokenizer model's stub and other
        # models on the same cores, spinning takes the CPU the next request needs.
        spinning = parameters.get("allow_spinning", "0") or "0"
        options.add_session_config_entry("session.intra_op.allow_spinning", spinning)
        options.add_session_config_entry("session.inter_op.allow_spinning", spinning)
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.inputs = [i.name for i in self.session.get_inputs()]
        self.outputs = [o["name"] for o in config["output"]]

    def execute(self, requests: list[Any]) -> list[Any]:
        feeds = [
            {name: pb_utils.get_input_tensor_by_name(request, name).as_numpy() for name in self.inputs}
            for request in requests
        ]
        answers: list[list[Any] | Exception] = [[] for _ in requests]
        groups: dict[tuple[int, ...], list[int]] = {}
        for index, feed in enumerate(feeds):
            groups.setdefault(tuple(feed[self.inputs[0]].shape[1:]), []).append(index)
        for members in groups.values():
            try:
                batch = {name: np.concatenate([feeds[i][name] for i in members]) for name in self.inputs}
                results = self.session.run(self.outputs, batch)
            except Exception as exc:  # an input ONNX Runtime refuses fails its requests only
                for i in members:
                    answers[i] = exc
                continue
            start = 0
            for i in members:
                rows = feeds[i][self.inputs[0]].shape[0]
                answers[i] = [
                    pb_utils.Tensor(name, np.ascontiguousarray(result[start : start + rows]))
                    for name, result in zip(self.outputs, results, strict=True)
                ]
                start += rows
        responses = []
        for answer in answers:
            if isinstance(answer, Exception):
                error = pb_utils.TritonError(f"ONNX Runtime refused the input: {answer}")
                responses.append(pb_utils.InferenceResponse(output_tensors=[], error=error))
            else:
                responses.append(pb_utils.InferenceResponse(output_tensors=answer))
        return responses
