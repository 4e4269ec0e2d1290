#!/usr/bin/env bash
# AIPerf (NVIDIA's LLM benchmark, the successor of genai-perf) in its own tool environment .tools/aiperf, outside
# the project's venv (its pins, e.g. transformers and pandas, are its own): `tritonft bench` runs it for the
# gateway's OpenAI routes. Pinned in tools/aiperf-requirements.txt (from tools/aiperf.in).
# Prints the path of the aiperf command.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

# A venv is not relocatable: made under another path (a moved or linked checkout), its scripts name an interpreter
# that is gone, so the command's own interpreter must exist too.
runs() { [ -x .tools/aiperf/bin/aiperf ] && [ -x "$(sed -n '1s/^#!//p' .tools/aiperf/bin/aiperf)" ]; }
if ! runs || ! cmp -s tools/aiperf-requirements.txt .tools/aiperf/requirements.txt; then
  echo "setup: installing AIPerf into .tools/aiperf" >&2
  rm -rf .tools/aiperf
  uv venv --quiet --python "$(.venv/bin/python -c 'import sys; print(sys.executable)')" .tools/aiperf
  uv pip install --quiet --python .tools/aiperf/bin/python -r tools/aiperf-requirements.txt
  cp tools/aiperf-requirements.txt .tools/aiperf/requirements.txt
fi
echo "$PWD/.tools/aiperf/bin/aiperf"
