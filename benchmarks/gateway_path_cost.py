"""CPU per request of the gateway's own request/answer path, without any server: the JSON body parsed and validated
into an ``EnsembleRequest``, the ``ModelInferRequest`` built and serialized, a ``ModelInferResponse`` as Triton sends
it decoded and read, the OpenAI body shaped and serialized (``gpt2``, greedy, 16 tokens, one prompt).

Each step is timed alone (minimum over 40 repeats of 2000 calls: the least disturbed figure on a shared machine).
It also runs on a tree from before issue 28 (``PYTHONPATH=<that tree>``), whose ensemble answered ``text_output``
only, so the two can be compared step by step.

Usage: .venv/bin/python benchmarks/gateway_path_cost.py
"""

from __future__ import annotations

import struct
import sys
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import orjson
from tritonclient.grpc import service_pb2

from tritonft.gateway import mapping, triton
from tritonft.gateway.config import ServedModel
from tritonft.spec import Family

PROMPT = "The quick brown fox jumps over the lazy dog."
MODEL = ServedModel("gpt2", Family.GPT2, streaming=False, max_output_len=32, max_input_len=64, max_batch_size=8)
BODY = orjson.dumps({"model": "gpt2", "prompt": PROMPT, "max_tokens": 16, "temperature": 0})
WITH_USAGE = hasattr(mapping, "Row")
"""This tree's ensemble returns token counts (issue 28 and after)."""


def triton_answer() -> bytes:
    response = service_pb2.ModelInferResponse(model_name="gpt2")

    def add(name: str, datatype: str, raw: bytes) -> None:
        output = response.outputs.add()
        output.name, output.datatype = name, datatype
        output.shape.extend([1, 1])
        response.raw_output_contents.append(raw)

    add("text_output", "BYTES", triton.raw_value("BYTES", PROMPT))
    if WITH_USAGE:
        add("output_lengths", "INT32", struct.pack("<i", 11))
        add("input_lengths", "UINT32", struct.pack("<I", 11))
    return bytes(response.SerializeToString())


def steps() -> dict[str, Callable[[], Any]]:
    body = orjson.loads(BODY)
    request = mapping.ensemble_request(dict(body), MODEL)
    wire = triton_answer()
    response = service_pb2.ModelInferResponse.FromString(wire)
    read: Callable[[], Any]
    if WITH_USAGE:

        def read() -> Any:
            return mapping.choices(request, [triton.answer_rows(response, 1)])

    else:

        def read() -> Any:
            return triton.split_rows(triton.answer_texts(response) or [], 1)

    answer = read()
    return {
        "parse": lambda: mapping.ensemble_request(dict(body), MODEL),
        "build": lambda: triton.infer_request(request, request.prompts[0]).SerializeToString(),
        "decode": lambda: service_pb2.ModelInferResponse.FromString(wire),
        "read": read,
        "shape": lambda: orjson.dumps(mapping.completion_body("cmpl-1", 0, request, answer)),
    }


def main() -> None:
    total = 0.0
    for name, step in steps().items():
        micros = min(timeit.repeat(step, number=2000, repeat=40)) / 2000 * 1e6
        total += micros
        print(f"{name:7s} {micros:6.1f} us")
    print(f"total   {total:6.1f} us per request ({'with' if WITH_USAGE else 'without'} usage)")


if __name__ == "__main__":
    main()
