"""Benchmark floor only (``overhead_ab.py --floor``), never shipped: a postprocessing model with no per-request
work. It answers every request with one precomputed text, so an ensemble built from it costs the Python-backend hops
and the ensemble scheduler and nothing of our code."""

from __future__ import annotations

from typing import Any

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args: dict[str, str]) -> None:
        self.text = np.array([[b"The quick brown fox jumps over the lazy dog."]], dtype=object)

    def execute(self, requests: list[Any]) -> list[Any]:
        return [
            pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("text_output", self.text)]) for _ in requests
        ]
