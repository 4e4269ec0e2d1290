"""The gateway's gRPC messages, built and read without tritonclient's numpy round trip, are the ones tritonclient
would send and reads what Triton answers (protobufs compared field by field and byte for byte)."""

from __future__ import annotations

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.grpc import service_pb2
from tritonclient.grpc._utils import _get_inference_request
from tritonclient.utils import serialize_byte_tensor

from tritonft.gateway.config import ServedModel
from tritonft.gateway.errors import ApiError
from tritonft.gateway.mapping import ensemble_request
from tritonft.gateway.triton import (
    answer_texts,
    bytes_elements,
    infer_request,
    raw_value,
    requested_outputs,
    split_rows,
)
from tritonft.spec import Family

GPT = ServedModel("gpt", Family.GPT2, streaming=False, max_output_len=32, max_input_len=64, max_batch_size=8)
NUMPY = {"UINT32": np.uint32, "UINT64": np.uint64, "FP32": np.float32, "BYTES": np.object_, "BOOL": np.bool_}


def tritonclient_request(body: dict[str, object], *prompts: str) -> service_pb2.ModelInferRequest:
    """What ``tritonclient.grpc`` sends for the same ensemble inputs (InferInput + set_data_from_numpy), one row
    per prompt."""
    rows = len(prompts)
    inputs = []
    text = grpcclient.InferInput("text_input", [rows, 1], "BYTES")
    text.set_data_from_numpy(np.array([[p.encode()] for p in prompts], dtype=np.object_))
    inputs.append(text)
    request = ensemble_request(body, GPT)
    for p in request.parameters:
        value = p.value.encode() if isinstance(p.value, str) else p.value
        tensor = grpcclient.InferInput(p.name, [rows, 1], p.datatype)
        tensor.set_data_from_numpy(np.array([[value]] * rows, dtype=NUMPY[p.datatype]))
        inputs.append(tensor)
    outputs = [grpcclient.InferRequestedOutput(name) for name in requested_outputs(False, request.logprobs)]
    return _get_inference_request("gpt", inputs, "", "", outputs, 0, False, False, 0, None, None)


@pytest.mark.parametrize(
    "body",
    [
        {"temperature": 0},
        {"temperature": 0.7, "top_p": 0.9, "max_tokens": 5, "seed": 2**63 - 1},
        {"n": 3, "best_of": 4, "temperature": 0, "stop": ["a, b", "ünï"]},
        {"logprobs": 0, "temperature": 0},
    ],
)
def test_the_request_is_byte_for_byte_the_one_tritonclient_sends(body: dict[str, object]) -> None:
    full = {"model": "gpt", "prompt": "héllo wörld", **body}
    built = infer_request(ensemble_request(full, GPT), "héllo wörld")
    expected = tritonclient_request(full, "héllo wörld")
    assert built == expected
    assert built.SerializeToString() == expected.SerializeToString()


def test_merged_prompts_are_the_rows_of_the_batch_tritonclient_sends() -> None:
    body = {"model": "gpt", "prompt": "x", "temperature": 0.5, "seed": 7, "stop": ["a, b"], "max_tokens": 9}
    prompts = ("héllo", "", "a longer prompt")
    built = infer_request(ensemble_request(body, GPT), *prompts)
    assert built.SerializeToString() == tritonclient_request(body, *prompts).SerializeToString()


def test_a_batch_answer_is_split_into_rows_of_beams() -> None:
    assert split_rows(["a1", "a2", "b1", "b2", "c1", "c2"], 3) == [["a1", "a2"], ["b1", "b2"], ["c1", "c2"]]


def test_a_batch_answer_that_does_not_divide_into_rows_is_a_502() -> None:
    with pytest.raises(ApiError) as caught:
        split_rows(["a", "b", "c"], 2)
    assert caught.value.status == 502


def test_parameter_tensors_built_once_are_not_shared_across_prompts() -> None:
    request = ensemble_request({"model": "gpt", "prompt": ["one", "two"], "temperature": 0}, GPT)
    first, second = infer_request(request, "one"), infer_request(request, "two")
    assert bytes_elements(first.raw_input_contents[0]) == [b"one"]
    assert bytes_elements(second.raw_input_contents[0]) == [b"two"]
    assert first.inputs[1:] == second.inputs[1:]


@pytest.mark.parametrize(
    ("datatype", "value", "dtype"), [("UINT32", 16, "<u4"), ("UINT64", 2**63 - 1, "<u8"), ("FP32", 0.7, "<f4")]
)
def test_a_scalar_is_its_little_endian_bytes(datatype: str, value: float, dtype: str) -> None:
    assert raw_value(datatype, value) == np.array([value], dtype=dtype).tobytes()


def test_bytes_elements_read_tritons_bytes_tensor_encoding() -> None:
    values = [b"", "ünïcode".encode(), b"x" * 300]
    raw = serialize_byte_tensor(np.array(values, dtype=np.object_)).item()
    assert bytes_elements(raw) == values


def answer(texts: list[bytes], name: str = "text_output") -> service_pb2.ModelInferResponse:
    output = service_pb2.ModelInferResponse.InferOutputTensor(name=name, datatype="BYTES", shape=[1, len(texts)])
    raw = serialize_byte_tensor(np.array(texts, dtype=np.object_)).item()
    return service_pb2.ModelInferResponse(model_name="gpt", outputs=[output], raw_output_contents=[raw])


def test_the_answer_has_one_text_per_beam() -> None:
    assert answer_texts(answer([b"first beam", "zwéi".encode()])) == ["first beam", "zwéi"]


def test_an_answer_without_text_output_has_no_texts() -> None:
    assert answer_texts(answer([b"x"], name="output_ids")) is None


def test_invalid_utf8_in_an_answer_is_replaced_not_fatal() -> None:
    assert answer_texts(answer([b"ok \xff"])) == ["ok \ufffd"]
