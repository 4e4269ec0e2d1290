"""``POST /v1/embeddings`` in front of the real Triton serving the real all-MiniLM-L6-v2 (and a classifier, which
is not an embedding model), with the official ``openai`` client as the peer: the answers equal
sentence-transformers' golden embeddings, in float and base64, with the token usage; bad requests get OpenAI-shaped
errors and the gateway goes on answering."""

from __future__ import annotations

import base64
import json
import urllib.request
from collections.abc import Iterator
from typing import Any

import numpy as np
import openai
import pytest

from tests.system.realtriton.conftest import EMBEDDER
from tests.tolerances import FP32_ATOL
from tests.tritonft.encoder.checkpoints import golden
from tests.tritonft.gateway.server import GatewayProcess
from tests.tritonft.gateway.server import started as _started
from tritonft.local_triton import LocalTriton

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def gateway(
    encoder_triton: LocalTriton, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[GatewayProcess]:
    # max batch 4: a request of 10 texts takes three concurrent Triton calls, answered in input order
    extra = ["--embedding-model", f"{EMBEDDER}:4"]
    with _started(GatewayProcess(encoder_triton.grpc_url, [], tmp_path_factory.mktemp("gw-emb"), extra), request) as gw:
        yield gw


def error_body(exc: openai.APIStatusError) -> dict[str, Any]:
    body = exc.body
    assert isinstance(body, dict)
    return body


@pytest.fixture(scope="module")
def client(gateway: GatewayProcess) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="unused", max_retries=0, timeout=30)


def test_embeddings_of_a_list_equal_sentence_transformers_in_input_order(client):
    data = golden("all-minilm-l6-v2")
    answer = client.embeddings.create(model=EMBEDDER, input=data["texts"], encoding_format="float")
    assert [item.index for item in answer.data] == list(range(len(data["texts"])))
    vectors = np.array([item.embedding for item in answer.data])
    np.testing.assert_allclose(vectors, data["embeddings"], rtol=0, atol=FP32_ATOL)
    assert answer.model == EMBEDDER
    tokens = sum(len(ids) for ids in data["ids"])
    assert (answer.usage.prompt_tokens, answer.usage.total_tokens) == (tokens, tokens)


def test_a_single_string_gets_one_embedding(client):
    data = golden("all-minilm-l6-v2")
    answer = client.embeddings.create(model=EMBEDDER, input=data["query"], encoding_format="float")
    assert len(answer.data) == 1
    np.testing.assert_allclose(answer.data[0].embedding, data["query_embedding"], rtol=0, atol=FP32_ATOL)


def test_base64_is_the_little_endian_float32_bytes(gateway):
    data = golden("all-minilm-l6-v2")
    body = {"model": EMBEDDER, "input": data["texts"][:2], "encoding_format": "base64"}
    post = urllib.request.Request(
        f"{gateway.url}/v1/embeddings", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(post, timeout=30) as reply:
        answer = json.loads(reply.read())
    vectors = [np.frombuffer(base64.b64decode(item["embedding"]), dtype="<f4") for item in answer["data"]]
    np.testing.assert_allclose(np.stack(vectors), data["embeddings"][:2], rtol=0, atol=FP32_ATOL)


def test_the_openai_client_default_base64_decodes_to_the_goldens(client):
    data = golden("all-minilm-l6-v2")
    answer = client.embeddings.create(model=EMBEDDER, input=data["texts"][:3])  # the client asks for base64
    np.testing.assert_allclose([i.embedding for i in answer.data], data["embeddings"][:3], rtol=0, atol=FP32_ATOL)


def test_embedding_models_are_listed(client):
    assert EMBEDDER in [m.id for m in client.models.list().data]


def test_an_empty_string_is_a_400_naming_the_input(client):
    with pytest.raises(openai.BadRequestError) as caught:
        client.embeddings.create(model=EMBEDDER, input=["fine", ""])
    assert error_body(caught.value)["param"] == "input"
    assert "input[1] is an empty string" in error_body(caught.value)["message"]


def test_an_over_long_text_is_a_400_with_its_position_across_triton_calls(client):
    texts = ["short"] * 5 + ["word " * 300]
    with pytest.raises(openai.BadRequestError) as caught:
        client.embeddings.create(model=EMBEDDER, input=texts)
    assert error_body(caught.value)["code"] == "context_length_exceeded"
    assert "input[5] is 302 tokens long, over this model's limit of 256 tokens" in error_body(caught.value)["message"]
    still = client.embeddings.create(model=EMBEDDER, input="still serving", encoding_format="float")
    assert len(still.data[0].embedding) == 384


def test_token_id_input_is_refused_with_the_fix(client):
    with pytest.raises(openai.BadRequestError, match="token-id input is not supported"):
        client.embeddings.create(model=EMBEDDER, input=[[101, 102]])


def test_a_different_dimensions_is_refused(client):
    with pytest.raises(openai.BadRequestError, match="answers 384-dimensional embeddings"):
        client.embeddings.create(model=EMBEDDER, input="hello", dimensions=128)


def test_an_unknown_model_is_a_404_listing_the_served_ones(client):
    with pytest.raises(openai.NotFoundError, match=f"served models: {EMBEDDER}"):
        client.embeddings.create(model="text-embedding-3-small", input="hello")
