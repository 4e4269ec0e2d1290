"""The converted model.onnx, run by ONNX Runtime, answers what sentence-transformers / transformers answer.

Tolerances (goldens are float64 copies of torch's float32 answers on the same token ids):

* fp32: max |difference| <= 2e-5 per component of the (unit or O(1)) embeddings and the logits. Both sides
  compute in float32 with different kernels and summation orders (ONNX Runtime's MLAS GEMMs vs torch's; with
  --optimize, fused attention kernels); the measured
  difference is 1.9e-7 on all-MiniLM-L6-v2 and <= 1e-6 on the random ones, so 2e-5 leaves room for other CPUs'
  vector widths while catching any real error (a wrong mask, pooling or LayerNorm epsilon moves components by
  1e-3 or more).
* fp16: weights rounded to 11 significant bits and the graph computed in float16 (on a GPU every product
  accumulates in float16; ONNX Runtime's CPU kernels are more precise, measured: 3.4e-4 on all-MiniLM-L6-v2,
  2.4e-3 on the bf16 random checkpoint, 3.4e-3 on the classifier's logits): cosine similarity to the golden
  >= 0.999 and max |difference| <= 1e-2 for unit embeddings; logits within 5e-2 with the same top label.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from tests.tolerances import FP16_ATOL, FP16_LOGITS_ATOL, FP16_MIN_COSINE, FP32_ATOL
from tests.tritonft.encoder.checkpoints import VARIANTS, directory_sha256, golden
from tests.tritonft.encoder.conftest import MINILM
from tritonft.encoder.tokenize import EncoderTokenizer

EMBEDDERS = [MINILM, *(v.name for v in VARIANTS if v.task == "embed")]


def run(onnx_dir: Path, checkpoint: Path, data: dict[str, Any]) -> list[np.ndarray]:
    limit = int(data.get("max_seq_length", 128))
    inputs = EncoderTokenizer(checkpoint / "tokenizer.json", limit).encode(data["texts"])
    session = ort.InferenceSession(str(onnx_dir / "model.onnx"), providers=["CPUExecutionProvider"])
    feed = {k: inputs[k] for k in ("input_ids", "attention_mask", "token_type_ids")}
    outputs: list[np.ndarray] = [np.asarray(x) for x in session.run(None, feed)]
    return outputs


def cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    result: np.ndarray = np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    return result


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.name)
def test_random_checkpoints_rebuild_to_the_files_the_goldens_were_made_from(variant, encoder_checkpoint):
    assert directory_sha256(encoder_checkpoint(variant.name)) == golden(variant.name)["checkpoint_sha256"]


@pytest.mark.parametrize("name", [MINILM, *(v.name for v in VARIANTS)])
def test_tokenizer_gives_the_token_ids_transformers_gives(name, encoder_checkpoint):
    data = golden(name)
    inputs = EncoderTokenizer(encoder_checkpoint(name) / "tokenizer.json", 256).encode(data["texts"])
    lengths = inputs["num_tokens"][:, 0]
    ids = [row[:n].tolist() for row, n in zip(inputs["input_ids"], lengths, strict=True)]
    assert ids == data["ids"]


@pytest.mark.parametrize("name", EMBEDDERS)
def test_fp32_embeddings_equal_sentence_transformers(name, encoder_checkpoint, encoder_converted):
    data = golden(name)
    (embedding,) = run(encoder_converted(name), encoder_checkpoint(name), data)
    expected = np.asarray(data["embeddings"])
    assert embedding.dtype == np.float32
    assert embedding.shape == expected.shape
    np.testing.assert_allclose(embedding, expected, rtol=0, atol=FP32_ATOL)


@pytest.mark.parametrize("name", EMBEDDERS)
def test_optimized_fp32_embeddings_equal_sentence_transformers(name, encoder_checkpoint, encoder_converted):
    data = golden(name)
    (embedding,) = run(encoder_converted(name, "fp32", "--optimize"), encoder_checkpoint(name), data)
    np.testing.assert_allclose(embedding, data["embeddings"], rtol=0, atol=FP32_ATOL)


def test_optimized_fp16_minilm_is_close_to_sentence_transformers(encoder_checkpoint, encoder_converted):
    data = golden(MINILM)
    (embedding,) = run(encoder_converted(MINILM, "fp16", "--optimize"), encoder_checkpoint(MINILM), data)
    assert cosine(embedding, np.asarray(data["embeddings"])).min() >= FP16_MIN_COSINE
    np.testing.assert_allclose(embedding, data["embeddings"], rtol=0, atol=FP16_ATOL)


def test_optimized_graph_uses_the_fused_operators(encoder_converted):
    manifest = json.loads((encoder_converted(MINILM, "fp32", "--optimize") / "manifest.json").read_text())
    assert manifest["fused_operators"] == {"Attention": 6, "BiasGelu": 6, "SkipLayerNormalization": 13}
    model = onnx.load(str(encoder_converted(MINILM, "fp32", "--optimize") / "model.onnx"), load_external_data=False)
    kinds = {node.op_type for node in model.graph.node}
    assert {"Attention", "BiasGelu", "SkipLayerNormalization"} <= kinds
    assert "Softmax" not in kinds  # every attention block fused


@pytest.mark.parametrize("name", EMBEDDERS)
def test_fp16_embeddings_are_close_to_sentence_transformers(name, encoder_checkpoint, encoder_converted):
    data = golden(name)
    (embedding,) = run(encoder_converted(name, "fp16"), encoder_checkpoint(name), data)
    expected = np.asarray(data["embeddings"])
    assert cosine(embedding, expected).min() >= FP16_MIN_COSINE
    scale = np.linalg.norm(expected, axis=1, keepdims=True)
    np.testing.assert_allclose(embedding / scale, expected / scale, rtol=0, atol=FP16_ATOL)


def test_minilm_ranks_the_sentences_about_eating_first_for_a_question_about_eating(
    encoder_checkpoint, encoder_converted
):
    data = golden(MINILM)
    session = ort.InferenceSession(str(encoder_converted(MINILM) / "model.onnx"), providers=["CPUExecutionProvider"])
    tokenizer = EncoderTokenizer(encoder_checkpoint(MINILM) / "tokenizer.json", 256)
    query_inputs = tokenizer.encode([data["query"]])
    feed = {k: query_inputs[k] for k in ("input_ids", "attention_mask", "token_type_ids")}
    (query,) = session.run(None, feed)
    (texts,) = run(encoder_converted(MINILM), encoder_checkpoint(MINILM), data)
    similarity = texts @ query[0]
    np.testing.assert_allclose(similarity, data["query_similarity"], rtol=0, atol=FP32_ATOL)
    ranking = [data["texts"][i] for i in np.argsort(-similarity)]
    assert ranking[:2] == ["A man is eating food.", "A man is eating a piece of bread."]


CLASSIFIERS = [v.name for v in VARIANTS if v.task == "classify"]


@pytest.mark.parametrize("name", CLASSIFIERS)
@pytest.mark.parametrize(("dtype", "extra"), [("fp32", ()), ("fp16", ()), ("fp32", ("--optimize",))])
def test_classifier_answers_the_golden_logits_scores_and_labels(
    name, dtype, extra, encoder_checkpoint, encoder_converted
):
    data = golden(name)
    logits, scores, labels = run(encoder_converted(name, dtype, *extra), encoder_checkpoint(name), data)
    atol = FP32_ATOL if dtype == "fp32" else FP16_LOGITS_ATOL
    np.testing.assert_allclose(logits, data["logits"], rtol=0, atol=atol)
    np.testing.assert_allclose(scores, data["scores"], rtol=0, atol=atol)
    assert labels.shape == (len(data["texts"]), 1)
    assert [label.decode() if isinstance(label, bytes) else label for label in labels[:, 0]] == data["labels"]


@pytest.mark.parametrize("name", CLASSIFIERS)
def test_golden_labels_are_not_all_the_same_class(name):
    labels = golden(name)["labels"]
    assert len(set(labels)) >= 2, "a classifier golden that always answers one class would not test the head"


def test_goldens_differ_by_more_than_the_tolerance_between_pooling_modes():
    mean = np.asarray(golden("bert-mean-normalized")["embeddings"])
    cls = np.asarray(golden("bert-cls-bf16")["embeddings"])
    assert (
        np.abs(
            mean / np.linalg.norm(mean, axis=1, keepdims=True) - cls / np.linalg.norm(cls, axis=1, keepdims=True)
        ).max()
        > 100 * FP32_ATOL
    )


ConvertedDir = Callable[..., Path]
