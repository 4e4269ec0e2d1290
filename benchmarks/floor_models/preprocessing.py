"""Benchmark floor only (``overhead_ab.py --floor``), never shipped: a preprocessing model with no per-request work.

It answers every request with the tensors the real model would give the benchmark prompt, computed once at load, so
an ensemble built from it costs the Python-backend hops and the ensemble scheduler and nothing of our code.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import triton_python_backend_utils as pb_utils
from tritonft_tokenization import (  # type: ignore[import-not-found]  # copied next to this file in the repository
    TokenizerSettings,
    load_tokenizer,
    preprocess,
)

PROMPT = "The quick brown fox jumps over the lazy dog."


class TritonPythonModel:
    def initialize(self, args: dict[str, str]) -> None:
        config = json.loads(args["model_config"])
        settings = TokenizerSettings.from_parameters(config.get("parameters", {}))
        tokenizer = load_tokenizer(Path(args["model_repository"]) / args["model_version"])
        self.outputs = preprocess(tokenizer, settings, {"text_input": np.array([[PROMPT.encode()]], dtype=object)})

    def execute(self, requests: list[Any]) -> list[Any]:
        return [
            pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor(k, v) for k, v in self.outputs.items()])
            for _ in requests
        ]
