"""The tensor contract a served model must expose, and how to compare it with what a server reports.

Every model we deploy is served behind an ensemble whose public contract is *text in, text out*: one ``BYTES``
input tensor holding the prompt and one ``BYTES`` output tensor holding the answer, both shaped ``[batch, 1]``.
The names are a parameter (:class:`TextContract`) so the probe can follow whatever the model repository renders;
the default (:data:`DEFAULT_TEXT_CONTRACT`) is the text tensors of the ensemble ``tritonft.repo`` renders,
``text_input`` -> ``text_output``; :func:`tritonft.probe.rendered.contract_for_spec` gives the exact full contract.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

CONFIG_TYPE_TO_V2: dict[str, str] = {
    "TYPE_BOOL": "BOOL",
    "TYPE_UINT8": "UINT8",
    "TYPE_UINT16": "UINT16",
    "TYPE_UINT32": "UINT32",
    "TYPE_UINT64": "UINT64",
    "TYPE_INT8": "INT8",
    "TYPE_INT16": "INT16",
    "TYPE_INT32": "INT32",
    "TYPE_INT64": "INT64",
    "TYPE_FP16": "FP16",
    "TYPE_FP32": "FP32",
    "TYPE_FP64": "FP64",
    "TYPE_STRING": "BYTES",
    "TYPE_BF16": "BF16",
}
"""``config.pbtxt`` data types (``model_config.proto``) to KServe-V2 metadata data types."""


@dataclass(frozen=True)
class TensorSpec:
    """One named tensor: its name and its KServe-V2 datatype (``BYTES``, ``INT32``, ``FP16``...)."""

    name: str
    datatype: str = "BYTES"

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "datatype": self.datatype}

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> TensorSpec:
        return cls(name=str(raw["name"]), datatype=str(raw.get("datatype", "BYTES")))


@dataclass(frozen=True)
class TextContract:
    """The expected public interface of a served model.

    With ``exact`` (a contract taken from the rendered model), ``inputs``/``outputs`` list *every* tensor the
    model declares: a missing, extra or re-typed tensor is a mismatch. Without it (only the text tensors are
    known, e.g. ``tritonft probe --model NAME``), the server may declare more tensors, but every extra input must
    be optional in its model configuration, since the probe sends only the text. ``text_input``/``text_output``
    name the tensors the probe sends the prompt to and reads the answer from: ``text_input`` is a ``BYTES``
    tensor; ``text_output`` is a generator's ``BYTES`` text (the probe's settings check that), or an encoder's
    answer tensor (``embedding`` FP32, or ``label``).
    """

    inputs: tuple[TensorSpec, ...] = (TensorSpec("text_input"),)
    outputs: tuple[TensorSpec, ...] = (TensorSpec("text_output"),)
    text_input: str = "text_input"
    text_output: str = "text_output"
    exact: bool = True

    def __post_init__(self) -> None:
        for role, name, tensors in (
            ("text_input", self.text_input, self.inputs),
            ("text_output", self.text_output, self.outputs),
        ):
            match = [t for t in tensors if t.name == name]
            if not match:
                listed = [t.name for t in tensors]
                raise ValueError(f"contract {role} {name!r} is not one of the declared tensors {listed}")
            if role == "text_input" and match[0].datatype != "BYTES":
                raise ValueError(f"contract {role} {name!r} must be BYTES, not {match[0].datatype}")

    @property
    def answers_text(self) -> bool:
        """``text_output`` is a ``BYTES`` tensor (what a generator's answer must be)."""
        return any(t.name == self.text_output and t.datatype == "BYTES" for t in self.outputs)

    @classmethod
    def simple(cls, input_name: str = "text_input", output_name: str = "text_output") -> TextContract:
        """The text tensors only (not exact): the served model may declare more, optional, tensors."""
        return cls(
            inputs=(TensorSpec(input_name),),
            outputs=(TensorSpec(output_name),),
            text_input=input_name,
            text_output=output_name,
            exact=False,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "inputs": [t.to_dict() for t in self.inputs],
            "outputs": [t.to_dict() for t in self.outputs],
            "text_input": self.text_input,
            "text_output": self.text_output,
            "exact": self.exact,
        }

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> TextContract:
        return cls(
            inputs=tuple(TensorSpec.from_dict(t) for t in raw["inputs"]),
            outputs=tuple(TensorSpec.from_dict(t) for t in raw["outputs"]),
            text_input=str(raw["text_input"]),
            text_output=str(raw["text_output"]),
            exact=bool(raw.get("exact", True)),
        )


DEFAULT_TEXT_CONTRACT = TextContract.simple()
"""``text_input`` (BYTES prompt) -> ``text_output`` (BYTES answer), the text tensors of the rendered ensemble; not
exact, so the ensemble's optional inputs are accepted."""


def _compare_tensors(
    kind: str, expected: tuple[TensorSpec, ...], actual: dict[str, str], exact: bool = True
) -> list[str]:
    problems: list[str] = []
    wanted = {t.name: t.datatype for t in expected}
    for name, datatype in wanted.items():
        if name not in actual:
            problems.append(f"{kind} {name!r} ({datatype}) is missing; the server declares {sorted(actual)}")
        elif actual[name] != datatype:
            problems.append(f"{kind} {name!r} has datatype {actual[name]}, expected {datatype}")
    if exact:
        extra = sorted(set(actual) - set(wanted))
        problems.extend(f"{kind} {name!r} ({actual[name]}) is not in the rendered contract" for name in extra)
    return problems


def compare_metadata(contract: TextContract, metadata: dict[str, Any]) -> list[str]:
    """Every difference between ``contract`` and a V2 model-metadata document (``GET /v2/models/<m>``).

    ``metadata`` is the JSON form both protocols reduce to: ``{"inputs": [{"name", "datatype", "shape"}], ...}``.
    Returns an empty list when they match.
    """
    inputs = {str(t["name"]): str(t["datatype"]) for t in metadata.get("inputs") or []}
    outputs = {str(t["name"]): str(t["datatype"]) for t in metadata.get("outputs") or []}
    return _compare_tensors("input", contract.inputs, inputs, contract.exact) + _compare_tensors(
        "output", contract.outputs, outputs, contract.exact
    )


def compare_model_config(contract: TextContract, config: dict[str, Any]) -> list[str]:
    """Every difference between ``contract`` and a Triton model configuration (``GET /v2/models/<m>/config``).

    ``config`` is the JSON form of ``inference.ModelConfig`` (``data_type`` as ``TYPE_STRING`` etc.). For a
    contract that is not exact, an input outside it must be ``optional`` (the probe sends only the text).
    """

    def tensors(key: str) -> dict[str, str]:
        out: dict[str, str] = {}
        for t in config.get(key) or []:
            raw_type = str(t.get("data_type", t.get("dataType", "")))
            out[str(t["name"])] = CONFIG_TYPE_TO_V2.get(raw_type, raw_type)
        return out

    problems = _compare_tensors("config input", contract.inputs, tensors("input"), contract.exact)
    problems += _compare_tensors("config output", contract.outputs, tensors("output"), contract.exact)
    if not contract.exact:
        known = {t.name for t in contract.inputs}
        for t in config.get("input") or []:
            if str(t["name"]) not in known and not t.get("optional", False):
                problems.append(
                    f"config input {str(t['name'])!r} is required (not optional) but the probe sends only "
                    f"{contract.text_input!r}, so the server would refuse every request"
                )
    return problems
