"""Encoders on a real Triton: the real all-MiniLM-L6-v2 and a seeded BERT classifier, converted by
``tritonft convert``, rendered by :mod:`tritonft.encoder.repo` (the ONNX step run by ONNX Runtime in the Python
backend, as this Triton has no ONNX Runtime backend) and served through the ensemble over HTTP and gRPC: the
answers equal sentence-transformers' / transformers' goldens; bad requests get clear errors, and the server goes
on answering."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests.system.realtriton.client import PROTOCOLS, client
from tests.system.realtriton.conftest import CLASSIFIER, EMBEDDER, OPTIMIZED_EMBEDDER
from tests.tolerances import FP32_ATOL
from tests.tritonft.encoder.checkpoints import golden
from tritonft.local_triton import LocalTriton

pytestmark = pytest.mark.slow


def texts_input(protocol: str, texts: list[Any], datatype: str = "BYTES") -> Any:
    module = httpclient if protocol == "http" else grpcclient
    array = np.array(
        [[t.encode() if isinstance(t, str) else t] for t in texts],
        dtype=np.object_ if datatype == "BYTES" else np.int32,
    )
    item = module.InferInput("text_input", list(array.shape), datatype)
    item.set_data_from_numpy(array)
    return item


def infer(server: LocalTriton, model: str, texts: list[str], protocol: str = "http") -> Any:
    return client(server, protocol).infer(model, [texts_input(protocol, texts)])


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_minilm_embeddings_equal_sentence_transformers(encoder_triton, protocol):
    data = golden("all-minilm-l6-v2")
    result = infer(encoder_triton, EMBEDDER, data["texts"], protocol)
    embedding = result.as_numpy("embedding")
    assert embedding.shape == (len(data["texts"]), 384)
    np.testing.assert_allclose(embedding, data["embeddings"], rtol=0, atol=FP32_ATOL)
    assert result.as_numpy("num_tokens")[:, 0].tolist() == [len(ids) for ids in data["ids"]]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_the_optimized_minilm_answers_the_same_goldens(encoder_triton, protocol):
    data = golden("all-minilm-l6-v2")
    embedding = infer(encoder_triton, OPTIMIZED_EMBEDDER, data["texts"], protocol).as_numpy("embedding")
    np.testing.assert_allclose(embedding, data["embeddings"], rtol=0, atol=FP32_ATOL)


def test_minilm_ranks_the_sentences_about_eating_first(encoder_triton):
    data = golden("all-minilm-l6-v2")
    texts = infer(encoder_triton, EMBEDDER, data["texts"]).as_numpy("embedding")
    (query,) = infer(encoder_triton, EMBEDDER, [data["query"]]).as_numpy("embedding")
    ranking = [data["texts"][i] for i in np.argsort(-(texts @ query))]
    assert ranking[:2] == ["A man is eating food.", "A man is eating a piece of bread."]


def test_concurrent_single_text_requests_batched_together_still_equal_the_goldens(encoder_triton):
    data = golden("all-minilm-l6-v2")
    with ThreadPoolExecutor(len(data["texts"])) as pool:
        results = list(pool.map(lambda t: infer(encoder_triton, EMBEDDER, [t]).as_numpy("embedding")[0], data["texts"]))
    np.testing.assert_allclose(np.stack(results), data["embeddings"], rtol=0, atol=FP32_ATOL)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_classifier_answers_the_golden_labels_and_scores(encoder_triton, protocol):
    data = golden("bert-classifier")
    result = infer(encoder_triton, CLASSIFIER, data["texts"], protocol)
    assert [label.decode() for label in result.as_numpy("label")[:, 0]] == data["labels"]
    np.testing.assert_allclose(result.as_numpy("scores"), data["scores"], rtol=0, atol=FP32_ATOL)
    np.testing.assert_allclose(result.as_numpy("logits"), data["logits"], rtol=0, atol=FP32_ATOL)


def still_serving(server: LocalTriton) -> None:
    data = golden("all-minilm-l6-v2")
    (embedding,) = infer(server, EMBEDDER, data["texts"][:1]).as_numpy("embedding")
    np.testing.assert_allclose(embedding, data["embeddings"][0], rtol=0, atol=FP32_ATOL)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_an_empty_text_is_refused_by_name_and_the_server_keeps_serving(encoder_triton, protocol):
    with pytest.raises(InferenceServerException, match=r"input\[0\] is an empty string; send non-empty text"):
        infer(encoder_triton, EMBEDDER, [""], protocol)
    still_serving(encoder_triton)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_an_over_long_text_is_refused_with_its_length_and_the_limit(encoder_triton, protocol):
    with pytest.raises(InferenceServerException, match=r"over this model's limit of 256 tokens; shorten or split"):
        infer(encoder_triton, EMBEDDER, ["word " * 300], protocol)
    still_serving(encoder_triton)


def test_a_bad_request_among_concurrent_ones_fails_alone(encoder_triton):
    data = golden("all-minilm-l6-v2")
    texts = [*data["texts"][:4], ""]

    def one(text: str) -> Any:
        try:
            return infer(encoder_triton, EMBEDDER, [text]).as_numpy("embedding")[0]
        except InferenceServerException as exc:
            return exc

    with ThreadPoolExecutor(len(texts)) as pool:
        answers = list(pool.map(one, texts))
    assert isinstance(answers[-1], InferenceServerException)
    np.testing.assert_allclose(np.stack(answers[:4]), data["embeddings"][:4], rtol=0, atol=FP32_ATOL)


def test_a_wrong_input_type_is_refused_by_triton(encoder_triton):
    with pytest.raises(InferenceServerException, match="text_input"):
        client(encoder_triton, "http").infer(EMBEDDER, [texts_input("http", [1, 2], "INT32")])
    still_serving(encoder_triton)


def test_not_utf8_text_is_refused(encoder_triton):
    with pytest.raises(InferenceServerException, match="not UTF-8 text"):
        client(encoder_triton, "http").infer(EMBEDDER, [texts_input("http", [b"\xff\xfe bad"])])
    still_serving(encoder_triton)


def test_an_unknown_model_is_refused(encoder_triton):
    with pytest.raises(InferenceServerException, match="unknown"):
        infer(encoder_triton, "no-such-encoder", ["hello"])
    still_serving(encoder_triton)


def test_the_encoder_models_run_on_the_images_python_3_10_with_its_onnxruntime(
    serve_triton, image_python_runtime, encoder_repository
):
    """The tokenizer model and the ONNX stand-in, on the server image's Python (3.10) and requirements (numpy 1.x,
    onnxruntime 1.23.2), answer the goldens too."""
    server = serve_triton(encoder_repository, runtime=image_python_runtime)
    data = golden("all-minilm-l6-v2")
    embedding = infer(server, EMBEDDER, data["texts"]).as_numpy("embedding")
    np.testing.assert_allclose(embedding, data["embeddings"], rtol=0, atol=FP32_ATOL)
    labels = infer(server, CLASSIFIER, data["texts"]).as_numpy("label")[:, 0]
    assert [label.decode() for label in labels] == golden("bert-classifier")["labels"]


def test_the_probes_default_similarity_check_passes_on_the_served_model(encoder_triton):
    from tritonft.probe.encoder import EmbeddingExpectation, judge_embeddings

    expected = EmbeddingExpectation(384)
    texts = expected.texts()
    verdict = judge_embeddings(expected, texts, infer(encoder_triton, EMBEDDER, texts).as_numpy("embedding"))
    assert verdict.ok, verdict.detail
