"""``tritonft reference``: the judge's reference of a checkpoint, from its original weights (the reference Job's step).

Example, on a local Hugging Face download and the model's spec (as the Job runs it)::

    tritonft reference --input ./gpt2-hf --spec spec.json --out judge-reference.json
    tritonft reference --input ./llama-3-1-8b-hf --spec llama.json --out judge-reference.json
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--input", required=True, type=Path, help="the Hugging Face checkpoint directory (downloaded)")
    parser.add_argument("--spec", required=True, type=Path, help="the model spec JSON (ModelSpec.to_json())")
    parser.add_argument("--out", required=True, type=Path, help="where to write the reference JSON")
    parser.add_argument("--tokenizer", type=Path, help="directory with the model's tokenizer files (default: --input)")
    parser.add_argument(
        "--work",
        type=Path,
        help="scratch directory for the fp32 conversion the reference reads (removed after; default: TMPDIR; a "
        "Llama-family model's reference reads the Hugging Face files directly)",
    )


def run(args: argparse.Namespace) -> int:
    import resource

    from tritonft import option_file
    from tritonft.errors import UserError
    from tritonft.probe.judge_reference import REFERENCE_ARCHITECTURES, has_reference
    from tritonft.reference.judge import judge_reference, load_original
    from tritonft.reference.llama import Llama, load_llama
    from tritonft.reference.models import T5, Gpt

    spec = option_file.read_spec("--spec", args.spec)
    if not has_reference(spec):
        raise UserError(
            f"--spec: {spec.name} is a {spec.family} model"
            + (f" ({spec.vllm.architecture})" if spec.vllm is not None else "")
            + f"; the reference covers t5, gpt2, gptj and the llama family's {', '.join(REFERENCE_ARCHITECTURES)}"
        )
    if spec.family.is_vllm:  # the files must be the spec's model before any weight is read (as `repo` checks them)
        from tritonft.engines.vllm.engine import require_spec_checkpoint

        require_spec_checkpoint(spec, args.input)
    started = time.monotonic()
    # A vLLM model's reference reads the Hugging Face files as they are (vLLM serves them unconverted).
    model: T5 | Gpt | Llama = load_llama(args.input) if spec.family.is_vllm else load_original(args.input, args.work)
    loaded, loaded_cpu = time.monotonic(), time.process_time()
    reference = judge_reference(model, args.tokenizer or args.input, spec)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    partial = args.out.with_name(args.out.name + ".partial")
    partial.write_text(reference.to_json() + "\n", encoding="utf-8")
    partial.replace(args.out)
    done, done_cpu = time.monotonic(), time.process_time()
    peak_mib = _peak_rss_mib() or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    ties = sum(len(p.near_ties) for p in reference.prompts)
    steps = sum(p.steps for p in reference.prompts)
    branches = sum(1 for p in reference.prompts for t in p.near_ties if t.branch is not None)
    print(
        f"judge reference of {spec.hf_repo}@{spec.revision} ({spec.family}, served {reference.served_dtype}): "
        f"{len(reference.prompts)} prompts ({len(reference.chats)} chat), {steps} greedy steps, {ties} near-ties "
        f"within {reference.tolerance_nats:g} nats ({branches} followed), smallest top-1/top-2 gap "
        f"{reference.min_gap:.3f} nats -> {args.out}"
    )
    print(
        f"load {loaded - started:.1f} s, reference {done - loaded:.1f} s ({done_cpu - loaded_cpu:.1f} CPU-s), "
        f"peak RSS {peak_mib:.0f} MiB"
    )
    return 0


def _peak_rss_mib() -> float | None:
    """This process image's peak resident memory (``VmHWM``: unlike ``ru_maxrss``, not inherited from the process
    that forked it), or None where ``/proc`` has no such line."""
    try:
        lines = Path("/proc/self/status").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return None
