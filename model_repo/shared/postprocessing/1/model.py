"""Triton Python-backend glue of the ``postprocessing`` model: FasterTransformer output ids -> text (BYTES),
token counts and, when asked, each token's text.

All logic lives in ``tritonft_tokenization`` (copied next to this file by ``tritonft.repo``); this file only moves
tensors between Triton and those functions. The tokenizer files sit in this version directory.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import triton_python_backend_utils as pb_utils
from tritonft_tokenization import TokenizerSettings, load_tokenizer, postprocess_requests


class TritonPythonModel:
    def initialize(self, args: dict[str, str]) -> None:
        config = json.loads(args["model_config"])
        self.settings = TokenizerSettings.from_parameters(config.get("parameters", {}))
        self.tokenizer = load_tokenizer(Path(args["model_repository"]) / args["model_version"])

    def execute(self, requests: list[Any]) -> list[Any]:
        # The dynamic batcher may hand over several requests: they are decoded in one pass.
        # Absent optional inputs are simply not among request.inputs().
        batch = [{tensor.name(): tensor.as_numpy() for tensor in request.inputs()} for request in requests]
        responses = []
        for outputs in postprocess_requests(self.tokenizer, self.settings, batch):
            if isinstance(outputs, ValueError):
                error = pb_utils.TritonError(str(outputs))
                responses.append(pb_utils.InferenceResponse(output_tensors=[], error=error))
                continue
            tensors = [pb_utils.Tensor(name, array) for name, array in outputs.items()]
            responses.append(pb_utils.InferenceResponse(output_tensors=tensors))
        return responses
