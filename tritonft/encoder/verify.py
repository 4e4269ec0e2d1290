"""``tritonft verify OUT/onnx``: re-check an encoder conversion against its manifest, and (``--generate``) judge what
it answers — the encoder counterpart of the FT checks in :mod:`tritonft.convert.verify` and
:mod:`tritonft.reference.check`.

The files: ``model.onnx`` has the size and sha256 ``manifest.json`` records, and nothing else sits beside them (a
stray file would be copied into the model repository). The answers: the model loads in ONNX Runtime and, fed the
probe's own texts through the checkpoint's ``tokenizer.json``, passes the probe's judgement
(:mod:`tritonft.probe.encoder`): an embedding model's vectors have the recorded width, are unit vectors when it
normalises, and order the probe's sentence triples right; a classifier's labels are its own and its scores sum to 1.
A conversion that is wrong by one transpose loads and answers with the right shapes — only the judged answer
catches it, before the files reach the model store.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tritonft.digest import sha256_file
from tritonft.encoder.convert import MANIFEST, MODEL_FILE, SCHEMA, read_manifest
from tritonft.errors import UserError
from tritonft.probe.encoder import EmbeddingExpectation, judge_embeddings, judge_labels
from tritonft.probe.expectations import Verdict

LABEL_TEXTS: tuple[str, ...] = (
    "I loved this film, it was wonderful.",
    "This was a terrible waste of time.",
    "The package arrived on Tuesday.",
)
"""Texts a classifier is asked about when no expected labels are given (only the shape of its answer is judged)."""


@dataclass
class EncoderReport:
    directory: Path
    bytes: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def is_encoder_conversion(directory: Path) -> bool:
    """Whether ``directory`` holds an encoder conversion (its manifest's schema says so)."""
    try:
        manifest = json.loads((directory / MANIFEST).read_text())
    except (OSError, ValueError):
        return False
    return isinstance(manifest, dict) and manifest.get("schema") == SCHEMA


def verify_encoder_files(directory: Path) -> EncoderReport:
    """``model.onnx`` present with its recorded size and sha256; no file the manifest does not know."""
    manifest = read_manifest(directory)
    report = EncoderReport(directory)
    entry = manifest.get("model") or {}
    model = directory / MODEL_FILE
    if not model.is_file():
        report.problems.append(f"{MODEL_FILE}: missing")
    elif model.stat().st_size != entry.get("size"):
        report.problems.append(f"{MODEL_FILE}: {model.stat().st_size} bytes, manifest says {entry.get('size')}")
    elif sha256_file(model) != entry.get("sha256"):
        report.problems.append(f"{MODEL_FILE}: content differs from the manifest (sha256 mismatch)")
    else:
        report.bytes = model.stat().st_size
    strays = sorted(p.name for p in directory.iterdir() if p.name not in (MODEL_FILE, MANIFEST))
    report.problems += [f"{name}: not written by `tritonft convert` (remove it)" for name in strays]
    return report


@dataclass(frozen=True)
class EncoderJudgement:
    verdict: Verdict
    texts: list[str]
    """What the model was asked about."""
    labels: list[str] | None = None
    """A classifier's answered labels, by text."""


def judge_encoder(
    directory: Path, tokenizer_dir: Path, expected_labels: dict[str, str] | None = None
) -> EncoderJudgement:
    """Run the converted model on the probe's texts (tokenized with ``tokenizer_dir/tokenizer.json``) in ONNX
    Runtime and judge the answers as the probe does; a classifier is asked about ``expected_labels``' texts and held
    to their labels when given."""
    import onnxruntime as ort

    from tritonft.encoder.tokenize import EncoderInputError, EncoderTokenizer

    manifest = read_manifest(directory)
    tokenizer_json = tokenizer_dir / "tokenizer.json"
    if not tokenizer_json.is_file():
        raise UserError(
            f"{tokenizer_json} is missing: pass --tokenizer with the checkpoint's directory (it holds tokenizer.json)"
        )
    tokenizer = EncoderTokenizer(tokenizer_json, int(manifest["max_seq_length"]))
    embed = manifest["task"] == "embed"
    expectation = EmbeddingExpectation(
        width=int(manifest["output_width"]), normalized=bool(manifest.get("normalize", False))
    )
    texts = expectation.texts() if embed else list(expected_labels or LABEL_TEXTS)
    try:
        feed = tokenizer.encode(texts)
    except EncoderInputError as exc:
        raise UserError(f"the probe's texts do not fit this model: {exc}") from exc
    try:
        session = ort.InferenceSession(str(directory / MODEL_FILE), providers=["CPUExecutionProvider"])
    except Exception as exc:
        raise UserError(f"{directory / MODEL_FILE} does not load in ONNX Runtime: {exc}") from exc
    names = [o.name for o in session.get_outputs()]
    inputs = {i.name: feed[i.name] for i in session.get_inputs()}
    answers = dict(zip(names, session.run(None, inputs), strict=True))
    if embed:
        return EncoderJudgement(judge_embeddings(expectation, texts, answers["embedding"]), texts)
    labels = [label.decode() if isinstance(label, bytes) else str(label) for label in np.ravel(answers["label"])]
    known = [str(label) for label in manifest["labels"]]
    expected = [expected_labels[t] for t in texts] if expected_labels else None
    return EncoderJudgement(judge_labels(labels, answers["scores"], known, expected), texts, labels)
