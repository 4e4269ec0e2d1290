#!/usr/bin/env bash
# Set up a fresh machine and run the main job on the embedded default: an offline synth of the `local` stack
# (the real Pulumi program under Pulumi's mock engine), written to build/synth/local.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/bootstrap.sh
.venv/bin/tritonft synth --stack local
# ...plus what really runs here: the conversion Job's path on a small random T5 (convert -> verify -> repo),
.venv/bin/python scripts/offline_demo.py
# ...and that repository served by a real Triton (the FT step stood in for), probed, then stopped.
.venv/bin/python scripts/serve_demo.py
# ...and seed 004's encoder path on a real model: all-MiniLM-L6-v2 converted to ONNX, served by the real Triton behind
# the OpenAI gateway, ranking sentences by similarity to a question.
.venv/bin/python scripts/encoder_demo.py --query "A man is eating pasta."
