"""Encoder specs and a fake Triton serving them with the real goldens (all-MiniLM-L6-v2's sentence-transformers
embeddings, the seeded classifier's transformers labels and scores), for the probe's unit tests."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from tests.tritonft.encoder.checkpoints import MINILM_SPEC, golden
from tritonft.probe.contract import TextContract
from tritonft.probe.retry import PermanentError
from tritonft.probe.streaming import StreamedAnswer
from tritonft.spec import (
    Architecture,
    Batching,
    Device,
    EncoderSpec,
    EncoderTask,
    ModelSpec,
)

MINILM = dataclasses.replace(MINILM_SPEC, batching=Batching(max_batch_size=16), device=Device.CPU)
SENTIMENT = dataclasses.replace(
    MINILM,
    name="sentiment",
    architecture=Architecture(d_model=64, num_heads=4, num_layers=2, d_ff=128, vocab_size=30522, max_positions=128),
    encoder=EncoderSpec(task=EncoderTask.CLASSIFY, labels=("negative", "neutral", "positive"), max_seq_length=128),
)
"""The seeded BERT classifier of ``tests.tritonft.encoder.checkpoints`` (its goldens: ``bert-classifier``)."""

EATING = ("A man is eating pasta.", "A man is eating food.", "A man is riding a horse.")
BREAD = ("A man is eating pasta.", "A man is eating a piece of bread.", "A woman is playing violin.")
TRIPLES = (EATING, BREAD)
"""Similarity triples among the goldens' texts (all-MiniLM-L6-v2 orders them right by a wide margin)."""


def minilm_embeddings() -> dict[str, npt.NDArray[np.float64]]:
    data = golden("all-minilm-l6-v2")
    table = {t: np.array(e) for t, e in zip(data["texts"], data["embeddings"], strict=True)}
    table[data["query"]] = np.array(data["query_embedding"])
    return table


def classifier_answers() -> dict[str, tuple[str, npt.NDArray[np.float64]]]:
    data = golden("bert-classifier")
    return {t: (label, np.array(s)) for t, label, s in zip(data["texts"], data["labels"], data["scores"], strict=True)}


def encoder_metadata(spec: ModelSpec) -> dict[str, Any]:
    """The V2 metadata the rendered ensemble of ``spec`` declares (as Triton reports it)."""
    from tritonft.probe.rendered import contract_for_spec

    contract = contract_for_spec(spec)
    return {
        "inputs": [t.to_dict() for t in contract.inputs],
        "outputs": [t.to_dict() for t in contract.outputs],
    }


V2_TO_CONFIG = {"BYTES": "TYPE_STRING", "FP32": "TYPE_FP32", "INT32": "TYPE_INT32"}


class FakeEncoderTriton:
    """A Triton serving encoders by name, answering from the goldens; ``tamper`` rewrites an answer (a broken
    model), ``metadata`` overrides what a model declares. Records every inference's batch size."""

    def __init__(
        self,
        specs: Sequence[ModelSpec],
        tamper: Callable[[str, dict[str, npt.NDArray[Any]]], dict[str, npt.NDArray[Any]]] | None = None,
        metadata: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        self.specs = {s.name: s for s in specs}
        self.tamper = tamper
        self.metadata = {name: encoder_metadata(s) for name, s in self.specs.items()} | (metadata or {})
        self.batches: list[int] = []

    def server_live(self, timeout_s: float) -> bool:
        return True

    def server_ready(self, timeout_s: float) -> bool:
        return True

    def server_metadata(self, timeout_s: float) -> dict[str, Any]:
        return {"name": "triton", "version": "2.51.0"}

    def model_ready(self, model: str, timeout_s: float) -> bool:
        return model in self.specs

    def model_metadata(self, model: str, timeout_s: float) -> dict[str, Any]:
        return self.metadata[model]

    def model_config(self, model: str, timeout_s: float) -> dict[str, Any] | None:
        meta = self.metadata[model]
        return {
            "input": [{"name": t["name"], "data_type": V2_TO_CONFIG[t["datatype"]]} for t in meta["inputs"]],
            "output": [{"name": t["name"], "data_type": V2_TO_CONFIG[t["datatype"]]} for t in meta["outputs"]],
        }

    def infer_text(self, model: str, contract: TextContract, texts: list[str], timeout_s: float) -> list[str]:
        raise AssertionError("an encoder is asked for tensors, never for text")

    def stream_text(self, model: str, contract: TextContract, prompt: str, timeout_s: float) -> StreamedAnswer:
        raise AssertionError("an encoder is never asked over a stream")

    def infer_tensors(
        self, model: str, input_name: str, texts: list[str], outputs: Sequence[str], timeout_s: float
    ) -> dict[str, npt.NDArray[Any]]:
        spec = self.specs[model]
        assert input_name == "text_input"
        if len(texts) > spec.batching.max_batch_size:
            raise PermanentError(f"batch of {len(texts)} over max_batch_size {spec.batching.max_batch_size}")
        self.batches.append(len(texts))
        if spec.encoder is not None and spec.encoder.task is EncoderTask.EMBED:
            table = minilm_embeddings()
            answer = {"embedding": np.stack([table[t] for t in texts]).astype(np.float32)}
        else:
            labelled = classifier_answers()
            answer = {
                "label": np.array([[labelled[t][0].encode()] for t in texts], dtype=np.object_),
                "scores": np.stack([labelled[t][1] for t in texts]).astype(np.float32),
            }
        answer = self.tamper(model, answer) if self.tamper else answer
        return {name: answer[name] for name in outputs}

    def close(self) -> None:
        pass
