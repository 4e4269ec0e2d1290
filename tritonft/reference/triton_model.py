"""The reference engine's Python-backend model (copied as ``<NAME>-ft/1/model.py`` by ``tritonft.repo.engine``).

Runs inside Triton's Python-backend stub with the server image's requirements (numpy 1.x; Python 3.10 in the
image). ``tritonft.repo.engine`` copies the numpy-only part of the ``tritonft`` package next to this file
(``1/tritonft/``: ``spec``, ``errors``, ``reference``), and the backend puts the version directory on
``sys.path``, so nothing needs installing in the image. The model loads the converted weights from the FT
parameter ``model_checkpoint_path`` (as FT's backend does; a repository served from another place than it was
rendered for is read from its own ``1/<TP>-gpu``) and answers with the FT config's exact inputs and outputs
(:mod:`tritonft.reference.serving`). In decoupled (streaming) mode the answer is generated first, then sent as one
response per generated step, as FT's streaming sends them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import triton_python_backend_utils as pb_utils

from tritonft.reference import build_model, generate, load_checkpoint
from tritonft.reference.serving import (
    local_checkpoint,
    output_tensors,
    requests_from_inputs,
    streamed_steps,
    wants_log_probs,
)


class TritonPythonModel:
    def initialize(self, args: dict[str, str]) -> None:
        config = json.loads(args["model_config"])
        parameters = {k: v.get("string_value", "") for k, v in config.get("parameters", {}).items()}
        model_dir = Path(args["model_repository"])
        checkpoint = load_checkpoint(local_checkpoint(parameters["model_checkpoint_path"], model_dir))
        tp = int(parameters.get("tensor_para_size", "1"))
        if checkpoint.tp != tp:
            raise ValueError(
                f"{config['name']}: tensor_para_size is {tp} but {checkpoint.directory} holds a TP {checkpoint.tp} "
                "conversion; re-render the repository for the converted TP"
            )
        self.model = build_model(checkpoint)
        self.inputs = [i["name"] for i in config["input"]]
        self.output_dtypes = {o["name"]: pb_utils.triton_string_to_numpy(o["data_type"]) for o in config["output"]}
        self.decoupled = pb_utils.using_decoupled_model_transaction_policy(config)

    def _answer(self, request: Any) -> list[list[Any]]:
        """The output tensors of each response to send for ``request`` (one list; one per step when streaming)."""
        inputs = {}
        for name in self.inputs:
            tensor = pb_utils.get_input_tensor_by_name(request, name)
            if tensor is not None:
                inputs[name] = tensor.as_numpy()
        family = self.model.family
        rows = requests_from_inputs(inputs, family, self.model.vocab_size)
        result = generate(self.model, rows)
        log_probs = wants_log_probs(inputs)
        if not self.decoupled:
            return [self._tensors(output_tensors(result, rows, family, log_probs))]
        end_ids = [self.model.end_id if r.end_id is None else r.end_id for r in rows]
        return [
            self._tensors(output_tensors(step, rows, family, log_probs))
            for step in streamed_steps(result, rows, family, end_ids)
        ]

    def _tensors(self, arrays: dict[str, np.ndarray[Any, Any]]) -> list[Any]:
        """The outputs this model's config declares (GPT-J's has no ``response_input_lengths``), in its dtypes."""
        return [
            pb_utils.Tensor(name, array.astype(self.output_dtypes[name]))
            for name, array in arrays.items()
            if name in self.output_dtypes
        ]

    def execute(self, requests: list[Any]) -> list[Any] | None:
        responses = []
        for request in requests:
            try:
                answers = self._answer(request)
            except ValueError as exc:  # a bad request gets its own error; the others are answered
                error = pb_utils.TritonError(str(exc))
                answers, failure = [], pb_utils.InferenceResponse(output_tensors=[], error=error)
            else:
                failure = None
            if not self.decoupled:
                responses.append(failure or pb_utils.InferenceResponse(output_tensors=answers[0]))
                continue
            sender = request.get_response_sender()
            for tensors in answers:
                sender.send(pb_utils.InferenceResponse(output_tensors=tensors))
            if failure is not None:
                sender.send(failure, flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            else:
                sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None if self.decoupled else responses
