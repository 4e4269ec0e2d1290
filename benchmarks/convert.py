"""Benchmark ``tritonft convert`` against ``cp`` on t5-base-sized and GPT-2-medium-sized random fp32 checkpoints.

For each model and TP in {1, 2} (plus t5-base TP=2 with ``--source-hash fingerprint``, and t5-base TP=2 of the same
checkpoint as ``tritonft download`` delivers it: offline from a local Hugging Face cache, so ``download.json``
carries the verified source hashes), ``--runs`` rounds, each
timing ``cp -r`` of the checkpoint directory and a fresh ``python -m tritonft convert`` of it back to back (the order
alternates between rounds). Printed per row, all medians except the peak: the converter's wall time, its own timer
(its "in N s": without interpreter start-up and imports), its CPU time (user + system), its peak RSS (from GNU time, see
:func:`run_child`), the wall and CPU time of ``cp``, and the ratio of the wall times; then every
run. It also prints the start-up cost of the CLI alone (``python -m tritonft --version``) and with the modules
``convert`` loads (numpy, the converter), included in the walls, and how long the download step took.

``--floor`` adds a lower bound for t5-base TP=2 from work no converter can avoid: starting up with its imports, writing
the 1.09 GB FT layout (measured as ``cp -r`` of a converted ``2-gpu`` directory: an in-kernel copy, the cheapest
way to put those bytes into files) and the sha256 of every output file the manifest must record (measured in
process), plus one plain memory copy of the bytes FT needs transposed (no transpose can cost less: it moves those
bytes into a new order before they can be written). On 2 cores, assuming perfect parallelism:
``bound = start-up + (cp CPU + sha256 CPU + memcpy CPU) / 2``.

Fairness: before every timed command the checkpoint is read once (both start with the input in the page cache),
``sync`` is called (no writeback of an earlier run in flight), and then the previous command's output is deleted,
so both write into memory the kernel has only just freed (on a VM with free-page reporting, filling the page cache
from memory the hypervisor has taken back costs several times more than the copy itself). Caches are not dropped
(that would slow down every other process on a shared machine and measure the disk, not the converter).

    .venv/bin/python benchmarks/convert.py [--runs 5] [--models t5-base,gpt2-medium] [--tp 1,2]
        [--no-fingerprint-row] [--no-download-row] [--no-floor]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

GNU_TIME = "/usr/bin/time"

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


@dataclass
class Sample:
    wall: float
    cpu: float
    """User + system CPU seconds of the child."""
    peak_mib: float
    stdout: str


@dataclass
class Series:
    convert: list[Sample] = field(default_factory=list)
    own: list[float] = field(default_factory=list)
    cp: list[Sample] = field(default_factory=list)


def run_child(cmd: list[str]) -> Sample:
    """Wall and CPU seconds (rusage from ``wait4``), peak RSS in MiB and stdout of ``cmd``.

    The peak RSS comes from GNU time (``/usr/bin/time -f %M``), not from this process's ``wait4``: a child
    started with vfork/fork + exec inherits the *parent's* high-water RSS in its ``ru_maxrss``, so measured
    directly from here it would report this benchmark's own footprint (e.g. the numpy arrays that built the
    checkpoint) instead of the converter's.
    """
    with tempfile.TemporaryFile() as errors:
        start = time.perf_counter()
        proc = subprocess.Popen([GNU_TIME, "-f", "%M", *cmd], stdout=subprocess.PIPE, stderr=errors)
        assert proc.stdout is not None
        stdout = proc.stdout.read()
        proc.stdout.close()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        errors.seek(0)
        lines = errors.read().decode().splitlines()
        if proc.returncode != 0:
            details = "\n".join(lines)
            raise SystemExit(f"{cmd} failed: {details}")
    peak_kib = int(lines[-1])
    return Sample(wall, usage.ru_utime + usage.ru_stime, peak_kib / 1024, stdout.decode())


def warm(directory: Path) -> None:
    """Read every file once so the command that follows finds its input in the page cache."""
    buffer = bytearray(8 << 20)
    for path in sorted(directory.iterdir()):
        with path.open("rb", buffering=0) as handle:
            while handle.readinto(buffer):
                pass


def prepare(src: Path, leftovers: list[Path]) -> None:
    warm(src)
    os.sync()
    for path in leftovers:  # last, so the freed memory is still warm when the timed command starts
        shutil.rmtree(path, ignore_errors=True)


OWN_TIMER = re.compile(r" in ([0-9.]+)s$", re.MULTILINE)


def measure(src: Path, out: Path, copy: Path, tp: int, source_hash: str, runs: int) -> Series:  # noqa: PLR0917
    convert_cmd = [sys.executable, "-m", "tritonft", "convert", "--input", str(src), "--output", str(out)]
    convert_cmd += ["--tp", str(tp)]
    if source_hash != "sha256":  # the default is left implicit, so older converters can be measured too
        convert_cmd += ["--source-hash", source_hash]
    series = Series()
    for index in range(runs):
        order = ("cp", "convert") if index % 2 == 0 else ("convert", "cp")
        for what in order:
            prepare(src, [out, copy])
            if what == "cp":
                series.cp.append(run_child(["cp", "-r", str(src), str(copy)]))
            else:
                sample = run_child(convert_cmd)
                series.convert.append(sample)
                match = OWN_TIMER.search(sample.stdout.strip())
                series.own.append(float(match.group(1)) if match else float("nan"))
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(copy, ignore_errors=True)
    return series


def startup(runs: int, *code: str) -> float:
    """Median wall of ``python -m tritonft --version`` (no ``code``) or of ``python -c CODE``."""
    cmd = [sys.executable, "-c", *code] if code else [sys.executable, "-m", "tritonft", "--version"]
    return statistics.median(run_child(cmd).wall for _ in range(runs))


CONVERTER_IMPORTS = "import numpy, tritonft.cli, tritonft.convert.cmd_convert, tritonft.convert.writer"
"""What ``tritonft convert`` imports before it starts converting."""


def as_download(src: Path, root: Path) -> tuple[Path, float]:
    """``src`` delivered by ``tritonft download`` (offline, from a Hugging Face cache built here); and its wall."""
    commit = "0" * 40
    store = root / "hub" / "models--bench--checkpoint"
    (store / "blobs").mkdir(parents=True)
    (store / "refs").mkdir()
    (store / "refs" / "main").write_text(commit)
    snapshot = store / "snapshots" / commit
    snapshot.mkdir(parents=True)
    for path in sorted(src.iterdir()):
        with path.open("rb") as handle:
            blob = store / "blobs" / hashlib.file_digest(handle, "sha256").hexdigest()  # an LFS object id
        os.link(path, blob)
        (snapshot / path.name).symlink_to(Path("../../blobs") / blob.name)
    dest = root / "downloaded"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(root / "hub"), "HF_HOME": str(root / "home")}
    cmd = [sys.executable, "-m", "tritonft", "download", "--repo", "bench/checkpoint", "--revision", commit]
    warm(src)
    start = time.perf_counter()
    subprocess.run([*cmd, "--dest", str(dest)], env=env, check=True, capture_output=True)
    return dest, time.perf_counter() - start


def floor(src: Path, root: Path, runs: int, start_up: float) -> None:
    """Print the lower bound described in the module docstring, from medians of ``runs`` measurements."""
    out, copy = root / "floor-out", root / "floor-copy"
    subprocess.run(
        [sys.executable, "-m", "tritonft", "convert", "--input", str(src), "--output", str(out), "--tp", "2"],
        check=True,
        capture_output=True,
    )
    converted = out / "2-gpu"
    weights = sorted(converted.glob("*.bin"))
    total = sum(p.stat().st_size for p in weights)
    transposed = transposed_bytes(src)
    source, target = np.ones(transposed, dtype=np.uint8), np.zeros(transposed, dtype=np.uint8)  # touched: resident
    cp_in, cp_out, hashing, copying = [], [], [], []
    for _ in range(runs):
        before = time.process_time()
        np.copyto(target, source)
        copying.append(time.process_time() - before)
        prepare(src, [copy])
        cp_in.append(run_child(["cp", "-r", str(src), str(copy)]))
        prepare(converted, [copy])
        cp_out.append(run_child(["cp", "-r", str(converted), str(copy)]))
        before = time.process_time()
        for path in weights:
            with path.open("rb") as handle:
                hashlib.file_digest(handle, "sha256")
        hashing.append(time.process_time() - before)
    shutil.rmtree(out)
    shutil.rmtree(copy, ignore_errors=True)
    cp_in_wall = statistics.median(s.wall for s in cp_in)
    cp_out_cpu = statistics.median(s.cpu for s in cp_out)
    sha = statistics.median(hashing)
    memcpy = statistics.median(copying)
    bound = start_up + (cp_out_cpu + sha + memcpy) / 2
    print(
        f"floor, t5-base TP=2 ({len(weights)} files, {total / 1e9:.2f} GB out): start-up with imports "
        f"{start_up:.2f} s; cp -r of the output {statistics.median(s.wall for s in cp_out):.2f} s wall, "
        f"{cp_out_cpu:.2f} s CPU; sha256 of the output {sha:.2f} s CPU; memcpy of the {transposed / 1e9:.2f} GB "
        f"FT stores transposed {memcpy:.2f} s CPU; cp -r of the input {cp_in_wall:.2f} s"
    )
    print(
        f"floor bound = {start_up:.2f} + ({cp_out_cpu:.2f} + {sha:.2f} + {memcpy:.2f}) / 2 = {bound:.2f} s = "
        f"{bound / cp_in_wall:.2f}x cp of the input"
    )


def transposed_bytes(src: Path) -> int:
    """Bytes of the FP32 TP=2 output that come from transposed sources (from the converter's own plan)."""
    from tritonft.convert.model import build_plan, detect_family, load_config
    from tritonft.convert.tensors import open_checkpoint

    config = load_config(src)
    plan = build_plan(detect_family(config, None), config, open_checkpoint(src).shapes, 2)
    return sum(int(np.prod(job.full_shape)) * 4 for job in plan.jobs if job.transpose)


MODELS = {
    "t5-base": (T5_BASE, t5_shapes),
    "gpt2-medium": (GPT2_MEDIUM, gpt2_shapes),
}


def row(label: str, series: Series) -> str:
    walls = [s.wall for s in series.convert]
    cps = [s.wall for s in series.cp]
    wall, cp = statistics.median(walls), statistics.median(cps)
    cpu = statistics.median(s.cpu for s in series.convert)
    cp_cpu = statistics.median(s.cpu for s in series.cp)
    peak = max(s.peak_mib for s in series.convert)
    detail = " ".join(f"{w:.2f}" for w in walls) + " / " + " ".join(f"{c:.2f}" for c in cps)
    return (
        f"{label:<28} {wall:>6.2f} {statistics.median(series.own):>6.2f} {cpu:>6.2f} {peak:>5.0f} "
        f"{cp:>5.2f} {cp_cpu:>6.2f} {wall / cp:>5.2f}  {detail}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=5, help="rounds per row (default: 5)")
    parser.add_argument("--models", default=",".join(MODELS), help=f"comma-separated subset of {list(MODELS)}")
    parser.add_argument("--tp", default="1,2", help="comma-separated TP sizes (default: 1,2)")
    parser.add_argument(
        "--fingerprint-row",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also measure t5-base TP=2 with --source-hash fingerprint (default: on)",
    )
    parser.add_argument(
        "--download-row",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also measure t5-base TP=2 of the checkpoint as `tritonft download` delivers it (default: on)",
    )
    parser.add_argument(
        "--floor",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also print the lower bound for t5-base TP=2 (see the module docstring; default: on)",
    )
    args = parser.parse_args()
    tps = [int(t) for t in args.tp.split(",")]
    with_imports = startup(5, CONVERTER_IMPORTS)
    print(
        f"runs per row: {args.runs}; start-up, medians of 5: CLI (python -m tritonft --version) {startup(5):.2f} s, "
        f"with the converter's imports {with_imports:.2f} s"
    )
    print(
        f"{'model / TP / source hashes':<28} {'conv s':>6} {'own s':>6} {'cpu s':>6} {'MiB':>5} {'cp s':>5} "
        f"{'cp cpu':>6} {'x cp':>5}  convert runs / cp runs"
    )
    with tempfile.TemporaryDirectory(prefix="tritonft-bench-") as tmp:
        root = Path(tmp)
        for label in args.models.split(","):
            config, shapes = MODELS[label]
            src = root / label
            write_checkpoint(src, config, shapes(config))
            modes = [(tp, "sha256") for tp in tps]
            if label == "t5-base" and args.fingerprint_row and 2 in tps:
                modes.append((2, "fingerprint"))
            for tp, mode in modes:
                series = measure(src, root / f"{label}-out", root / f"{label}-copy", tp, mode, args.runs)
                print(row(f"{label} TP={tp} {mode}", series), flush=True)
            if label == "t5-base" and args.download_row and 2 in tps:
                downloaded, took = as_download(src, root)
                series = measure(downloaded, root / f"{label}-out", root / f"{label}-copy", 2, "sha256", args.runs)
                print(row(f"{label} TP=2 from download", series), flush=True)
                print(f"  (that download: offline from the cache, verifying every file's sha256: {took:.2f} s)")
                shutil.rmtree(downloaded)
                shutil.rmtree(root / "hub")
            if label == "t5-base" and args.floor:
                floor(src, root, args.runs, with_imports)
            shutil.rmtree(src)


if __name__ == "__main__":
    main()
