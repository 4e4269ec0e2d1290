"""Benchmark variant only (``triton_bench.py --bls``), never rendered or shipped: one Python-backend model that does
the ensemble's three steps itself, preprocessing, a BLS call to the model step, postprocessing, to measure whether
one Python-backend hop fewer (and no ensemble scheduler) beats the ensemble on this Triton.

The requests of one execution (its dynamic batcher merges concurrent ones) are tokenized together, sent to the step
concurrently (``async_exec``, so the step's own batcher can merge them; a lone request uses the blocking ``exec``,
which costs less) and decoded together. Unary only (no streaming variant). Runs inside Triton's stub next to
``tritonft_tokenization.py`` and the tokenizer files, as the preprocessing model does; the config parameter
``bls_step`` names the model step.
"""

from __future__ import annotations

import asyncio
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
STEP_PARAMETERS = (
    "runtime_top_k",
    "runtime_top_p",
    "temperature",
    "repetition_penalty",
    "len_penalty",
    "random_seed",
    "beam_width",
)


class TritonPythonModel:
    def initialize(self, args: dict[str, str]) -> None:
        config = json.loads(args["model_config"])
        parameters = config.get("parameters", {})
        self.settings = TokenizerSettings.from_parameters(parameters)
        self.step = parameters["bls_step"]["string_value"]
        self.tokenizer = load_tokenizer(Path(args["model_repository"]) / args["model_version"])

    def _step_request(self, pre: dict[str, Any], inputs: dict[str, Any]) -> Any:
        tensors = [pb_utils.Tensor(name, array) for name, array in pre.items()]
        tensors += [inputs[name] for name in STEP_PARAMETERS if name in inputs]
        return pb_utils.InferenceRequest(model_name=self.step, inputs=tensors, requested_output_names=STEP_OUTPUTS)

    async def execute(self, requests: list[Any]) -> list[Any]:
        inputs = [{tensor.name(): tensor for tensor in request.inputs()} for request in requests]
        arrays = [{name: tensor.as_numpy() for name, tensor in one.items()} for one in inputs]
        pres = preprocess_requests(self.tokenizer, self.settings, arrays)
        calls = [self._step_request(pre, one) for pre, one in zip(pres, inputs, strict=True) if isinstance(pre, dict)]
        if len(calls) == 1:
            answers = iter([calls[0].exec()])
        else:
            answers = iter(await asyncio.gather(*(call.async_exec() for call in calls)))
        steps: list[Any] = []  # per request: the step's outputs, or the error to answer
        for pre in pres:
            if isinstance(pre, ValueError):
                steps.append(pb_utils.TritonError(str(pre)))
                continue
            answer = next(answers)
            if answer.has_error():
                steps.append(answer.error())
                continue
            outputs = {tensor.name(): tensor.as_numpy() for tensor in answer.output_tensors()}
            steps.append({**outputs, "input_lengths": pre["input_lengths"]})
        texts = iter(postprocess_requests(self.tokenizer, self.settings, [s for s in steps if isinstance(s, dict)]))
        responses = []
        for step in steps:
            text = next(texts) if isinstance(step, dict) else step
            if isinstance(text, ValueError):
                text = pb_utils.TritonError(str(text))
            if isinstance(text, pb_utils.TritonError):
                responses.append(pb_utils.InferenceResponse(output_tensors=[], error=text))
            else:
                responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("text_output", text)]))
        return responses
