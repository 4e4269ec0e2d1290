"""The probe checks an encoder: the ensemble's contract, its answers to the stack's texts judged (embedding width,
unit norm, similarity order; or the expected labels), latency, and an embedding model's answers through
``/v1/embeddings``; a wrong answer fails naming the model and what was wrong. Against a fake Triton answering the
real goldens (``tests.tritonft.probe.encoders``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from tests.tritonft.probe.encoders import EATING, MINILM, SENTIMENT, TRIPLES, FakeEncoderTriton, minilm_embeddings
from tritonft.probe import ModelStatus, ModelTarget, ProbeConfig, ProbeReport, run_probe
from tritonft.probe.contract import TensorSpec, TextContract
from tritonft.probe.encoder import DEFAULT_TRIPLES, EncoderTarget
from tritonft.probe.rendered import target_for_spec
from tritonft.probe.retry import PermanentError
from tritonft.spec import EncoderTask, Family

GATEWAY = "http://gateway.example:8080/v1"
LABELS = (("A man is eating food.", "positive"), ("x", "negative"))
"""The seeded classifier's golden labels for two of its texts."""


def probe(
    server: FakeEncoderTriton,
    targets: Sequence[ModelTarget],
    *,
    gateway_url: str | None = None,
    embed: Any = None,
    requests: int = 3,
) -> ProbeReport:
    config = ProbeConfig(
        "http://triton.example:8000",
        tuple(targets),
        deadline_s=30,
        latency_requests=requests,
        gateway_url=gateway_url,
    )

    def no_gateway(*_args: Any, **_kwargs: Any) -> Any:
        raise AssertionError("the gateway was not to be asked")

    return run_probe(
        config,
        client_factory=lambda _endpoint, _headers: server,
        sleep=lambda _s: None,
        complete=no_gateway,
        embed=embed or no_gateway,
    )


def minilm(triples: Sequence[tuple[str, str, str]] = TRIPLES) -> ModelTarget:
    return target_for_spec(MINILM, triples)


def sentiment(labels: Sequence[tuple[str, str]] = LABELS) -> ModelTarget:
    return target_for_spec(SENTIMENT, expected_labels=labels)


def gateway_from_goldens(calls: list[dict[str, Any]]) -> Any:
    def embed(
        base_url: str, model: str, texts: Sequence[str], *, headers: Mapping[str, str], timeout_s: float
    ) -> npt.NDArray[np.float64]:
        calls.append({"base_url": base_url, "model": model, "texts": list(texts)})
        table = minilm_embeddings()
        return np.stack([table[t] for t in texts])

    return embed


# --- the target ------------------------------------------------------------------------------------------------
def test_an_embedding_models_target_carries_its_facts_from_the_spec_and_the_stacks_triples():
    target = minilm()
    assert target.encoder == EncoderTarget(
        task=EncoderTask.EMBED, width=384, normalize=True, triples=TRIPLES, max_batch_size=16
    )
    assert target.max_tokens is None and not target.streaming


def test_an_encoders_contract_is_its_ensembles_text_in_and_answer_tensors():
    contract = minilm().contract
    assert contract.inputs == (TensorSpec("text_input", "BYTES"),)
    assert contract.outputs == (TensorSpec("embedding", "FP32"), TensorSpec("num_tokens", "INT32"))
    assert contract.text_output == "embedding" and contract.exact
    labelled = sentiment().contract
    assert [t.name for t in labelled.outputs] == ["logits", "scores", "label", "num_tokens"]
    assert labelled.text_output == "label"


def test_a_classifiers_target_carries_its_labels_and_the_expected_ones():
    encoder = sentiment().encoder
    assert encoder is not None
    assert encoder.labels == ("negative", "neutral", "positive") and encoder.width == 3
    assert encoder.expected_labels == LABELS and not encoder.normalize


@pytest.mark.parametrize(
    "target", [minilm(), sentiment(), target_for_spec(MINILM)], ids=["embed", "classify", "defaults"]
)
def test_an_encoder_target_survives_the_json_round_trip(target):
    assert ModelTarget.from_dict(target.to_dict()) == target


def test_a_generators_target_json_has_no_encoder_key():
    assert "encoder" not in ModelTarget("t5-small", Family.T5).to_dict()


def test_no_triples_means_the_default_ones():
    encoder = target_for_spec(MINILM).encoder
    assert encoder is not None and encoder.triples == ()
    assert encoder.embedding.triples == DEFAULT_TRIPLES


def test_an_expected_label_the_model_does_not_have_is_refused_before_anything_is_sent():
    config = ProbeConfig("http://triton.example:8000", (sentiment((("x", "spam"),)),))
    assert (
        "models",
        "sentiment: encoder expected labels ['spam'] are not among the model's ['negative', 'neutral', 'positive']",
    ) in config.problems()


def test_a_generators_text_output_must_be_text():
    numeric = TextContract(outputs=(TensorSpec("text_output", "FP32"),))
    config = ProbeConfig("http://triton.example:8000", (ModelTarget("gpt", Family.GPT2, numeric),))
    assert ("models", "gpt: text_output 'text_output' must be a BYTES tensor") in config.problems()


# --- the probe against a served encoder -----------------------------------------------------------------------------
def test_the_real_embeddings_pass_with_the_similarities_as_the_sample_answer():
    report = probe(FakeEncoderTriton([MINILM]), [minilm()])
    assert report.ok, report.failure_message()
    model = report.model("minilm")
    assert model.status is ModelStatus.OK
    assert model.sample_prompt == EATING[0]
    assert model.sample_answer is not None and model.sample_answer.startswith(f"cos({EATING[0]!r}, {EATING[1]!r}) = 0.")
    inference = next(c for c in report.checks if c.check == "inference")
    assert inference.detail == "5 embeddings of width 384, similarity order right"


def test_latency_is_measured_over_the_configured_one_text_requests():
    server = FakeEncoderTriton([MINILM])
    report = probe(server, [minilm()], requests=7)
    latency = report.model("minilm").latency
    assert latency is not None and latency.count == 7
    assert server.batches == [5, *[1] * 7]


def test_the_texts_go_in_requests_of_at_most_the_ensembles_batch_size():
    small = dataclasses.replace(MINILM, batching=dataclasses.replace(MINILM.batching, max_batch_size=2))
    server = FakeEncoderTriton([small])
    report = probe(server, [target_for_spec(small, TRIPLES)], requests=1)
    assert report.ok, report.failure_message()
    assert server.batches == [2, 2, 1, 1]


def test_a_wrong_similarity_order_fails_naming_the_model_and_the_sentences():
    report = probe(FakeEncoderTriton([MINILM]), [minilm(((EATING[0], EATING[2], EATING[1]),))])
    assert not report.ok
    assert report.model("minilm").status is ModelStatus.WRONG_ANSWER
    message = report.failure_message()
    assert message.startswith("inference[minilm]: similarity order wrong: 'A man is eating pasta.' is ")
    assert "'A man is riding a horse.'" in message


def test_a_model_answering_shuffled_embeddings_fails_the_similarity_order():
    def shuffle(_model: str, answer: dict[str, Any]) -> dict[str, Any]:
        return {"embedding": answer["embedding"][::-1].copy()}

    report = probe(FakeEncoderTriton([MINILM], tamper=shuffle), [minilm()])
    assert "inference[minilm]: similarity order wrong" in report.failure_message()


def test_embeddings_that_are_not_unit_vectors_fail_for_a_normalising_model():
    def unnormalised(_model: str, answer: dict[str, Any]) -> dict[str, Any]:
        return {"embedding": 3 * answer["embedding"]}

    report = probe(FakeEncoderTriton([MINILM], tamper=unnormalised), [minilm()])
    assert "inference[minilm]: embeddings are not unit vectors" in report.failure_message()


def test_a_served_model_of_another_width_fails_naming_the_widths():
    def truncated(_model: str, answer: dict[str, Any]) -> dict[str, Any]:
        return {"embedding": answer["embedding"][:, :256]}

    report = probe(FakeEncoderTriton([MINILM], tamper=truncated), [minilm()])
    assert "inference[minilm]: embeddings of shape [5, 256], expected [5, 384]" in report.failure_message()


def test_a_served_ensemble_with_other_tensors_fails_the_contract():
    renamed = {
        "inputs": [{"name": "text_input", "datatype": "BYTES"}],
        "outputs": [{"name": "embeddings", "datatype": "FP32"}, {"name": "num_tokens", "datatype": "INT32"}],
    }
    report = probe(FakeEncoderTriton([MINILM], metadata={"minilm": renamed}), [minilm()])
    assert report.model("minilm").status is ModelStatus.CONTRACT_MISMATCH
    assert "output 'embedding' (FP32) is missing" in report.failure_message()


def test_the_expected_labels_pass_with_the_first_label_as_the_sample_answer():
    report = probe(FakeEncoderTriton([SENTIMENT]), [sentiment()])
    assert report.ok, report.failure_message()
    answer = report.model("sentiment").sample_answer
    assert answer is not None and answer.startswith("'A man is eating food.' -> positive (")


def test_a_wrong_expected_label_fails_naming_the_text_and_both_labels():
    report = probe(
        FakeEncoderTriton([SENTIMENT]), [sentiment((("A man is eating food.", "negative"), ("x", "negative")))]
    )
    assert report.model("sentiment").status is ModelStatus.WRONG_ANSWER
    assert "inference[sentiment]: text 0 labelled 'positive', expected 'negative'" in report.failure_message()


def test_scores_not_one_per_label_fail():
    def two_scores(_model: str, answer: dict[str, Any]) -> dict[str, Any]:
        return {**answer, "scores": answer["scores"][:, :2]}

    report = probe(FakeEncoderTriton([SENTIMENT], tamper=two_scores), [sentiment()])
    assert "scores of shape [2, 2] for 2 texts, expected [2, 3] scores (one per label)" in report.failure_message()


# --- through the gateway ---------------------------------------------------------------------------------------
def test_an_embedding_model_is_also_asked_its_texts_through_the_gateway():
    calls: list[dict[str, Any]] = []
    report = probe(FakeEncoderTriton([MINILM]), [minilm()], gateway_url=GATEWAY, embed=gateway_from_goldens(calls))
    assert report.ok, report.failure_message()
    assert calls == [{"base_url": GATEWAY, "model": "minilm", "texts": minilm().encoder.texts()}]  # type: ignore[union-attr]
    gateway = next(c for c in report.checks if c.check == "gateway")
    assert gateway.detail == "POST /v1/embeddings: 5 embeddings of width 384, similarity order right"


def test_wrong_embeddings_through_the_gateway_fail_the_model_naming_the_gateway():
    def swapped(base_url: str, model: str, texts: Sequence[str], **_: Any) -> npt.NDArray[np.float64]:
        table = minilm_embeddings()
        return np.stack([table[t] for t in reversed(texts)])

    report = probe(FakeEncoderTriton([MINILM]), [minilm()], gateway_url=GATEWAY, embed=swapped)
    assert report.model("minilm").status is ModelStatus.GATEWAY_FAILED
    assert report.failure_message().startswith(
        "gateway[minilm]: the OpenAI gateway answered wrong (POST /v1/embeddings): similarity order wrong"
    )


def test_a_gateway_that_refuses_fails_the_model_with_its_reason():
    def refused(*_args: Any, **_kwargs: Any) -> npt.NDArray[np.float64]:
        raise PermanentError("POST http://gateway.example:8080/v1/embeddings (model 'minilm'): HTTP 404: no model")

    report = probe(FakeEncoderTriton([MINILM]), [minilm()], gateway_url=GATEWAY, embed=refused)
    assert report.model("minilm").status is ModelStatus.GATEWAY_FAILED
    assert "gateway[minilm]: the OpenAI gateway did not answer: " in report.failure_message()
    assert "HTTP 404: no model" in report.failure_message()


def test_a_classifier_is_not_asked_through_the_gateway():
    report = probe(FakeEncoderTriton([SENTIMENT]), [sentiment()], gateway_url=GATEWAY)
    assert report.ok, report.failure_message()
    assert [c.check for c in report.checks if c.model == "sentiment"] == [
        "model_ready",
        "metadata",
        "model_config",
        "inference",
        "latency",
    ]


def test_an_encoder_probed_by_name_as_a_text_model_fails_its_contract_saying_to_probe_it_from_its_spec():
    report = probe(FakeEncoderTriton([MINILM]), [ModelTarget("minilm")])
    assert report.model("minilm").status is ModelStatus.CONTRACT_MISMATCH
    message = report.failure_message()
    assert "output 'text_output' (BYTES) is missing" in message
    assert message.endswith(
        "('minilm' answers an encoder's tensors: probe it from its spec, `tritonft probe --spec SPEC.json`, which "
        "says its task)"
    )


def test_a_latency_request_that_fails_fails_the_model_naming_the_request():
    calls: list[int] = []

    def fails_after_the_judged_request(_model: str, answer: dict[str, Any]) -> dict[str, Any]:
        calls.append(1)
        if len(calls) > 1:
            raise PermanentError("model 'minilm' inference: server answered INTERNAL: out of memory")
        return answer

    report = probe(FakeEncoderTriton([MINILM], tamper=fails_after_the_judged_request), [minilm()])
    assert report.model("minilm").status is ModelStatus.INFERENCE_FAILED
    assert report.failure_message() == (
        "latency[minilm]: request 1 of 3 failed: model 'minilm' inference: server answered INTERNAL: out of memory"
    )
