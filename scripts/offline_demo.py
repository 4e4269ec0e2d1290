"""The in-cluster conversion path, run on this machine: a small random T5 checkpoint -> FT weights -> Triton repo.

What the ModelConversion Job does in the cluster (``tritonft convert`` -> ``tritonft verify`` -> ``tritonft repo``),
on a checkpoint built here (random weights, a SentencePiece tokenizer trained on a few sentences), because nothing
may be downloaded. Output: ``build/demo/`` (``hf/``, ``model_repository/``).

Usage: .venv/bin/python scripts/offline_demo.py [--out build/demo] [--tp 2]
"""

from __future__ import annotations

import argparse
import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import sentencepiece
from safetensors.numpy import save_file

REPO = Path(__file__).resolve().parents[1]
CORPUS = [
    "translate English to German: The house is wonderful.",
    "translate English to German: He swung back the fishing pole and cast the line.",
    "Das Haus ist wunderbar.",
    "Er schwenkte die Angel zurück und warf die Schnur aus.",
]
D_MODEL, HEADS, D_KV, D_FF, LAYERS = 64, 4, 16, 128, 2


def tiny_t5(hf: Path, vocab: int) -> None:
    """config.json + model.safetensors of a 2+2-layer T5 with random weights (HF names and shapes), scaled like a
    trained model's (matrices N(0, 1/fan_in), unit embeddings, block outputs with gain 3) so that the reference
    engine's answer is varied text rather than one token repeated."""
    rng = np.random.default_rng(0)
    inner = HEADS * D_KV

    def w(*shape: int, gain: float = 1.0) -> np.ndarray:
        return rng.standard_normal(shape, dtype=np.float32) * np.float32(gain * shape[-1] ** -0.5)

    tensors = {"shared.weight": rng.standard_normal((vocab, D_MODEL), dtype=np.float32)}
    for stack, parts in (("encoder", ("SelfAttention",)), ("decoder", ("SelfAttention", "EncDecAttention"))):
        for i in range(LAYERS):
            for layer, attention in enumerate(parts):
                prefix = f"{stack}.block.{i}.layer.{layer}"
                tensors[f"{prefix}.layer_norm.weight"] = np.ones(D_MODEL, np.float32)
                for proj in "qkv":
                    tensors[f"{prefix}.{attention}.{proj}.weight"] = w(inner, D_MODEL)
                tensors[f"{prefix}.{attention}.o.weight"] = w(D_MODEL, inner, gain=3.0)
                if i == 0 and attention == "SelfAttention":
                    bias = rng.standard_normal((32, HEADS), dtype=np.float32)
                    tensors[f"{prefix}.SelfAttention.relative_attention_bias.weight"] = bias
            ffn = f"{stack}.block.{i}.layer.{len(parts)}"
            tensors[f"{ffn}.layer_norm.weight"] = np.ones(D_MODEL, np.float32)
            tensors[f"{ffn}.DenseReluDense.wi.weight"] = w(D_FF, D_MODEL)
            tensors[f"{ffn}.DenseReluDense.wo.weight"] = w(D_MODEL, D_FF, gain=3.0)
        tensors[f"{stack}.final_layer_norm.weight"] = np.ones(D_MODEL, np.float32)
    save_file(tensors, str(hf / "model.safetensors"))
    config = {
        "model_type": "t5",
        "architectures": ["T5ForConditionalGeneration"],
        "d_model": D_MODEL,
        "d_kv": D_KV,
        "d_ff": D_FF,
        "num_layers": LAYERS,
        "num_decoder_layers": LAYERS,
        "num_heads": HEADS,
        "vocab_size": vocab,
        "relative_attention_num_buckets": 32,
        "relative_attention_max_distance": 128,
        "feed_forward_proj": "relu",
        "layer_norm_epsilon": 1e-6,
        "pad_token_id": 0,
        "eos_token_id": 1,
        "decoder_start_token_id": 0,
        "tie_word_embeddings": True,
    }
    (hf / "config.json").write_text(json.dumps(config, indent=2))


def tokenizer(hf: Path) -> int:
    """A SentencePiece Unigram ``spiece.model`` with T5's special ids; returns its vocabulary size."""
    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(CORPUS),
        model_writer=model,
        model_type="unigram",
        vocab_size=96,
        pad_id=0,
        eos_id=1,
        unk_id=2,
        bos_id=-1,
        hard_vocab_limit=False,
        minloglevel=2,
    )
    (hf / "spiece.model").write_bytes(model.getvalue())
    return int(sentencepiece.SentencePieceProcessor(model_proto=model.getvalue()).get_piece_size())


def tritonft(*args: str) -> None:
    print(f"$ tritonft {' '.join(args)}", flush=True)
    subprocess.run([str(REPO / ".venv" / "bin" / "tritonft"), *args], check=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "build" / "demo")
    parser.add_argument("--tp", type=int, default=2)
    args = parser.parse_args()
    shutil.rmtree(args.out, ignore_errors=True)
    hf, repo = args.out / "hf", args.out / "model_repository"
    hf.mkdir(parents=True)
    tiny_t5(hf, tokenizer(hf))

    from tritonft.spec import Architecture, Family, ModelSpec, WeightDType

    spec = ModelSpec(
        name="demo-t5",
        family=Family.T5,
        hf_repo="local/demo-t5",
        revision="0" * 40,
        weight_dtype=WeightDType.FP16,
        tensor_parallel=args.tp,
        architecture=Architecture(D_MODEL, HEADS, LAYERS, D_FF, 96, D_KV, LAYERS, 512),
        max_output_len=16,
    )
    (args.out / "spec.json").write_text(spec.to_json())
    weights = repo / f"{spec.name}-ft" / "1"
    tritonft("convert", "--input", str(hf), "--output", str(weights), "--tp", str(args.tp), "--dtype", "fp16")
    tritonft("verify", str(weights / spec.checkpoint_dir))
    tritonft(
        "repo",
        "--spec",
        str(args.out / "spec.json"),
        "--checkpoint",
        str(weights / spec.checkpoint_dir),
        "--tokenizer",
        str(hf),
        "--out",
        str(repo),
        "--require-checkpoint",
    )
    files = sorted(p for p in repo.rglob("*") if p.is_file())
    print(f"model repository: {repo} ({len(files)} files, {sum(p.stat().st_size for p in files)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
