"""Benchmark ``tritonft convert`` on t5-base-sized and GPT-2-medium-sized random fp32 checkpoints.

For each model and TP in {1, 2}: median wall time over ``--runs`` fresh conversions (the output directory is
removed between runs, so every run converts), the converter's peak RSS (``ru_maxrss`` of the child process), and
the ratio to ``cp`` of the same checkpoint file measured in the same run. Checkpoints live in a temp dir.

    .venv/bin/python benchmarks/convert.py [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

T5_BASE = {
    "model_type": "t5",
    "d_model": 768,
    "d_kv": 64,
    "d_ff": 3072,
    "num_heads": 12,
    "num_layers": 12,
    "num_decoder_layers": 12,
    "vocab_size": 32128,
    "feed_forward_proj": "relu",
    "tie_word_embeddings": True,
}
GPT2_MEDIUM = {
    "model_type": "gpt2",
    "n_embd": 1024,
    "n_head": 16,
    "n_layer": 24,
    "n_positions": 1024,
    "vocab_size": 50257,
    "n_inner": None,
    "bos_token_id": 50256,
    "eos_token_id": 50256,
}


def t5_shapes(c: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    d, inner, ff, v = c["d_model"], c["num_heads"] * c["d_kv"], c["d_ff"], c["vocab_size"]
    s: dict[str, tuple[int, ...]] = {
        "shared.weight": (v, d),
        "encoder.final_layer_norm.weight": (d,),
        "decoder.final_layer_norm.weight": (d,),
    }
    for stack, layers in (("encoder", c["num_layers"]), ("decoder", c["num_decoder_layers"])):
        for i in range(layers):
            p = f"{stack}.block.{i}.layer"
            s[f"{p}.0.layer_norm.weight"] = (d,)
            s |= {f"{p}.0.SelfAttention.{x}.weight": (inner, d) for x in "qkv"}
            s[f"{p}.0.SelfAttention.o.weight"] = (d, inner)
            if i == 0:
                s[f"{p}.0.SelfAttention.relative_attention_bias.weight"] = (32, c["num_heads"])
            f = 1
            if stack == "decoder":
                s[f"{p}.1.layer_norm.weight"] = (d,)
                s |= {f"{p}.1.EncDecAttention.{x}.weight": (inner, d) for x in "qkv"}
                s[f"{p}.1.EncDecAttention.o.weight"] = (d, inner)
                f = 2
            s[f"{p}.{f}.layer_norm.weight"] = (d,)
            s[f"{p}.{f}.DenseReluDense.wi.weight"] = (ff, d)
            s[f"{p}.{f}.DenseReluDense.wo.weight"] = (d, ff)
    return s


def gpt2_shapes(c: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    d, v = c["n_embd"], c["vocab_size"]
    s: dict[str, tuple[int, ...]] = {
        "transformer.wte.weight": (v, d),
        "transformer.wpe.weight": (c["n_positions"], d),
        "transformer.ln_f.weight": (d,),
        "transformer.ln_f.bias": (d,),
    }
    for i in range(c["n_layer"]):
        h = f"transformer.h.{i}"
        s |= {f"{h}.ln_1.weight": (d,), f"{h}.ln_1.bias": (d,), f"{h}.ln_2.weight": (d,), f"{h}.ln_2.bias": (d,)}
        s |= {f"{h}.attn.c_attn.weight": (d, 3 * d), f"{h}.attn.c_attn.bias": (3 * d,)}
        s |= {f"{h}.attn.c_proj.weight": (d, d), f"{h}.attn.c_proj.bias": (d,)}
        s |= {f"{h}.mlp.c_fc.weight": (d, 4 * d), f"{h}.mlp.c_fc.bias": (4 * d,)}
        s |= {f"{h}.mlp.c_proj.weight": (4 * d, d), f"{h}.mlp.c_proj.bias": (d,)}
    return s


def write_checkpoint(directory: Path, config: dict[str, Any], shapes: dict[str, tuple[int, ...]]) -> int:
    """Random fp32 safetensors, written tensor by tensor (never the whole model in memory)."""
    directory.mkdir(parents=True)
    (directory / "config.json").write_text(json.dumps(config))
    header, offset = {}, 0
    for name, shape in shapes.items():
        size = int(np.prod(shape)) * 4
        header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    rng = np.random.default_rng(0)
    with (directory / "model.safetensors").open("wb") as handle:
        handle.write(struct.pack("<Q", len(text)) + text)
        for shape in shapes.values():
            handle.write(rng.standard_normal(shape, dtype=np.float32).tobytes())
    return offset


def timed(cmd: list[str]) -> tuple[float, float]:
    """Wall seconds and the child's peak RSS in MiB (ru_maxrss of the waited-for process)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{cmd} failed: {proc.stderr.read().decode() if proc.stderr else ''}")
    return wall, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    tritonft = [sys.executable, "-m", "tritonft"]
    print(f"{'model':<12} {'TP':>2} {'wall s (median)':>16} {'runs':>24} {'peak RSS MiB':>12} {'cp s':>6} {'x cp':>5}")
    with tempfile.TemporaryDirectory(prefix="tritonft-bench-") as tmp:
        root = Path(tmp)
        for label, config, shapes in (
            ("t5-base", T5_BASE, t5_shapes(T5_BASE)),
            ("gpt2-medium", GPT2_MEDIUM, gpt2_shapes(GPT2_MEDIUM)),
        ):
            src = root / label
            write_checkpoint(src, config, shapes)
            for tp in (1, 2):
                walls, rss, cps = [], [], []
                for _ in range(args.runs):
                    out = root / f"{label}-out"
                    shutil.rmtree(out, ignore_errors=True)
                    copy = root / "copy.safetensors"
                    cps.append(timed(["cp", str(src / "model.safetensors"), str(copy)])[0])
                    copy.unlink()
                    wall, peak = timed(
                        [*tritonft, "convert", "--input", str(src), "--output", str(out), "--tp", str(tp)]
                    )
                    walls.append(wall)
                    rss.append(peak)
                    shutil.rmtree(out)
                median, cp = statistics.median(walls), statistics.median(cps)
                runs = " ".join(f"{w:.2f}" for w in walls)
                print(
                    f"{label:<12} {tp:>2} {median:>16.2f} {runs:>24} {max(rss):>12.0f} {cp:>6.2f} {median / cp:>5.2f}",
                    flush=True,
                )
            shutil.rmtree(src)


if __name__ == "__main__":
    main()
