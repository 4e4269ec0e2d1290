"""What a correct encoder answer looks like (pure judgement; the probe's check for ``task: embed|classify``).

* Embeddings: every vector has the model's width, finite values, and unit L2 norm when the model normalises; and
  the expected similarity order holds: for each ``(anchor, closer, farther)`` triple, ``cos(anchor, closer) >
  cos(anchor, farther)`` by at least ``margin``. The default triples (:data:`DEFAULT_TRIPLES`) are plain English a
  working sentence-embedding model orders right by a wide margin (all-MiniLM-L6-v2: 0.70 vs 0.19 for the first),
  while a broken one (random weights, wrong pooling, a tokenizer mismatch) does not.
* Classification: every answered label is one of the model's labels and the scores sum to 1; with expected labels
  (the stack's expected answers), each text's label must be the expected one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from tritonft.probe.expectations import Verdict

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
