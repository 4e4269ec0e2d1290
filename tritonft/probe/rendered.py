"""The probe's expected contract, taken from the very ensemble ``tritonft.repo`` renders for a model spec.

So "metadata matches what we rendered" is checked against the rendered ``config.pbtxt`` itself, not a copy of it.
"""

from __future__ import annotations

from google.protobuf import text_format  # type: ignore[import-untyped]  # no types-protobuf in the lock
from tritonclient.grpc import model_config_pb2 as mc

from tritonft.engines import engine_for
from tritonft.probe.contract import CONFIG_TYPE_TO_V2, TensorSpec, TextContract
from tritonft.spec import ModelSpec

TEXT_INPUT = "text_input"
TEXT_OUTPUT = "text_output"


def contract_for_spec(spec: ModelSpec) -> TextContract:
    """Every input and output the rendered ensemble of ``spec`` declares, with V2 datatypes."""
    files = engine_for(spec.family).repository_files(spec)
    config = text_format.Parse(files[f"{spec.name}/config.pbtxt"].decode(), mc.ModelConfig())

    def tensors(items: list[mc.ModelInput] | list[mc.ModelOutput]) -> tuple[TensorSpec, ...]:
        out = []
        for tensor in items:
            type_name = mc.DataType.Name(tensor.data_type)
            out.append(TensorSpec(tensor.name, CONFIG_TYPE_TO_V2.get(type_name, type_name)))
        return tuple(out)

    return TextContract(
        inputs=tensors(list(config.input)),
        outputs=tensors(list(config.output)),
        text_input=TEXT_INPUT,
        text_output=TEXT_OUTPUT,
    )
