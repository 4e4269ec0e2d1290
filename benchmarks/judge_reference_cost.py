"""The judge's reference step (``tritonft reference``, the reference Job's work) at the catalog models' widths.

The catalog's generators (t5-3b, gpt-j-6b) cannot be downloaded here (11 and 24 GB) nor held (gpt-j-6b at fp32 is
24 GB; this machine has 23). Their reference step is derived from a measurement of the same step on seeded
checkpoints with **their matrix shapes and vocabularies** and fewer layers: a GPT-2 at GPT-J-6B's width (d 4096,
FFN 16384, vocabulary 50400: every matrix of a GPT-J block has a GPT-2 block's shape) and a T5 at t5-3b's (d 1024,
32 heads x 128, FFN 16384, vocabulary 32128). Each run prints, as JSON: the greedy steps taken, the parameters, the
load (fp32 conversion into scratch + reading it back) and reference seconds, the effective FLOP/s of the greedy steps
(2 FLOPs per parameter per step) per wall second and per CPU second (what a core the step had to itself would
do: on a loaded machine the wall figure is the share of a core it got) and the peak RSS per fp32 weight byte.

``llama-3.1-8b-width`` is a seeded Llama with Llama 3.1 8B's shapes (hidden 4096, 32 heads x 128, 8 KV heads, FFN
14336, vocabulary 128256, llama3 rope scaling), its weights in bf16 safetensors as the Hub ships them; the step reads
them directly (a vLLM model's reference converts nothing: "load" is reading and widening to fp32). Its FLOPs count
every token the step runs (each prompt's tokens once, then the greedy steps), with the vLLM tests' small BPE tokenizer
(more tokens per prompt than Llama 3's).

    .venv/bin/python benchmarks/judge_reference_cost.py [--models gptj-width t5-3b-width llama-3.1-8b-width] \\
        [--layers N]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from tests.tritonft.convert.models import Model
from tests.tritonft.reference import checkpoints
from tests.tritonft.repo.conftest import make_spec
from tritonft.convert.tensors import read_safetensors_header
from tritonft.probe.judge_reference import JudgeReference, reference_prompts
from tritonft.repo.tokenization import load_tokenizer
from tritonft.spec import Family, ModelSpec, WeightDType


def gptj_width(layers: int) -> Model:
    dims = {"d": 4096, "heads": 16, "layers": layers, "vocab": 50400, "positions": 2048}
    return checkpoints.gpt2(7, "fp32", dims=dims)


def t5_3b_width(layers: int) -> Model:
    dims = {"d": 1024, "heads": 32, "dkv": 128, "ff": 16384, "vocab": 32128, "buckets": 32, "layers": layers}
    return checkpoints.t5(7, "fp32", dims=dims)


MODELS: dict[str, tuple[Family, Callable[[int], Model]]] = {
    "gptj-width": (Family.GPT2, gptj_width),
    "t5-3b-width": (Family.T5, t5_3b_width),
}
LLAMA_8B_WIDTH = "llama-3.1-8b-width"


def llama_8b_width(layers: int, directory: Path) -> tuple[Path, ModelSpec]:
    """A seeded Llama with Llama 3.1 8B's shapes and ``layers`` layers, bf16 shards (one per tensor group), the vLLM
    tests' tokenizer and config files; its spec (as the tests' CPU spec, served as bf16 from a bf16 checkpoint)."""
    from tests.tritonft.engines.vllm import checkpoints as tiny
    from tests.tritonft.reference.llama_checkpoints import LLAMA3_ROPE, write_bf16_safetensors
    from tritonft.engines.vllm import local

    variant = dataclasses.replace(
        tiny.VARIANTS[0], hidden=4096, layers=layers, heads=32, kv_heads=8, intermediate=14336, max_positions=8192
    )
    directory.mkdir(parents=True)
    tiny.train_tokenizer(directory)
    vocab = 128256
    rng = np.random.default_rng(7)
    h, d, i = variant.hidden, variant.head_dim, variant.intermediate

    def normal(shape: tuple[int, ...], std: float) -> np.ndarray:
        values = rng.standard_normal(shape, dtype=np.float32)
        values *= np.float32(std)  # in place: the embedding alone is 2.1 GB at fp32
        return values

    write_bf16_safetensors(
        {"model.embed_tokens.weight": normal((vocab, h), 1.0)}, directory / "model-embed.safetensors"
    )
    write_bf16_safetensors({"lm_head.weight": normal((vocab, h), 0.3 / 8)}, directory / "model-head.safetensors")
    for layer in range(layers):
        p = f"model.layers.{layer}."
        block = {
            p + "input_layernorm.weight": np.ones(h, np.float32),
            p + "post_attention_layernorm.weight": np.ones(h, np.float32),
            p + "self_attn.q_proj.weight": normal((variant.heads * d, h), 0.02),
            p + "self_attn.k_proj.weight": normal((variant.kv_heads * d, h), 0.02),
            p + "self_attn.v_proj.weight": normal((variant.kv_heads * d, h), 0.02),
            p + "self_attn.o_proj.weight": normal((h, variant.heads * d), 0.02),
            p + "mlp.gate_proj.weight": normal((i, h), 0.02),
            p + "mlp.up_proj.weight": normal((i, h), 0.02),
            p + "mlp.down_proj.weight": normal((h, i), 0.02),
        }
        write_bf16_safetensors(block, directory / f"model-layer{layer}.safetensors")
        del block
    write_bf16_safetensors({"model.norm.weight": np.ones(h, np.float32)}, directory / "model-norm.safetensors")
    weight_map = {
        name: shard.name
        for shard in sorted(directory.glob("model-*.safetensors"))
        for name in read_safetensors_header(shard)
    }
    (directory / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}) + "\n")
    config = {**tiny.config(variant, vocab), "torch_dtype": "bfloat16", "rope_scaling": dict(LLAMA3_ROPE)}
    config["rope_scaling"]["original_max_position_embeddings"] = 8192
    (directory / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    (directory / "generation_config.json").write_text(json.dumps({"bos_token_id": 0, "eos_token_id": 1}) + "\n")
    spec = local.spec_for("llama-8b-width", directory)
    assert spec.vllm is not None
    spec = dataclasses.replace(spec, vllm=dataclasses.replace(spec.vllm, dtype="auto"))
    return directory, spec


def measure(label: str, layers: int, root: Path) -> dict[str, object]:
    if label == LLAMA_8B_WIDTH:
        hf, spec = llama_8b_width(layers, root / "hf")
        parameters = sum(int(p.stat().st_size) for p in hf.glob("*.safetensors")) // 2
        tokens = [len(load_tokenizer(hf).encode(p, add_special_tokens=True)) for p in reference_prompts(spec.family)]
        return run_step(label, layers, root, hf, spec, parameters=parameters, prompt_tokens=sum(tokens))
    family, build = MODELS[label]
    model = build(layers)
    hf = model.save(root / "hf")
    del model
    parameters = sum(int(p.stat().st_size) for p in hf.glob("*.safetensors")) // 4
    checkpoints.word_tokenizer(int(json.loads((hf / "config.json").read_text())["vocab_size"]), family, hf)
    spec = make_spec(family, weight_dtype=WeightDType.FP16, max_output_len={Family.T5: 64}.get(family, 32))
    return run_step(label, layers, root, hf, spec, parameters=parameters, prompt_tokens=0)


def run_step(
    label: str, layers: int, root: Path, hf: Path, spec: ModelSpec, *, parameters: int, prompt_tokens: int
) -> dict[str, object]:
    """``tritonft reference`` in its own process on ``hf``; its figures (FLOPs: 2 per parameter per greedy step and
    per ``prompt_tokens`` token run for the prompts)."""
    (root / "spec.json").write_text(spec.to_json())
    command = [sys.executable, "-m", "tritonft.cli", "reference", "--input", str(hf), "--spec", str(root / "spec.json")]
    command += ["--out", str(root / "ref.json"), "--work", str(root / "work")]
    started = time.monotonic()
    # Its own process; the peak it prints is its image's (VmHWM), not this script's checkpoint building.
    done = subprocess.run(command, check=False, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"tritonft reference failed: {done.stderr}")
    wall = time.monotonic() - started
    printed = done.stdout
    timing = re.search(r"load ([\d.]+) s, reference ([\d.]+) s \(([\d.]+) CPU-s\), peak RSS (\d+) MiB", printed)
    assert timing, printed
    load_s, reference_s, cpu_s, peak_mib = float(timing[1]), float(timing[2]), float(timing[3]), int(timing[4])
    steps = sum(p.steps for p in JudgeReference.from_json((root / "ref.json").read_text()).prompts)
    flops = (steps + prompt_tokens) * 2 * parameters
    return {
        "model": label,
        "layers": layers,
        "parameters": parameters,
        "steps": steps,
        "prompt_tokens": prompt_tokens,
        "load_s": load_s,
        "reference_s": reference_s,
        "wall_s": round(wall, 1),
        "reference_cpu_s": cpu_s,
        "gflops": round(flops / reference_s / 1e9, 2),
        "gflops_per_cpu_second": round(flops / cpu_s / 1e9, 2),
        "load_mb_per_s": round(parameters * 4 / load_s / 1e6, 1),
        "peak_rss_mib": peak_mib,
        "peak_rss_per_fp32_byte": round(peak_mib * 2**20 / (parameters * 4), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="*", default=list(MODELS), choices=[*MODELS, LLAMA_8B_WIDTH])
    parser.add_argument("--layers", type=int, default=1)
    args = parser.parse_args()
    for label in args.models:
        with tempfile.TemporaryDirectory(prefix="judge-cost-") as root:
            print(json.dumps(measure(label, args.layers, Path(root))), flush=True)


if __name__ == "__main__":
    main()
