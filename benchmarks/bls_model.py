"""Benchmark variant only (``triton_bench.py --bls``), never rendered or shipped: one Python-backend model that does
the ensemble's three steps itself, preprocessing, a BLS call to the model step, postprocessing, to measure whether
one Python-backend hop fewer (and no ensemble scheduler) beats the ensemble on this Triton.

Unary only (no streaming variant). Runs inside Triton's stub next to ``tritonft_tokenization.py`` and the tokenizer
files, as the preprocessing model does; the config parameter ``bls_step`` names the model step.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import triton_python_backend_utils as pb_utils
from tritonft_tokenization import (  # type: ignore[import-not-found]  # copied next to this file in the repository
    TokenizerSettings,
    load_tokenizer,
    postprocess_requests,
    preprocess_requests,
)

STEP_OUTPUTS = ["output_ids", "sequence_length"]
STEP_PARAMETERS = ("runtime_top_k", "runtime_top_p", "temperature", "repetition_penalty", "len_penalty")


class TritonPythonModel:
    def initialize(self, args: dict[str, str]) -> None:
        config = json.loads(args["model_config"])
        parameters = config.get("parameters", {})
        self.settings = TokenizerSettings.from_parameters(parameters)
        self.step = parameters["bls_step"]["string_value"]
        self.tokenizer = load_tokenizer(Path(args["model_repository"]) / args["model_version"])

    def _answer(self, request: Any) -> Any:
        inputs = {tensor.name(): tensor for tensor in request.inputs()}
        [pre] = preprocess_requests(
            self.tokenizer, self.settings, [{name: tensor.as_numpy() for name, tensor in inputs.items()}]
        )
        if isinstance(pre, ValueError):
            return pb_utils.InferenceResponse(output_tensors=[], error=pb_utils.TritonError(str(pre)))
        step_inputs = [pb_utils.Tensor(name, array) for name, array in pre.items()]
        step_inputs += [inputs[name] for name in STEP_PARAMETERS if name in inputs]
        step = pb_utils.InferenceRequest(
            model_name=self.step, inputs=step_inputs, requested_output_names=STEP_OUTPUTS
        ).exec()
        if step.has_error():
            return pb_utils.InferenceResponse(output_tensors=[], error=step.error())
        outputs = {tensor.name(): tensor.as_numpy() for tensor in step.output_tensors()}
        outputs["input_lengths"] = pre["input_lengths"]
        [texts] = postprocess_requests(self.tokenizer, self.settings, [outputs])
        if isinstance(texts, ValueError):
            return pb_utils.InferenceResponse(output_tensors=[], error=pb_utils.TritonError(str(texts)))
        return pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("text_output", texts)])

    def execute(self, requests: list[Any]) -> list[Any]:
        return [self._answer(request) for request in requests]
