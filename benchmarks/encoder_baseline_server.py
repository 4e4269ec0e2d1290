"""Seed 004's baseline: a FastAPI-style server (Starlette, FastAPI's core, under uvicorn, one worker) that tokenizes
the query and runs ONNX Runtime on the same ``model.onnx``, like the seed's ``demo/fast_api_server_onnx.py``.

Usage: python benchmarks/encoder_baseline_server.py --model OUT/onnx/model.onnx --tokenizer HF_DIR --port 8000
then ``curl -G --data-urlencode query="..." localhost:8000/predict``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import onnxruntime as ort
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from tokenizers import Tokenizer


def build(model: Path, tokenizer_dir: Path) -> Starlette:
    tokenizer = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])

    def predict(request: Request) -> JSONResponse:
        encoding = tokenizer.encode(request.query_params["query"])
        ids = np.array([encoding.ids], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
        (embedding,) = session.run(None, feed)
        return JSONResponse({"embedding": embedding[0].tolist()})

    return Starlette(routes=[Route("/predict", predict)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--tokenizer", type=Path, required=True)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    uvicorn.run(build(args.model, args.tokenizer), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
