"""The probe's encoder judgement: on the real all-MiniLM-L6-v2 goldens and on broken answers."""

from __future__ import annotations

import numpy as np

from tests.tritonft.encoder.checkpoints import golden
from tritonft.probe.encoder import EmbeddingExpectation, judge_embeddings, judge_labels

TEXTS = ["A man is eating pasta.", "A man is eating food.", "A man is riding a horse."]
ONE_TRIPLE = (tuple(TEXTS),)


def minilm_vectors() -> np.ndarray:
    data = golden("all-minilm-l6-v2")
    by_text = dict(zip(data["texts"], data["embeddings"], strict=True))
    by_text[data["query"]] = data["query_embedding"]
    return np.array([by_text[t] for t in TEXTS])


def test_the_real_models_embeddings_pass():
    verdict = judge_embeddings(EmbeddingExpectation(384, triples=ONE_TRIPLE), TEXTS, minilm_vectors())  # type: ignore[arg-type]
    assert verdict.ok, verdict.detail
    assert verdict.score is not None and verdict.score > 0.4


def test_swapped_answers_fail_the_similarity_order():
    vectors = minilm_vectors()[[0, 2, 1]]
    verdict = judge_embeddings(EmbeddingExpectation(384, triples=ONE_TRIPLE), TEXTS, vectors)  # type: ignore[arg-type]
    assert not verdict.ok
    assert "similarity order wrong" in verdict.detail


def test_unnormalised_vectors_fail_when_the_model_normalises():
    verdict = judge_embeddings(EmbeddingExpectation(384, triples=ONE_TRIPLE), TEXTS, 2 * minilm_vectors())  # type: ignore[arg-type]
    assert not verdict.ok
    assert "not unit vectors" in verdict.detail


def test_a_wrong_width_fails():
    verdict = judge_embeddings(EmbeddingExpectation(768, triples=ONE_TRIPLE), TEXTS, minilm_vectors())  # type: ignore[arg-type]
    assert "expected [3, 768]" in verdict.detail


def test_texts_to_embed_are_each_sent_once():
    assert EmbeddingExpectation(384).texts().count("A man is eating pasta.") == 1


def test_labels_are_judged_against_the_expected_ones():
    data = golden("bert-classifier")
    labels, scores = data["labels"], np.array(data["scores"])
    known = ["negative", "neutral", "positive"]
    assert judge_labels(labels, scores, known, labels).ok
    wrong = ["positive" if label != "positive" else "negative" for label in labels]
    verdict = judge_labels(labels, scores, known, wrong)
    assert not verdict.ok
    assert "expected" in verdict.detail


def test_an_unknown_label_fails():
    assert "not among the model's" in judge_labels(["spam"], np.array([[1.0]]), ["ham"]).detail
