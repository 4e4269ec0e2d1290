#!/usr/bin/env bash
# Set up a fresh machine with only what the quick start runs (the locked .venv and the real Triton; the test tools
# and the test control plane are the test command's: scripts/test.sh) and run the main job on the embedded default:
# an offline synth of the `local` stack (the real Pulumi program under Pulumi's mock engine), written to
# build/synth/local, then what really runs here. One progress line per step, with the seconds it took.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
steps=5
started=$(date +%s)
step=0
begin() {
  step=$((step + 1))
  step_started=$(date +%s)
  echo "[quickstart $step/$steps] $*" >&2
}
done_step() { echo "[quickstart $step/$steps] done in $(($(date +%s) - step_started)) s" >&2; }

begin "install: the locked Python environment (.venv) and the real Triton (scripts/bootstrap.sh --runtime)"
bash scripts/bootstrap.sh --runtime
done_step
begin "synth: the local stack's whole plan under Pulumi's mock engine -> build/synth/local"
.venv/bin/tritonft synth --stack local
done_step
begin "the conversion Job's path on a small random T5: convert -> verify -> repo"
.venv/bin/python scripts/offline_demo.py
done_step
begin "that repository served by a real Triton (the FT step stood in for), probed, then stopped"
.venv/bin/python scripts/serve_demo.py
done_step
begin "seed 004's encoder path on a real model: all-MiniLM-L6-v2 -> ONNX -> real Triton -> OpenAI gateway"
.venv/bin/python scripts/encoder_demo.py --query "A man is eating pasta."
done_step
echo "[quickstart] all $steps steps in $(($(date +%s) - started)) s; the tests: bash scripts/test.sh" >&2
