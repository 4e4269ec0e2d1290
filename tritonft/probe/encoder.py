"""What a correct encoder answer looks like (pure judgement; the probe's check for ``task: embed|classify``).

* Embeddings: every vector has the model's width, finite values, and unit L2 norm when the model normalises; and
  the expected similarity order holds: for each ``(anchor, closer, farther)`` triple, ``cos(anchor, closer) >
  cos(anchor, farther)`` by at least ``margin``. The default triples (:data:`DEFAULT_TRIPLES`) are plain English a
  working sentence-embedding model orders right by a wide margin (all-MiniLM-L6-v2: 0.70 vs 0.19 for the first),
  while a broken one (random weights, wrong pooling, a tokenizer mismatch) does not.
* Classification: every answered label is one of the model's labels and the scores sum to 1; with expected labels
  (the stack's expected answers), each text's label must be the expected one.

:class:`EncoderTarget` is what the probe knows of a served encoder (its task, width, labels and the stack's expected
answers): which texts to send, which output tensors to read, and how to judge them (:meth:`EncoderTarget.judge`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from tritonft.probe.expectations import Verdict
from tritonft.spec import EncoderTask

DEFAULT_TRIPLES: tuple[tuple[str, str, str], ...] = (
    ("A man is eating pasta.", "A man is eating food.", "A man is riding a horse."),
    ("The cat sleeps on the sofa.", "A kitten is napping on the couch.", "Stock markets fell sharply today."),
)
NORM_TOLERANCE = 1e-3


@dataclass(frozen=True)
class EmbeddingExpectation:
    width: int
    normalized: bool = True
    triples: tuple[tuple[str, str, str], ...] = DEFAULT_TRIPLES
    margin: float = 0.05

    def texts(self) -> list[str]:
        """The texts to embed, each once, in a stable order."""
        return list(dict.fromkeys(t for triple in self.triples for t in triple))


def judge_embeddings(
    expected: EmbeddingExpectation, texts: Sequence[str], vectors: npt.NDArray[np.floating]
) -> Verdict:
    vectors = np.asarray(vectors, dtype=np.float64)
    if vectors.shape != (len(texts), expected.width):
        return Verdict(False, f"embeddings of shape {list(vectors.shape)}, expected [{len(texts)}, {expected.width}]")
    if not np.all(np.isfinite(vectors)):
        return Verdict(False, "embeddings contain NaN or infinite values")
    norms = np.linalg.norm(vectors, axis=1)
    if expected.normalized and np.abs(norms - 1).max() > NORM_TOLERANCE:
        return Verdict(False, f"embeddings are not unit vectors (norms {norms.min():.4f}..{norms.max():.4f})")
    if np.any(norms == 0):
        return Verdict(False, "an embedding is the zero vector")
    unit = vectors / norms[:, None]
    index = {text: i for i, text in enumerate(texts)}
    worst = None
    for anchor, closer, farther in expected.triples:
        near = float(unit[index[anchor]] @ unit[index[closer]])
        far = float(unit[index[anchor]] @ unit[index[farther]])
        if near - far < expected.margin:
            return Verdict(
                False,
                f"similarity order wrong: {anchor!r} is {near:.3f} to {closer!r} but {far:.3f} to {farther!r} "
                f"(expected closer by {expected.margin})",
                near - far,
            )
        worst = near - far if worst is None else min(worst, near - far)
    return Verdict(True, f"{len(texts)} embeddings of width {expected.width}, similarity order right", worst)


def judge_labels(
    labels: Sequence[str],
    scores: npt.NDArray[np.floating],
    known: Sequence[str],
    expected: Sequence[str] | None = None,
) -> Verdict:
    unknown = sorted({label for label in labels if label not in known})
    if unknown:
        return Verdict(False, f"labels {unknown} are not among the model's {list(known)}")
    sums = np.asarray(scores, dtype=np.float64).sum(axis=1)
    if np.abs(sums - 1).max() > 1e-3:
        return Verdict(False, f"scores do not sum to 1 (sums {sums.min():.4f}..{sums.max():.4f})")
    if expected is not None:
        wrong = [(i, got, want) for i, (got, want) in enumerate(zip(labels, expected, strict=True)) if got != want]
        if wrong:
            i, got, want = wrong[0]
            return Verdict(False, f"text {i} labelled {got!r}, expected {want!r} ({len(wrong)} wrong of {len(labels)})")
    return Verdict(True, f"{len(labels)} labels" + (" as expected" if expected is not None else " among the model's"))


CLASSIFY_TEXTS: tuple[str, ...] = (
    "What a wonderful, moving film: I loved every minute of it.",
    "The service was slow and the food was cold; never again.",
)
"""What a classifier is asked when the stack expects no labels: only that it answers one of its labels with scores
summing to 1 is judged then."""
EMBEDDING_OUTPUT = "embedding"
LABEL_OUTPUT = "label"
SCORES_OUTPUT = "scores"


@dataclass(frozen=True)
class EncoderTarget:
    """A served encoder as the probe checks it: the model's facts (task, width, normalisation, labels, the
    ensemble's ``max_batch_size``) and the stack's expected answers (similarity triples, text -> label).

    Empty ``triples`` mean :data:`DEFAULT_TRIPLES`; empty ``expected_labels`` mean :data:`CLASSIFY_TEXTS`, judged
    only for a known label and scores summing to 1.
    """

    task: EncoderTask
    width: int
    """The embedding's width (``hidden_size``) or the number of labels."""
    normalize: bool = True
    labels: tuple[str, ...] = ()
    triples: tuple[tuple[str, str, str], ...] = ()
    expected_labels: tuple[tuple[str, str], ...] = ()
    """``(text, label)`` pairs, in the stack's order."""
    max_batch_size: int = 1
    """The ensemble's ``max_batch_size``: the most texts one request may carry."""

    def problems(self) -> list[str]:
        """What makes this target unusable (empty when it can be checked)."""
        found = []
        if self.width < 1:
            found.append(f"width must be at least 1, got {self.width}")
        if self.max_batch_size < 1:
            found.append(f"max_batch_size must be at least 1, got {self.max_batch_size}")
        if self.task is EncoderTask.CLASSIFY:
            if len(self.labels) != self.width:
                found.append(f"a classifier answers one score per label: width {self.width}, labels {self.labels}")
            unknown = sorted({label for _, label in self.expected_labels if label not in self.labels})
            if unknown:
                found.append(f"expected labels {unknown} are not among the model's {list(self.labels)}")
            if self.triples:
                found.append("similarity triples are for an embedding model, not a classifier")
        elif self.expected_labels:
            found.append("expected labels are for a classifier, not an embedding model")
        if any(not text for triple in self.triples for text in triple):
            found.append("similarity triples must be three non-empty texts")
        return found

    @property
    def embedding(self) -> EmbeddingExpectation:
        return EmbeddingExpectation(self.width, self.normalize, self.triples or DEFAULT_TRIPLES)

    def texts(self) -> list[str]:
        """The texts the probe sends, each once, in a stable order."""
        if self.task is EncoderTask.EMBED:
            return self.embedding.texts()
        if self.expected_labels:
            return list(dict.fromkeys(text for text, _ in self.expected_labels))
        return list(CLASSIFY_TEXTS)

    @property
    def outputs(self) -> tuple[str, ...]:
        """The ensemble's output tensors the probe reads."""
        return (EMBEDDING_OUTPUT,) if self.task is EncoderTask.EMBED else (LABEL_OUTPUT, SCORES_OUTPUT)

    @property
    def answer_tensor(self) -> str:
        """The tensor holding the answer proper (the embedding, or the label)."""
        return self.outputs[0]

    def judge(self, texts: Sequence[str], outputs: Mapping[str, npt.NDArray[Any]]) -> Verdict:
        """The verdict on the answers to ``texts`` (the output tensors by name, one row per text)."""
        if self.task is EncoderTask.EMBED:
            return judge_embeddings(self.embedding, texts, outputs[EMBEDDING_OUTPUT])
        labels = [as_text(v) for v in np.asarray(outputs[LABEL_OUTPUT]).reshape(-1).tolist()]
        scores = np.asarray(outputs[SCORES_OUTPUT], dtype=np.float64)
        if len(labels) != len(texts) or scores.shape != (len(texts), self.width):
            return Verdict(
                False,
                f"{len(labels)} labels and scores of shape {list(scores.shape)} for {len(texts)} texts, expected "
                f"[{len(texts)}, {self.width}] scores (one per label)",
            )
        wanted = dict(self.expected_labels)
        expected = [wanted[t] for t in texts] if wanted else None
        return judge_labels(labels, scores, self.labels, expected)

    def sample(self, texts: Sequence[str], outputs: Mapping[str, npt.NDArray[Any]]) -> str:
        """A one-line answer for the report: the first triple's similarities, or the first text's label and score."""
        if self.task is EncoderTask.EMBED:
            vectors = np.asarray(outputs[EMBEDDING_OUTPUT], dtype=np.float64)
            unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1), 1e-12)[:, None]
            index = {text: i for i, text in enumerate(texts)}
            anchor, closer, farther = self.embedding.triples[0]
            near = float(unit[index[anchor]] @ unit[index[closer]])
            far = float(unit[index[anchor]] @ unit[index[farther]])
            return f"cos({anchor!r}, {closer!r}) = {near:.3f}; cos({anchor!r}, {farther!r}) = {far:.3f}"
        label = as_text(np.asarray(outputs[LABEL_OUTPUT]).reshape(-1)[0])
        score = float(np.asarray(outputs[SCORES_OUTPUT], dtype=np.float64)[0].max())
        return f"{texts[0]!r} -> {label} ({score:.3f})"

    def to_dict(self) -> dict[str, Any]:
        raw: dict[str, Any] = {
            "task": str(self.task),
            "width": self.width,
            "normalize": self.normalize,
            "max_batch_size": self.max_batch_size,
        }
        if self.labels:
            raw["labels"] = list(self.labels)
        if self.triples:
            raw["triples"] = [{"anchor": a, "closer": c, "farther": f} for a, c, f in self.triples]
        if self.expected_labels:
            raw["expected_labels"] = [{"text": t, "label": label} for t, label in self.expected_labels]
        return raw

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> EncoderTarget:
        return cls(
            task=EncoderTask(raw["task"]),
            width=int(raw["width"]),
            normalize=bool(raw.get("normalize", True)),
            labels=tuple(str(label) for label in raw.get("labels") or ()),
            triples=tuple((str(t["anchor"]), str(t["closer"]), str(t["farther"])) for t in raw.get("triples") or ()),
            expected_labels=tuple((str(e["text"]), str(e["label"])) for e in raw.get("expected_labels") or ()),
            max_batch_size=int(raw.get("max_batch_size", 1)),
        )


def as_text(value: Any) -> str:
    """A ``BYTES`` element as text (``bytes`` over gRPC and binary HTTP, ``str`` in JSON)."""
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value)
