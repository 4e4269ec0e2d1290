"""Triton Python-backend glue of the ``postprocessing`` model: FasterTransformer output ids -> text (BYTES).

All logic lives in ``tritonft_tokenization`` (copied next to this file by ``tritonft.repo``); this file only moves
tensors between Triton and those functions. The tokenizer files sit in this version directory.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import triton_python_backend_utils as pb_utils
from tritonft_tokenization import TokenizerSettings, load_tokenizer, postprocess


class TritonPythonModel:
    def initialize(self, args: dict[str, str]) -> None:
        config = json.loads(args["model_config"])
        self.settings = TokenizerSettings.from_parameters(config.get("parameters", {}))
        self.tokenizer = load_tokenizer(Path(args["model_repository"]) / args["model_version"])

    def execute(self, requests: list[Any]) -> list[Any]:
        responses = []
        for request in requests:
            output_ids = pb_utils.get_input_tensor_by_name(request, "output_ids")
            sequence_length = pb_utils.get_input_tensor_by_name(request, "sequence_length")
            input_lengths = pb_utils.get_input_tensor_by_name(request, "input_lengths")
            try:
                if output_ids is None or sequence_length is None:
                    raise ValueError("postprocessing needs both output_ids and sequence_length")
                texts = postprocess(
                    self.tokenizer,
                    self.settings,
                    output_ids.as_numpy(),
                    sequence_length.as_numpy(),
                    input_lengths.as_numpy() if input_lengths is not None else None,
                )
            except ValueError as exc:
                responses.append(pb_utils.InferenceResponse(output_tensors=[], error=pb_utils.TritonError(str(exc))))
                continue
            responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("text_output", texts)]))
        return responses
