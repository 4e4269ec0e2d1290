"""The harness itself: the dev stack's rendered repositories load READY in a real Triton and answer through their
ensembles over HTTP and gRPC (the FT step stood in for by an echo, so the answer is the prompt)."""

from __future__ import annotations

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from tests.realtriton.repos import stack_specs
from tritonft.local_triton import LocalTriton
from tritonft.repo.naming import RepoNames

pytestmark = pytest.mark.slow


def prompt_input(module, texts: list[str]):
    tensor = module.InferInput("text_input", [len(texts), 1], "BYTES")
    tensor.set_data_from_numpy(np.array([[t.encode()] for t in texts], dtype=object))
    return tensor


def test_every_model_of_the_dev_stack_is_ready(dev_triton: LocalTriton) -> None:
    client = httpclient.InferenceServerClient(dev_triton.http_url)
    index = {m["name"]: m.get("state") for m in client.get_model_repository_index()}
    expected = {name for spec in stack_specs("dev") for name in RepoNames.of(spec).by_role().values()}
    assert index == dict.fromkeys(expected, "READY")


def test_gpt2_ensemble_answers_over_http(dev_triton: LocalTriton) -> None:
    client = httpclient.InferenceServerClient(dev_triton.http_url)
    result = client.infer("gpt2", [prompt_input(httpclient, ["hello world"])])
    assert result.as_numpy("text_output").tolist() == [[b"hello world"]]


def test_gpt2_ensemble_answers_over_grpc(dev_triton: LocalTriton) -> None:
    client = grpcclient.InferenceServerClient(dev_triton.grpc_url)
    result = client.infer("gpt2", [prompt_input(grpcclient, ["the quick brown fox"])])
    assert result.as_numpy("text_output").tolist() == [[b"the quick brown fox"]]


def test_t5_ensemble_answers_over_grpc(dev_triton: LocalTriton) -> None:
    client = grpcclient.InferenceServerClient(dev_triton.grpc_url)
    result = client.infer("t5-small", [prompt_input(grpcclient, ["hello world"])])
    assert result.as_numpy("text_output").tolist() == [[b"hello world"]]


def test_metrics_endpoint_serves_triton_inference_counters(dev_triton: LocalTriton) -> None:
    import urllib.request

    with urllib.request.urlopen(dev_triton.metrics_url, timeout=5) as answer:
        text = answer.read().decode()
    assert 'nv_inference_request_success{model="gpt2"' in text
