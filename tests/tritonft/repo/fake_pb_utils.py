"""A minimal stand-in for Triton's ``triton_python_backend_utils``: only what the rendered model.py files call.

Semantics follow the Python backend: ``Tensor(name, numpy_array)`` with ``name()`` and ``as_numpy()``,
``InferenceRequest.inputs()`` and ``get_input_tensor_by_name`` (``None`` for an absent optional input),
``InferenceResponse(output_tensors, error=None)``, ``TritonError(message)`` and
``triton_string_to_numpy("TYPE_UINT32")``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

_NUMPY = {
    "TYPE_BOOL": np.bool_,
    "TYPE_UINT32": np.uint32,
    "TYPE_UINT64": np.uint64,
    "TYPE_INT32": np.int32,
    "TYPE_INT64": np.int64,
    "TYPE_FP16": np.float16,
    "TYPE_FP32": np.float32,
    "TYPE_STRING": np.object_,
}


class Tensor:
    def __init__(self, name: str, array: np.ndarray) -> None:
        self._name = name
        self._array = np.asarray(array)

    def name(self) -> str:
        return self._name

    def as_numpy(self) -> np.ndarray:
        return self._array


class TritonError:
    def __init__(self, message: str) -> None:
        self._message = message

    def message(self) -> str:
        return self._message


@dataclass
class InferenceResponse:
    output_tensors: list[Tensor]
    error: TritonError | None = None

    def tensor(self, name: str) -> np.ndarray:
        return next(t.as_numpy() for t in self.output_tensors if t.name() == name)


@dataclass
class InferenceRequest:
    """What Triton hands to ``execute``: named input tensors; ``inputs()`` lists the ones the request carries
    (an absent optional input is not among them)."""

    tensors: dict[str, np.ndarray] = field(default_factory=dict)

    def inputs(self) -> list[Tensor]:
        return [Tensor(name, array) for name, array in self.tensors.items()]


def get_input_tensor_by_name(request: InferenceRequest, name: str) -> Tensor | None:
    return Tensor(name, request.tensors[name]) if name in request.tensors else None


def triton_string_to_numpy(data_type: str) -> Any:
    return _NUMPY[data_type]
