"""The encoder's tokenizer model (copied as ``<NAME>-tokenizer/1/model.py`` by :mod:`tritonft.encoder.repo`).

Runs in Triton's Python backend with the server image's requirements. :mod:`tritonft.encoder.tokenize` is copied
next to it (``1/tritonft/``) with the checkpoint's ``tokenizer.json``. Requests the dynamic batcher hands over
together are tokenized in one call and padded to one width, so the ONNX model after it batches them as well; a
bad request (empty text, over ``max_seq_length`` tokens, not UTF-8) gets its own error and the others are answered.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import triton_python_backend_utils as pb_utils

from tritonft.encoder.tokenize import EncoderInputError, EncoderTokenizer, decode_texts

TEXT_INPUT = "text_input"


class TritonPythonModel:
    def initialize(self, args: dict[str, str]) -> None:
        config = json.loads(args["model_config"])
        parameters = {k: v.get("string_value", "") for k, v in config.get("parameters", {}).items()}
        version_dir = Path(args["model_repository"]) / args["model_version"]
        self.tokenizer = EncoderTokenizer(version_dir / "tokenizer.json", int(parameters["max_seq_length"]))
        self.output_dtypes = {o["name"]: pb_utils.triton_string_to_numpy(o["data_type"]) for o in config["output"]}

    def execute(self, requests: list[Any]) -> list[Any]:
        texts: list[list[str] | EncoderInputError] = []
        for request in requests:
            try:
                texts.append(decode_texts(pb_utils.get_input_tensor_by_name(request, TEXT_INPUT).as_numpy()))
            except EncoderInputError as exc:
                texts.append(exc)
        good = [t for t in texts if not isinstance(t, EncoderInputError)]
        encoded = iter(self.tokenizer.encode_requests(good))
        responses = []
        for item in texts:
            result = item if isinstance(item, EncoderInputError) else next(encoded)
            if isinstance(result, EncoderInputError):
                error = pb_utils.TritonError(str(result))
                responses.append(pb_utils.InferenceResponse(output_tensors=[], error=error))
                continue
            tensors = [
                pb_utils.Tensor(name, array.astype(self.output_dtypes[name], copy=False))
                for name, array in result.items()
                if name in self.output_dtypes
            ]
            responses.append(pb_utils.InferenceResponse(output_tensors=tensors))
        return responses
